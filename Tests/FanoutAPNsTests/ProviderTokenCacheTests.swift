import APNsModel
import Foundation
import Testing
@testable import FanoutAPNs
import FanoutCrypto

/// The one-JWT-per-key-for-the-fleet rules, with an injected clock (no sleeping).
@Suite struct ProviderTokenCacheTests {
    /// A multiple of 50 minutes (3000 s) and of 60 (3600 s): the start of a window for both intervals.
    static let windowStart: Int64 = 1_800_000_000 - 1_800_000_000 % 18_000
    let key: P256PrivateKey
    let credentials: APNsCredentials
    let clock = FakeUnixClock(Self.windowStart)

    init() throws {
        key = try P256PrivateKey.generate()
        credentials = APNsCredentials(teamID: "TEAM123456", keyID: "KEY1234567", key: key)
    }

    @Test func tokenIsAValidES256JWTWithFixedBytes() throws {
        clock.advance(1234)
        let cache = ProviderTokenCache(now: { [clock] in clock.now })
        let token = try cache.token(for: credentials)
        let parts = token.jwt.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        #expect(Base64URL.decode(parts[0]) == Array(#"{"alg":"ES256","kid":"KEY1234567"}"#.utf8))
        #expect(Base64URL.decode(parts[1]) == Array(#"{"iss":"TEAM123456","iat":\#(Self.windowStart)}"#.utf8),
                "iat is the window's start, not the minting time")
        #expect(token.issuedAt == Self.windowStart)
        let signature = Base64URL.decode(parts[2])!
        #expect(signature.count == 64)
        #expect(try key.publicKey().verify(signature: signature, message: parts[0] + "." + parts[1]))
        #expect(token.authorizationHeader == "authorization: bearer " + token.jwt)
    }

    @Test func windowsAreMultiplesOfTheIntervalFromTheEpoch() {
        let cache = ProviderTokenCache(refreshInterval: .seconds(50 * 60))
        #expect(cache.windowStart(at: 1_800_000_000) == 1_800_000_000 - 1_800_000_000 % 3000)
        #expect(cache.windowStart(at: 6000) == 6000)
        #expect(cache.windowStart(at: 8999) == 6000)
        #expect(cache.windowStart(at: 0) == 0)
        #expect(cache.windowStart(at: -1) == -3000)
    }

    @Test func oneTokenPerKeyThatChangesExactlyAtTheWindowBoundary() throws {
        let cache = ProviderTokenCache(refreshInterval: .seconds(50 * 60), now: { [clock] in clock.now })
        let first = try cache.token(for: credentials)
        clock.advance(50 * 60 - 1)
        #expect(try cache.token(for: credentials) == first, "the window's last second")
        clock.advance(1)
        let second = try cache.token(for: credentials)
        #expect(second.jwt != first.jwt)
        #expect(second.issuedAt == first.issuedAt + 50 * 60)
        #expect(second.generation == first.generation + 1)
        #expect(cache.mintCount == 2)
        // A second key gets its own token.
        let other = APNsCredentials(teamID: "TEAM123456", keyID: "KEY7654321", key: try P256PrivateKey.generate())
        #expect(try cache.token(for: other).jwt != second.jwt)
    }

    /// Two workers: their own caches, their own copy of the key (loaded from the same .p8), clocks
    /// seconds apart, started at different times in the window: one token, one boundary.
    @Test func independentCachesWithTheSameKeyPresentIdenticalTokens() throws {
        let pem = try key.pemPKCS8()
        let otherCopy = APNsCredentials(teamID: "TEAM123456", keyID: "KEY1234567", key: try P256PrivateKey(pem: pem))
        let behind = FakeUnixClock(Self.windowStart + 7)
        let ahead = FakeUnixClock(Self.windowStart + 40 * 60)
        let early = ProviderTokenCache(now: { [behind] in behind.now })
        let late = ProviderTokenCache(now: { [ahead] in ahead.now })
        let first = try early.token(for: credentials)
        #expect(try late.token(for: otherCopy).jwt == first.jwt)
        behind.advance(49 * 60)
        #expect(try early.token(for: credentials).jwt == first.jwt)
        ahead.advance(10 * 60)   // past the boundary
        let next = try late.token(for: otherCopy)
        #expect(next.jwt != first.jwt)
        behind.advance(60)       // past it too
        #expect(try early.token(for: credentials).jwt == next.jwt)
        #expect(early.mintCount == 2 && late.mintCount == 2)
    }

    @Test func refreshIntervalIsClampedToAppleRange() {
        #expect(ProviderTokenCache(refreshInterval: .seconds(60)).refreshInterval == 20 * 60)
        #expect(ProviderTokenCache(refreshInterval: .seconds(5 * 3600)).refreshInterval == 60 * 60)
        #expect(ProviderTokenCache().refreshInterval == 50 * 60)
    }

    /// A request signed just before the boundary and answered after it: the resend carries the
    /// current window's token, however many connections report the old one.
    @Test func expiredRejectionOfAnEarlierWindowsTokenIsAResendWithTheCurrentOne() throws {
        let cache = ProviderTokenCache(now: { [clock] in clock.now })
        let first = try cache.token(for: credentials)
        clock.advance(50 * 60 + 2)
        for _ in 0..<10 {
            let judgement = cache.tokenRejectedAsExpired(first, for: credentials)
            #expect(judgement.newerTokenExists)
            #expect(!judgement.showsWrongClock)
        }
        let second = try cache.token(for: credentials)
        #expect(second.issuedAt == first.issuedAt + 50 * 60)
        #expect(cache.tokenRejectedAsExpired(first, for: credentials).newerTokenExists, "also once the cache holds it")
        #expect(cache.mintCount == 2)
    }

    /// Within its window the rejected token is the only one any replica presents: a new one would be
    /// the same bytes, so nothing is minted and the clock is named.
    @Test func expiredRejectionOfTheCurrentTokenNamesTheClockAndMintsNothing() throws {
        let cache = ProviderTokenCache(now: { [clock] in clock.now })
        let token = try cache.token(for: credentials)
        clock.advance(30)
        let judgement = cache.tokenRejectedAsExpired(token, for: credentials)
        #expect(judgement.showsWrongClock)
        #expect(judgement.ageSeconds == 30)
        #expect(judgement.minimumClockLeadSeconds == 3570)
        #expect(judgement.secondsUntilNextToken == 50 * 60 - 30)
        #expect(try cache.token(for: credentials) == token)
        #expect(cache.mintCount == 1)
        // At the boundary the next token takes over as usual.
        clock.advance(50 * 60 - 30)
        #expect(try cache.token(for: credentials).generation == token.generation + 1)
    }

    /// With a 60-minute window the token is an hour old at the window's end: APNs's clock a few
    /// seconds ahead rejects it there. That is a wait for the next token, not a wrong clock.
    @Test func expiredRejectionAtTheEndOfASixtyMinuteWindowWaitsForTheNextToken() throws {
        let cache = ProviderTokenCache(refreshInterval: .seconds(3600), now: { [clock] in clock.now })
        let token = try cache.token(for: credentials)
        clock.advance(3600 - 5)
        let judgement = cache.tokenRejectedAsExpired(token, for: credentials)
        #expect(judgement.waitsForNextToken)
        #expect(judgement.secondsUntilNextToken == 5)
        #expect(APNsResponseClassifier.classify(status: 403, reason: .expiredProviderToken, rejectedProviderToken: judgement)
                    == .retry(reason: "ExpiredProviderToken", status: 403, after: .seconds(5)))
        clock.advance(5)
        #expect(try cache.token(for: credentials).issuedAt == token.issuedAt + 3600)
    }

    @Test func aClockSteppingBackKeepsTheNewerToken() throws {
        let cache = ProviderTokenCache(now: { [clock] in clock.now })
        clock.advance(50 * 60)
        let newer = try cache.token(for: credentials)
        clock.advance(-120)
        #expect(try cache.token(for: credentials) == newer)
        #expect(cache.mintCount == 1)
    }

    @Test func concurrentUsersShareOneToken() async throws {
        let cache = ProviderTokenCache(now: { [clock] in clock.now })
        let credentials = self.credentials
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<32 { group.addTask { try cache.token(for: credentials).jwt } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1)
        #expect(cache.mintCount == 1)
    }
}

@Suite struct ConnectionGateTests {
    let start = ContinuousClock.now

    func gate() -> ConnectionGate {
        ConnectionGate(streamCap: 100, idleReprobe: .seconds(60), backoffMinimum: .milliseconds(100),
                       backoffMaximum: .seconds(30), now: start)
    }

    @Test func freshConnectionCarriesOneRequestUntilAuthenticated() {
        var gate = gate()
        #expect(gate.capacity(inFlight: 0, now: start) == 1)
        let epoch = gate.dispatched(now: start)
        #expect(gate.capacity(inFlight: 1, now: start) == 1)
        gate.completed(.response(authenticated: false), epoch: epoch, now: start, jitter: 0.5)
        #expect(gate.capacity(inFlight: 0, now: start) == 1, "a rejected token keeps the single-stream limit")
        let again = gate.dispatched(now: start)
        gate.completed(.response(authenticated: true), epoch: again, now: start, jitter: 0.5)
        #expect(gate.capacity(inFlight: 0, now: start) == 100)
    }

    @Test func failureBacksOffOnceForAllStreamsOfTheDeadConnection() {
        var gate = gate()
        let epoch = gate.dispatched(now: start)
        gate.completed(.response(authenticated: true), epoch: epoch, now: start, jitter: 1)
        let open = (0..<50).map { _ in gate.dispatched(now: start) }
        gate.completed(.transportFailure, epoch: open[0], now: start, jitter: 1)
        #expect(gate.capacity(inFlight: 49, now: start) == 0)
        #expect(gate.backoffDeadline == start + .milliseconds(100))
        for sent in open.dropFirst() { gate.completed(.transportFailure, epoch: sent, now: start, jitter: 1) }
        #expect(gate.consecutiveFailures == 1, "stragglers of the dead connection are not new failures")
        // After the backoff the connection is fresh: one probe, then open.
        let later = start + .milliseconds(101)
        #expect(gate.capacity(inFlight: 0, now: later) == 1)
        let probe = gate.dispatched(now: later)
        gate.completed(.transportFailure, epoch: probe, now: later, jitter: 1)
        #expect(gate.backoffDeadline == later + .milliseconds(200), "exponential")
    }

    @Test func resetProbeNeitherOpensTheConnectionNorBacksOff() {
        var gate = gate()
        let probe = gate.dispatched(now: start)
        gate.completed(.streamReset, epoch: probe, now: start, jitter: 1)
        #expect(gate.capacity(inFlight: 0, now: start) == 1, "no authenticated answer yet: still one stream")
        #expect(gate.backoffDeadline == nil, "the connection is fine")
        #expect(gate.consecutiveFailures == 0)
        let next = gate.dispatched(now: start)
        gate.completed(.response(authenticated: true), epoch: next, now: start, jitter: 1)
        #expect(gate.capacity(inFlight: 0, now: start) == 100)
        // On an open connection a reset stream changes nothing either.
        let open = gate.dispatched(now: start)
        gate.completed(.streamReset, epoch: open, now: start, jitter: 1)
        #expect(gate.capacity(inFlight: 0, now: start) == 100)
    }

    /// One request APNs leaves unanswered while it answers the others is that request's problem: it
    /// fails as retry, and the connection keeps its streams (no backoff, no probe).
    @Test func requestTimeoutWhileTheConnectionAnswersOthersKeepsItOpen() {
        var gate = gate()
        gate.completed(.response(authenticated: true), epoch: gate.dispatched(now: start), now: start, jitter: 1)
        let slow = gate.dispatched(now: start + .milliseconds(10))
        let quick = gate.dispatched(now: start + .milliseconds(20))
        gate.completed(.response(authenticated: true), epoch: quick, now: start + .milliseconds(30), jitter: 1)
        let backedOff = gate.completed(.requestTimedOut(dispatchedAt: start + .milliseconds(10)), epoch: slow,
                                       now: start + .seconds(10), jitter: 1)
        #expect(!backedOff)
        #expect(gate.backoffDeadline == nil)
        #expect(gate.consecutiveFailures == 0)
        #expect(gate.capacity(inFlight: 0, now: start + .seconds(10)) == 100)
    }

    /// A timeout with nothing answered since the request left means the connection is presumed dead:
    /// on an open connection (answers before the request do not count) and on a probe alike.
    @Test func requestTimeoutWithNoAnswerSinceTheRequestLeftBacksOff() {
        var gate = gate()
        gate.completed(.response(authenticated: true), epoch: gate.dispatched(now: start), now: start, jitter: 1)
        let unanswered = gate.dispatched(now: start + .milliseconds(10))
        let backedOff = gate.completed(.requestTimedOut(dispatchedAt: start + .milliseconds(10)), epoch: unanswered,
                                       now: start + .seconds(10), jitter: 1)
        #expect(backedOff)
        #expect(gate.backoffDeadline == start + .seconds(10) + .milliseconds(100))
        // After the backoff: the probe times out too, and the answers of the old connection are forgotten.
        let later = start + .seconds(11)
        #expect(gate.capacity(inFlight: 0, now: later) == 1)
        let probe = gate.dispatched(now: later)
        let probeBackedOff = gate.completed(.requestTimedOut(dispatchedAt: later), epoch: probe, now: later + .seconds(10), jitter: 1)
        #expect(probeBackedOff)
        #expect(gate.consecutiveFailures == 2)
    }

    @Test func jitterIsDrawnOnlyWhenTheConnectionBacksOff() {
        // Every answer passes through here on the transport thread; the system generator is a syscall.
        var gate = gate()
        var draws = 0
        func draw() -> Double { draws += 1; return 0.5 }
        let epoch = gate.dispatched(now: start)
        gate.completed(.response(authenticated: true), epoch: epoch, now: start, jitter: draw())
        gate.completed(.streamReset, epoch: gate.dispatched(now: start), now: start, jitter: draw())
        #expect(draws == 0)
        gate.completed(.transportFailure, epoch: gate.dispatched(now: start), now: start, jitter: draw())
        #expect(draws == 1)
        #expect(gate.backoffDeadline == start + .milliseconds(50), "half of the 100 ms window")
    }

    @Test func backoffIsCapped() {
        let gate = gate()
        #expect(gate.backoffCeiling(afterFailures: 0) == .milliseconds(100))
        #expect(gate.backoffCeiling(afterFailures: 3) == .milliseconds(800))
        #expect(gate.backoffCeiling(afterFailures: 40) == .seconds(30))
    }

    @Test func idleConnectionIsReprobed() {
        var gate = gate()
        let epoch = gate.dispatched(now: start)
        gate.completed(.response(authenticated: true), epoch: epoch, now: start, jitter: 0)
        #expect(gate.capacity(inFlight: 0, now: start + .seconds(30)) == 100)
        #expect(gate.capacity(inFlight: 0, now: start + .seconds(61)) == 1)
    }

    @Test func withoutIdleReprobeAnOpenConnectionStaysOpen() {
        // The nghttp2 transport PINGs idle connections and knows when one dies: no re-probe.
        var gate = ConnectionGate(streamCap: 100, idleReprobe: nil, backoffMinimum: .milliseconds(100),
                                  backoffMaximum: .seconds(30), now: start)
        let epoch = gate.dispatched(now: start)
        gate.completed(.response(authenticated: true), epoch: epoch, now: start, jitter: 0)
        #expect(gate.capacity(inFlight: 0, now: start + .seconds(3600)) == 100)
    }

    @Test func cleanCloseStartsFreshWithoutBackoffButKeepsABackoff() {
        var gate = gate()
        let epoch = gate.dispatched(now: start)
        gate.completed(.response(authenticated: true), epoch: epoch, now: start, jitter: 0)
        gate.connectionClosed()
        #expect(gate.capacity(inFlight: 0, now: start) == 1, "a new connection is probed again")
        #expect(gate.backoffDeadline == nil)
        let probe = gate.dispatched(now: start)
        gate.completed(.transportFailure, epoch: probe, now: start, jitter: 1)
        gate.connectionClosed()
        #expect(gate.backoffDeadline == start + .milliseconds(100), "closing does not cut a backoff short")
    }
}

/// A key that cannot sign is a configuration error (docs/design.md §4: stop sending for the app, report
/// not-ready), never a transport failure retried forever; the text names the cause, not the key.
@Suite struct ProviderTokenSigningFailureTests {
    struct SigningRefused: Error, CustomStringConvertible {
        var description: String { "EVP_DigestSign failed (test)" }
    }

    @Test(arguments: APNsClientConfiguration.Transport.allCases) func unsignableKeyIsAConfigurationError(transport: APNsClientConfiguration.Transport) async throws {
        let cache = ProviderTokenCache(refreshInterval: .seconds(50 * 60), now: { 1_700_000_000 }) { _, _ in throw SigningRefused() }
        // Nothing is sent, so no server is needed: port 9 (discard) on loopback is never reached.
        let client = try APNsClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: "https://127.0.0.1:9", caFile: nil),
            credentials: TestApps.credentials(key: try P256PrivateKey.generate()), connections: 2,
            maxConcurrentStreamsPerConnection: 10, maxInFlight: 10, tokenCache: cache, transport: transport))
        for _ in 0..<3 {
            let result = await client.send(try TestApps.push())
            guard case .configError(let reason, let status) = result.outcome else {
                Issue.record("expected a configuration error, got \(result.outcome)")
                continue
            }
            #expect(status == 0)
            #expect(reason.contains("cannot sign the APNs provider token"))
            #expect(reason.contains(TestApps.keyID))
            #expect(reason.contains("EVP_DigestSign failed (test)"))
        }
        #expect(client.stats.completed == 0, "nothing reached a connection")
        #expect(client.stats.inFlight == 0)
        await client.shutdown(deadline: .now + .seconds(5))
    }
}
