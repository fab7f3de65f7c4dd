import APNsModel
import Foundation
import Synchronization
import Testing
@testable import FanoutAPNs
import FanoutCrypto

/// The transport against an independent HTTP/2 server (nghttpd): TLS verification with a CA file,
/// multiplexing, bounds, and exactly-once completion. APNs semantics are tested against the simulator.
@Suite(.enabled(if: NghttpdServer.isAvailable, "nghttpd (Debian nghttp2-server) is not installed"))
struct NghttpdTransportTests {
    static let transports = APNsClientConfiguration.Transport.allCases

    func client(_ server: NghttpdServer, _ transport: APNsClientConfiguration.Transport, connections: Int = 2, maxInFlight: Int = 200, maxQueued: Int = 20_000,
                cache: ProviderTokenCache = ProviderTokenCache()) throws -> APNsClient {
        try APNsClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: server.baseURL, caFile: server.caFile),
            credentials: TestApps.credentials(key: try P256PrivateKey.generate()), connections: connections,
            maxConcurrentStreamsPerConnection: 100, maxInFlight: maxInFlight, maxQueued: maxQueued,
            requestTimeout: .seconds(20), tokenCache: cache, transport: transport))
    }

    @Test(arguments: transports) func deliversAndClassifies404(transport: APNsClientConfiguration.Transport) async throws {
        let server = try NghttpdServer(files: ["/3/device/" + TestApps.token: ""])
        let client = try client(server, transport)
        let ok = await client.send(try TestApps.push())
        #expect(ok.status == 200)
        #expect(ok.outcome == .delivered)
        let missing = await client.send(try TestApps.push(token: "cd"))
        #expect(missing.status == 404)
        #expect(missing.outcome == .configError(reason: "HTTP 404 without a reason", status: 404))
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test(arguments: transports) func tenThousandConcurrentSendsEachCompleteOnce(transport: APNsClientConfiguration.Transport) async throws {
        let server = try NghttpdServer(files: ["/3/device/" + TestApps.token: ""])
        let client = try client(server, transport)
        // Exactly once each, bounded (a lost request fails the test with what is left, never hangs it).
        let results = try await sendAll(client, count: 10_000)
        // nghttpd occasionally resets a stream under load (curl 16, HTTP/2 framing); that must surface
        // as a retryable outcome, never as a lost request.
        var answered = 0
        for result in results {
            switch result.outcome {
            case .delivered, .retry: break
            default: Issue.record("unexpected outcome \(result.outcome)")
            }
            if result.status == 200 { answered += 1 }
        }
        // Completing is not enough: a transport that failed everything as retry would pass the above.
        // nghttpd keeps no delivery log, so its 200 answers are what was delivered: at least 99 %.
        #expect(answered * 100 >= 10_000 * 99, "only \(answered) of 10000 answered 200; \(client.stats)")
        #expect(client.stats.inFlight == 0)
        #expect(client.stats.unmatchedEnds == 0)
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test(arguments: transports) func fullQueueIsAnErrorNotADrop(transport: APNsClientConfiguration.Transport) async throws {
        let server = try NghttpdServer(files: ["/3/device/" + TestApps.token: ""])
        let client = try client(server, transport, maxInFlight: 1, maxQueued: 3)
        var accepted = 0
        var rejected = 0
        let completions = Atomic<Int>(0)
        for n in 0..<50 {
            do {
                try client.send(try TestApps.push(n)) { _ in completions.add(1, ordering: .relaxed) }
                accepted += 1
            } catch APNsClientError.queueFull(let limit) {
                #expect(limit == 3)
                rejected += 1
            }
        }
        #expect(rejected > 0)
        await client.shutdown(deadline: .now + .seconds(10))
        #expect(completions.load(ordering: .relaxed) == accepted)
    }

    @Test(arguments: transports) func untrustedServerFailsTLSAsRetry(transport: APNsClientConfiguration.Transport) async throws {
        let server = try NghttpdServer(files: ["/3/device/" + TestApps.token: ""])
        // No CA file: the throwaway CA is not trusted, so verification must fail.
        let client = try APNsClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: server.baseURL, caFile: nil),
            credentials: TestApps.credentials(key: try P256PrivateKey.generate()), tokenCache: ProviderTokenCache(),
            transport: transport))
        let result = await client.send(try TestApps.push())
        #expect(result.status == nil)
        guard case .retry = result.outcome else { Issue.record("expected retry, got \(result.outcome)"); return }
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test(arguments: transports) func shutdownDeadlineFailsQueuedRequestsOnce(transport: APNsClientConfiguration.Transport) async throws {
        let server = try NghttpdServer(files: ["/3/device/" + TestApps.token: ""])
        let client = try client(server, transport, maxInFlight: 1, maxQueued: 1000)
        let count = Atomic<Int>(0)
        for n in 0..<500 { try client.send(try TestApps.push(n)) { _ in count.add(1, ordering: .relaxed) } }
        await client.shutdown(deadline: .now)
        #expect(count.load(ordering: .relaxed) == 500)
        #expect(throws: APNsClientError.shutDown) { try client.send(try TestApps.push()) { _ in } }
    }
}

/// An answered request with a huge body is a response (status kept, body capped, a note), never a
/// transport failure that would back off the connection and retry a request the server answered.
@Suite(.enabled(if: NghttpdServer.isAvailable, "nghttpd (Debian nghttp2-server) is not installed"))
struct ResponseBodyLimitTests {
    @Test(arguments: APNsClientConfiguration.Transport.allCases) func bodyOverTheLimitIsStillAResponse(transport: APNsClientConfiguration.Transport) async throws {
        let limit = 1 << 20
        let server = try NghttpdServer(files: ["/3/device/" + TestApps.token: String(repeating: "x", count: 2 * limit + 17)])
        let client = try APNsClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: server.baseURL, caFile: server.caFile),
            credentials: TestApps.credentials(key: try P256PrivateKey.generate()), connections: 1,
            maxConcurrentStreamsPerConnection: 10, maxInFlight: 10, requestTimeout: .seconds(20),
            tokenCache: ProviderTokenCache(), transport: transport))
        for _ in 0..<2 {
            let response = try await client.perform(try TestApps.push().http)
            #expect(response.status == 200)
            #expect(response.body.count == limit)
            #expect(response.transportFailure == APNsHTTPResponse.bodyOverflowNote(limit: limit))
        }
        #expect(await client.send(try TestApps.push()).outcome == .delivered)
        await client.shutdown(deadline: .now + .seconds(5))
    }
}
