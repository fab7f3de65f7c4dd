import APNsModel
import APNsSimulator
import Foundation
import Testing
@testable import FanoutAPNs
import FanoutCrypto

/// What only the nghttp2 transport does: PING upkeep and dead-connection detection, GOAWAY details,
/// the server's stream limit, and clear TLS/ALPN failures.
@Suite struct HTTP2TransportTests {

    @Test func idleConnectionIsKeptWithPings() async throws {
        let harness = try SimulatorHarness()
        let client = try harness.client(.nghttp2, connections: 1, upkeepInterval: .milliseconds(100))
        #expect(await client.send(try TestApps.push()).outcome == .delivered)
        #expect(try await eventually { client.stats.pingsAcknowledged >= 3 }, "the server acknowledged PINGs on the idle connection")
        // The same connection carries on: PINGs kept it, nothing reconnected.
        #expect(await client.send(try TestApps.push(1)).outcome == .delivered)
        #expect(harness.simulator.stats().connectionsAccepted == 1)
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test func curlTransportReportsNoHTTP2Details() async throws {
        let harness = try SimulatorHarness(maxConcurrentStreams: 7)
        let client = try harness.client(.curl, connections: 1, upkeepInterval: .milliseconds(100))
        #expect(await client.send(try TestApps.push()).outcome == .delivered)
        #expect(client.stats.pingsAcknowledged == 0)
        #expect(client.stats.serverMaxConcurrentStreams == nil)
        #expect(client.stats.lastGoAway == nil)
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test(.enabled(if: NghttpdServer.isAvailable, "nghttpd (Debian nghttp2-server) is not installed"))
    func unansweredPingFailsTheConnectionAsRetryAndReconnects() async throws {
        let server = try NghttpdServer(files: ["/3/device/" + TestApps.token: ""])
        let client = try APNsClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: server.baseURL, caFile: server.caFile),
            credentials: TestApps.credentials(key: try P256PrivateKey.generate()), connections: 1,
            requestTimeout: .seconds(60), upkeepInterval: .milliseconds(100), pingTimeout: .milliseconds(300),
            reconnectBackoff: (.milliseconds(10), .milliseconds(50)), tokenCache: ProviderTokenCache(), transport: .nghttp2))
        #expect(await client.send(try TestApps.push()).status == 200)
        server.pause()
        // The server is frozen: the request gets no answer, the PING neither; long before the
        // 60 s request timeout the connection is declared dead and the request comes back as retry.
        let stuck = await client.send(try TestApps.push(1))
        server.resume()
        #expect(stuck.status == nil)
        guard case .retry = stuck.outcome else { Issue.record("expected retry, got \(stuck)"); return }
        #expect(stuck.transportFailure?.contains("PING") == true, "\(stuck.transportFailure ?? "")")
        #expect(await client.send(try TestApps.push(2)).status == 200, "reconnects after the dead connection")
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test func goAwayCodeLastStreamAndReasonAreSurfaced() async throws {
        let harness = try SimulatorHarness(faults: APNsSimulatorFaults(goAwayAfterRequests: 1, goAwayReason: "Shutdown"))
        let client = try harness.client(.nghttp2, connections: 1)
        // Stream 1 is covered by the GOAWAY's last stream id: it finishes normally.
        #expect(await client.send(try TestApps.push()).outcome == .delivered)
        #expect(try await eventually { client.stats.lastGoAway != nil })
        let goAway = try #require(client.stats.lastGoAway)
        #expect(goAway.errorCode == 0)
        #expect(goAway.errorName == "NO_ERROR")
        #expect(goAway.lastStreamID == 1)
        #expect(goAway.reason == "Shutdown")
        // The next request goes over a new connection.
        #expect(await client.send(try TestApps.push(1)).outcome == .delivered)
        #expect(harness.simulator.stats().connectionsAccepted == 2)
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test func requestsRefusedByGoAwayCarryItsReason() async throws {
        let harness = try SimulatorHarness(faults: APNsSimulatorFaults(goAwayAfterRequests: 40, goAwayReason: "Shutdown"))
        let client = try harness.client(.nghttp2, connections: 1)
        // Streams the client opened after the server's GOAWAY left (above its last stream id) are
        // refused; how many depends on timing, so send rounds until some were (one round always did here).
        var refused = 0
        var otherFailures: [String] = []
        for _ in 0..<10 where refused == 0 {
            for result in try await sendAll(client, count: 3000) where result.outcome != .delivered {
                guard case .retry = result.outcome, let failure = result.transportFailure else { Issue.record("unexpected \(result)"); continue }
                if failure.contains("GOAWAY") {
                    #expect(failure.contains("NO_ERROR") && failure.contains("reason Shutdown"), "\(failure)")
                    refused += 1
                } else {
                    otherFailures.append(failure)
                }
            }
        }
        #expect(refused > 0, "no request was refused by a GOAWAY in 10 rounds")
        // Requests at or below the last stream id finish normally: nothing else failed.
        #expect(otherFailures.isEmpty, "\(otherFailures.prefix(3))")
        #expect(client.stats.lastGoAway?.reason == "Shutdown")
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test func serverStreamLimitIsReadFromSettingsAndHonoured() async throws {
        let harness = try SimulatorHarness(maxConcurrentStreams: 7)
        let client = try harness.client(.nghttp2, connections: 1)
        #expect(await client.send(try TestApps.push()).outcome == .delivered)
        // The simulator raises its limit from 1 to 7 with the first authenticated answer.
        #expect(try await eventually { client.stats.serverMaxConcurrentStreams == 7 })
        let results = try await sendAll(client, count: 500)
        #expect(results.allSatisfy { $0.outcome == .delivered }, "\(results.first { $0.outcome != .delivered }.map { "\($0)" } ?? "")")
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test(.enabled(if: NghttpdServer.isAvailable, "nghttpd (Debian nghttp2-server) is not installed"))
    func independentServersStreamLimitIsRead() async throws {
        let server = try NghttpdServer(files: ["/3/device/" + TestApps.token: ""], maxConcurrentStreams: 13)
        let client = try APNsClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: server.baseURL, caFile: server.caFile),
            credentials: TestApps.credentials(key: try P256PrivateKey.generate()), connections: 1,
            tokenCache: ProviderTokenCache(), transport: .nghttp2))
        #expect(await client.send(try TestApps.push()).status == 200)
        #expect(client.stats.serverMaxConcurrentStreams == 13)
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test func certificateFromAnotherCAFailsVerificationClearly() async throws {
        let harness = try SimulatorHarness()
        let other = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-otherca-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: other) }
        let otherCA = try CertificateAuthority.generateLoopbackServerFiles(in: other).caCertificatePath
        for caFile in [otherCA, nil] {
            let client = try APNsClient(configuration: APNsClientConfiguration(
                endpoint: .custom(baseURL: harness.simulator.deviceURL, caFile: caFile),
                credentials: TestApps.credentials(key: harness.key), connections: 1, tokenCache: harness.cache, transport: .nghttp2))
            let result = await client.send(try TestApps.push())
            #expect(result.status == nil)
            guard case .retry = result.outcome else { Issue.record("expected retry, got \(result)"); continue }
            #expect(result.transportFailure?.contains("certificate verification failed") == true, "\(result.transportFailure ?? "")")
            await client.shutdown(deadline: .now + .seconds(5))
        }
        #expect(harness.simulator.stats().requests == 0)
    }

    @Test func hostNameIsVerifiedWithSNIAndIPAddressesToo() async throws {
        // Listening on every IPv4 address, so the certificate (localhost, 127.0.0.1, ::1) can be reached by other names.
        let key = try P256PrivateKey.generate()
        let simulator = try APNsSimulator.startedOnEveryAddress(key: key)
        defer { simulator.stop() }
        func send(to host: String) async throws -> APNsResult {
            let client = try APNsClient(configuration: APNsClientConfiguration(
                endpoint: .custom(baseURL: "https://\(host):\(simulator.port)", caFile: simulator.caCertificatePath),
                credentials: TestApps.credentials(key: key), connections: 1, tokenCache: ProviderTokenCache(), transport: .nghttp2))
            let result = await client.send(try TestApps.push())
            await client.shutdown(deadline: .now + .seconds(5))
            return result
        }
        // A DNS name the certificate lists (checked with SNI; if localhost resolves to ::1 first, that connect is
        // refused and the next address is tried), and an IP literal it lists.
        for host in ["localhost", "127.0.0.1"] {
            let result = try await send(to: host)
            #expect(result.outcome == .delivered, "\(host): \(result)")
        }
        // Another loopback address reaches the same server, but the certificate does not name it.
        let mismatch = try await send(to: "127.0.0.2")
        #expect(mismatch.status == nil)
        #expect(mismatch.transportFailure?.contains("certificate verification failed") == true, "\(mismatch.transportFailure ?? "")")
    }

    @Test(.enabled(if: PlainTLSServer.isAvailable, "the openssl CLI is not installed"))
    func serverWithoutHTTP2ALPNFailsClearly() async throws {
        let server = try PlainTLSServer()
        let client = try APNsClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: server.baseURL, caFile: server.caFile),
            credentials: TestApps.credentials(key: try P256PrivateKey.generate()), connections: 1,
            tokenCache: ProviderTokenCache(), transport: .nghttp2))
        let result = await client.send(try TestApps.push())
        #expect(result.status == nil)
        guard case .retry = result.outcome else { Issue.record("expected retry, got \(result)"); return }
        #expect(result.transportFailure?.contains("did not select HTTP/2 in ALPN") == true, "\(result.transportFailure ?? "")")
        await client.shutdown(deadline: .now + .seconds(5))
    }
}
