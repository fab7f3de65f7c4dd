import APNsModel
import APNsSimulator
import Foundation
import Synchronization
import Testing
@testable import FanoutAPNs
import FanoutCrypto

/// A settable clock shared by the simulator and the provider-token cache, so JWT ageing is tested
/// without sleeping.
final class FakeUnixClock: Sendable {
    private let seconds: Atomic<Int64>
    init(_ start: Int64 = Int64(Date().timeIntervalSince1970)) { seconds = Atomic(start) }
    var now: Int64 { seconds.load(ordering: .relaxed) }
    func advance(_ by: Int64) { seconds.add(by, ordering: .relaxed) }
}

/// One simulator + key + client per test, over real HTTP/2 + TLS on loopback.
final class SimulatorHarness: Sendable {
    let simulator: APNsSimulator
    let key: P256PrivateKey
    let clock = FakeUnixClock()
    let cache: ProviderTokenCache

    /// `broadcastApps`: the apps with the broadcast capability (nil: every app, the simulator's default).
    init(faults: APNsSimulatorFaults = APNsSimulatorFaults(), broadcastApps: [String]? = nil, maxConcurrentStreams: Int = 1000) throws {
        key = try P256PrivateKey.generate()
        let clock = self.clock
        var configuration = APNsSimulatorConfiguration(teamID: TestApps.teamID,
                                                       keys: [TestApps.keyID: try key.publicKey().pemSPKI()],
                                                       apps: [TestApps.bundleID])
        configuration.broadcastApps = broadcastApps
        configuration.faults = faults
        configuration.maxConcurrentStreams = maxConcurrentStreams
        configuration.threads = 1
        configuration.clock = { Double(clock.now) }
        simulator = try APNsSimulator(configuration: configuration)
        try simulator.start()
        cache = ProviderTokenCache(now: { clock.now })
    }

    func client(_ transport: APNsClientConfiguration.Transport = .curl, connections: Int = 2, maxInFlight: Int = 1000,
                maxQueued: Int = 20_000, key: P256PrivateKey? = nil, keyID: String = TestApps.keyID, management: Bool = false,
                upkeepInterval: Duration = .seconds(60), pingTimeout: Duration = .seconds(10),
                requestTimeout: Duration = .seconds(30), gate: (any WriteGate)? = nil) throws -> APNsClient {
        var configuration = APNsClientConfiguration(
            endpoint: .custom(baseURL: management ? simulator.managementURL : simulator.deviceURL,
                              caFile: simulator.caCertificatePath),
            credentials: [TestApps.bundleID: APNsCredentials(teamID: TestApps.teamID, keyID: keyID, key: key ?? self.key)],
            connections: connections, maxConcurrentStreamsPerConnection: 500, maxInFlight: maxInFlight,
            maxQueued: maxQueued, requestTimeout: requestTimeout, upkeepInterval: upkeepInterval, pingTimeout: pingTimeout,
            reconnectBackoff: (.milliseconds(10), .milliseconds(200)), tokenCache: cache, transport: transport)
        configuration.writeGate = gate
        return try APNsClient(configuration: configuration)
    }

    deinit { simulator.stop() }
}

/// Sends `count` pushes at once and waits (bounded) for every completion; fails the test on a double
/// completion or a request that never completes. Shared by the simulator and nghttpd transport tests.
func sendAll(_ client: APNsClient, count: Int, token: (Int) -> String = { _ in TestApps.token }) async throws -> [APNsResult] {
    let results = Mutex<[Int: APNsResult]>([:])
    let duplicates = Atomic<Int>(0)
    let done = Atomic<Int>(0)
    let requests = try (0..<count).map { try TestApps.push($0, token: token($0)) }
    for (n, request) in requests.enumerated() {
        do {
            try client.send(request) { result in
                let duplicate = results.withLock { table in
                    defer { table[n] = result }
                    return table[n] != nil
                }
                if duplicate { duplicates.add(1, ordering: .relaxed) }
                done.add(1, ordering: .relaxed)
            }
        } catch {
            Issue.record("enqueue \(n): \(error)")
            done.add(1, ordering: .relaxed)
        }
    }
    // Bounded: every request ends within the 30 s request timeout, so only a lost one reaches this
    // deadline, and it fails the test with the client's stats instead of hanging the suite.
    let deadline = ContinuousClock.now + .seconds(120)
    while done.load(ordering: .relaxed) < count && ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(20))
    }
    #expect(duplicates.load(ordering: .relaxed) == 0, "a request completed twice")
    let table = results.withLock { $0 }
    let missing = (0..<count).filter { table[$0] == nil }
    #expect(missing.isEmpty, "every request completes exactly once: \(missing.count) never did (first: \(missing.prefix(10))); \(client.stats)")
    return (0..<count).compactMap { table[$0] }
}

/// The same APNs semantics over both transports.
@Suite struct SimulatorTransportTests {
    static let transports = APNsClientConfiguration.Transport.allCases

    @Test(arguments: transports) func everyResponseClassRoundTrips(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness()
        let gone = "cd" + String(repeating: "0", count: 62)
        let bad = "ef" + String(repeating: "0", count: 62)
        harness.simulator.registerToken(gone, state: .unregistered(timestampMillis: 1_700_000_000_123))
        harness.simulator.registerToken(bad, state: .bad)
        let client = try harness.client(transport)

        let delivered = await client.send(try TestApps.push())
        #expect(delivered.status == 200)
        #expect(delivered.outcome == .delivered)
        #expect(delivered.apnsID != nil)

        let unregistered = await client.send(try TestApps.push(token: gone))
        #expect(unregistered.status == 410)
        #expect(unregistered.reason == .unregistered)
        #expect(unregistered.timestampMillis == 1_700_000_000_123)
        #expect(unregistered.outcome == .tokenGone(reason: "Unregistered", status: 410, apnsTimestampMillis: 1_700_000_000_123))

        let badToken = await client.send(try TestApps.push(token: bad))
        #expect(badToken.outcome == .tokenGone(reason: "BadDeviceToken", status: 400, apnsTimestampMillis: nil))

        // A body that is not a Live Activity payload: the server rejects the payload, not the app.
        let garbage = try APNsRequest.liveActivity(deviceToken: TestApps.token, bundleID: TestApps.bundleID,
                                                   payload: Array("not json".utf8), priority: .conserve,
                                                   expiration: TestApps.expiration)
        let badPayload = await client.send(garbage)
        guard case .badPayload = badPayload.outcome else { Issue.record("expected badPayload, got \(badPayload)"); return }

        // An app the key does not cover: configuration, not the token.
        let otherApp = try APNsClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: harness.simulator.deviceURL, caFile: harness.simulator.caCertificatePath),
            credentials: ["com.example.other": APNsCredentials(teamID: TestApps.teamID, keyID: TestApps.keyID, key: harness.key)],
            tokenCache: harness.cache, transport: transport))
        let wrongTopic = await otherApp.send(try APNsRequest.liveActivity(deviceToken: TestApps.token, bundleID: "com.example.other",
                                                                          payload: TestApps.updatePayload(), priority: .conserve,
                                                                          expiration: TestApps.expiration))
        guard case .configError = wrongTopic.outcome else { Issue.record("expected configError, got \(wrongTopic)"); return }

        // A key the server does not know: InvalidProviderToken, a configuration error.
        let stranger = try harness.client(transport, key: try P256PrivateKey.generate(), keyID: "UNKNOWNKEY")
        let invalid = await stranger.send(try TestApps.push())
        #expect(invalid.reason == .invalidProviderToken)
        #expect(invalid.outcome == .configError(reason: "InvalidProviderToken", status: 403))

        // Server trouble: retry.
        try harness.simulator.setFaults(APNsSimulatorFaults(serviceUnavailableRate: 1))
        let unavailable = await client.send(try TestApps.push(1))
        #expect(unavailable.status == 503)
        guard case .retry = unavailable.outcome else { Issue.record("expected retry, got \(unavailable)"); return }
        try harness.simulator.setFaults(APNsSimulatorFaults(tooManyRequestsRate: 1))
        let throttled = await client.send(try TestApps.push(2))
        #expect(throttled.outcome == .retry(reason: "TooManyRequests", status: 429, after: nil))
        try harness.simulator.setFaults(APNsSimulatorFaults())

        for each in [client, otherApp, stranger] { await each.shutdown(deadline: .now + .seconds(5)) }
    }

    @Test(arguments: transports) func providerTokenIsRefreshedAtTheWindowBoundaryAndNeverTooOften(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness()
        harness.clock.advance(50 * 60 - harness.clock.now % (50 * 60))   // the start of a window
        let first = try harness.client(transport)
        let second = try harness.client(transport)   // a second lane: same cache, so the same JWT
        for result in try await sendAll(first, count: 50) + sendAll(second, count: 50) {
            #expect(result.outcome == .delivered)
        }
        #expect(harness.cache.mintCount == 1, "one JWT per key for the whole process")

        // 50 minutes later the next window's token takes over; both lanes switch without 429.
        harness.clock.advance(50 * 60)
        for result in try await sendAll(first, count: 50) + sendAll(second, count: 50) {
            #expect(result.outcome == .delivered, "refresh must not cause TooManyProviderTokenUpdates: \(result)")
        }
        #expect(harness.cache.mintCount == 2)

        // Ten minutes later nothing is re-minted.
        harness.clock.advance(10 * 60)
        for result in try await sendAll(first, count: 20) { #expect(result.outcome == .delivered) }
        #expect(harness.cache.mintCount == 2)
        await first.shutdown(deadline: .now + .seconds(5))
        await second.shutdown(deadline: .now + .seconds(5))
    }

    @Test(arguments: transports) func freshConnectionsRespectTheSingleStreamBeforeAuth(transport: APNsClientConfiguration.Transport) async throws {
        // 300 pushes fired at once at a brand-new client: the first request on each connection goes
        // alone; if the client opened more streams than the server's initial limit of 1, the
        // simulator would refuse/reset them and they would come back as retry, not delivered.
        let harness = try SimulatorHarness()
        let client = try harness.client(transport, connections: 3)
        let results = try await sendAll(client, count: 300)
        #expect(results.allSatisfy { $0.outcome == .delivered }, "\(results.first { $0.outcome != .delivered }.map { "\($0)" } ?? "")")
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test(arguments: transports) func goAwayMidFlightLosesNothing(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness(faults: APNsSimulatorFaults(goAwayAfterRequests: 100))
        let client = try harness.client(transport, connections: 2)
        let results = try await sendAll(client, count: 2000)
        var delivered = 0
        for result in results {
            switch result.outcome {
            case .delivered: delivered += 1
            case .retry: break
            default: Issue.record("unexpected \(result)")
            }
        }
        #expect(delivered > 0)
        // Every push the client saw delivered reached the server (GOAWAY'd streams may be replayed: at-least-once).
        #expect(harness.simulator.deliveries().count >= delivered)
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test(arguments: transports) func connectionResetsLoseNothing(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness(faults: APNsSimulatorFaults(connectionResetRate: 0.02))
        let client = try harness.client(transport, connections: 2)
        let results = try await sendAll(client, count: 2000)
        let retried = results.filter { if case .retry = $0.outcome { return true } else { return false } }.count
        let delivered = results.filter { $0.outcome == .delivered }.count
        #expect(retried + delivered == 2000)
        #expect(retried > 0, "resets must surface as retry")
        #expect(client.stats.connectionBackoffs > 0, "a reset connection backs off before the next one")
        await client.shutdown(deadline: .now + .seconds(5))
    }

    /// Requests APNs answers late, while it answers others on the same connection, time out one by one
    /// (each a retry) without taking the connection down: no backoff, no probe, the rest delivered.
    @Test(arguments: transports) func slowAnswersTimeOutAloneWhileTheConnectionAnswersOthers(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness()
        let client = try harness.client(transport, connections: 1, requestTimeout: .seconds(1))
        // Opened and authenticated first, so the probe is not among the slow ones.
        #expect(try await sendAll(client, count: 5).allSatisfy { $0.outcome == .delivered })
        // Answers spread over 0–2 s: about half come after the 1 s timeout, with answers to others in between.
        try harness.simulator.setFaults(APNsSimulatorFaults(latencyMillis: 0, latencyJitterMillis: 2000))
        let results = try await sendAll(client, count: 300)
        let timedOut = results.filter { $0.transportFailure?.contains("(request timeout)") == true }
        let delivered = results.filter { $0.outcome == .delivered }
        #expect(timedOut.allSatisfy { if case .retry = $0.outcome { true } else { false } })
        #expect(timedOut.count + delivered.count == 300, "\(results.first { $0.outcome != .delivered && $0.transportFailure?.contains("(request timeout)") != true }.map { "\($0)" } ?? "")")
        #expect(!timedOut.isEmpty && !delivered.isEmpty, "\(timedOut.count) timed out, \(delivered.count) delivered")
        #expect(client.stats.connectionBackoffs == 0, "\(client.stats)")
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test(arguments: transports) func tenThousandConcurrentSends(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness()
        let client = try harness.client(transport, connections: 2, maxInFlight: 1000, maxQueued: 10_000)
        let count = 10_000
        let token = { (n: Int) in String(format: "%064x", n) }
        let results = try await sendAll(client, count: count, token: token)
        // libcurl 7.88 occasionally loses a multiplexed connection under this load (curl 16/55/56, seen
        // in the plain-C ceiling program too); those requests must come back as transport retries.
        let unexpected = results.filter { result in
            if result.outcome == .delivered { return false }
            if case .retry = result.outcome, result.transportFailure != nil { return false }
            return true
        }
        #expect(unexpected.isEmpty, "\(unexpected.count) unexpected outcomes, e.g. \(unexpected.prefix(3))")
        // Completing is not enough: a transport that failed everything as retry would pass the above.
        // At least 99 % must be delivered, and each one the client saw delivered is in the server's log.
        let delivered = Set(results.indices.filter { results[$0].outcome == .delivered }.map(token))
        #expect(delivered.count * 100 >= count * 99, "only \(delivered.count) of \(count) delivered; \(client.stats)")
        let logged = Set(harness.simulator.deliveries().compactMap(\.token))
        #expect(delivered.isSubset(of: logged), "\(delivered.subtracting(logged).count) reported delivered but not in the delivery log")
        #expect(harness.simulator.stats().accepted * 100 >= count * 99, "\(harness.simulator.stats())")
        #expect(client.stats.unmatchedEnds == 0)
        await client.shutdown(deadline: .now + .seconds(5))
    }
}
