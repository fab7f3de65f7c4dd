import APNsSimulator
import FanoutCrypto
import Foundation
import Synchronization
import Testing

@Suite("Provider tokens (JWT) and stream limits")
struct ProviderTokenTests {
    @Test func signatureTeamAndKeyAreChecked() async throws {
        let harness = try SimulatorHarness()
        let stranger = try SimulatorCredentials(teamID: harness.credentials.teamID, keyID: harness.credentials.keyID,
                                                privateKey: P256PrivateKey.generate())
        let wrongTeam = SimulatorCredentials(teamID: "OTHERTEAM1", keyID: harness.credentials.keyID, privateKey: harness.credentials.privateKey)
        let unknownKid = SimulatorCredentials(teamID: harness.credentials.teamID, keyID: "UNKNOWNKID", privateKey: harness.credentials.privateKey)
        let now = Int(Date().timeIntervalSince1970)
        for (name, credentials) in [("other key", stranger), ("other team", wrongTeam), ("unknown kid", unknownKid)] {
            let token = try credentials.providerToken(issuedAt: now)
            let response = try await harness.devicePush(headers: harness.pushHeaders(["authorization": "bearer \(token)"]))
            #expect(response.status == 403, "\(name)")
            #expect(response.reason == "InvalidProviderToken", "\(name)")
        }
        // A tampered signature over a valid token: its first character replaced, so the signature's first
        // byte changes. (Replacing its last two characters left it intact about once in 256 keys: when
        // they were already the replacement, or differed only in the final character's unused bits.)
        var parts = harness.jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        #expect(parts.count == 3)
        let first = try #require(parts[2].first)
        parts[2] = (first == "A" ? "B" : "A") + parts[2].dropFirst()
        let tampered = parts.joined(separator: ".")
        #expect(tampered != harness.jwt)
        let response = try await harness.devicePush(headers: harness.pushHeaders(["authorization": "bearer \(tampered)"]))
        #expect(response.reason == "InvalidProviderToken")
    }

    @Test func tokenOlderThanAnHourIsExpired() async throws {
        let now = Mutex<Double>(1_800_000_000)
        let harness = try SimulatorHarness(clock: { now.withLock { $0 } })
        #expect(try await harness.devicePush().status == 200)
        now.withLock { $0 += 3601 }
        let response = try await harness.devicePush()
        #expect(response.status == 403)
        #expect(response.reason == "ExpiredProviderToken")
        let fresh = try harness.credentials.providerToken(issuedAt: Int(now.withLock { $0 }))
        #expect(try await harness.devicePush(headers: harness.pushHeaders(["authorization": "bearer \(fresh)"])).status == 200)
    }

    /// An iat in milliseconds (or far ahead) is refused instead of never expiring.
    @Test func tokenIssuedInTheFutureIsInvalid() async throws {
        let now = Int(Date().timeIntervalSince1970)
        let harness = try SimulatorHarness()
        let milliseconds = try harness.credentials.providerToken(issuedAt: now * 1000)
        let response = try await harness.devicePush(headers: harness.pushHeaders(["authorization": "bearer \(milliseconds)"]))
        #expect(response.status == 403 && response.reason == "InvalidProviderToken")
        let skewed = try harness.credentials.providerToken(issuedAt: now + 60)
        #expect(try await harness.devicePush(headers: harness.pushHeaders(["authorization": "bearer \(skewed)"])).status == 200)
    }

    @Test func newTokenOnSameConnectionWithin20MinutesIsTooManyUpdates() async throws {
        let harness = try SimulatorHarness()
        let url = "\(harness.simulator.deviceURL)/3/device/\(SimulatorHarness.token)"
        let newer = try harness.credentials.providerToken(issuedAt: Int(Date().timeIntervalSince1970) - 5)
        let responses = try await harness.curlSequence([
            (url, "POST", harness.pushHeaders(), SimulatorHarness.updateBody()),
            (url, "POST", harness.pushHeaders(["authorization": "bearer \(newer)"]), SimulatorHarness.updateBody()),
            (url, "POST", harness.pushHeaders(), SimulatorHarness.updateBody()),
        ])
        #expect(responses.map { $0.status } == [200, 429, 200])
        #expect(responses[1].reason == "TooManyProviderTokenUpdates")
        #expect(harness.simulator.stats().connectionsAccepted == 1, "curl --next must have reused one connection")
        // The same new token on a fresh connection is fine.
        #expect(try await harness.devicePush(headers: harness.pushHeaders(["authorization": "bearer \(newer)"])).status == 200)
    }

    /// A connection opened late in a token's life (after a reconnect) moves to the process's next token
    /// at once: that is one renewal, 45 minutes after the last. Going back to the older token is churn.
    @Test func aRenewalIsMeasuredBetweenTheTokensNotFromTheConnectionsStart() async throws {
        let harness = try SimulatorHarness()
        let url = "\(harness.simulator.deviceURL)/3/device/\(SimulatorHarness.token)"
        let now = Int(Date().timeIntervalSince1970)
        let older = try harness.credentials.providerToken(issuedAt: now - 2700)
        let renewed = try harness.credentials.providerToken(issuedAt: now - 1)
        let responses = try await harness.curlSequence([
            (url, "POST", harness.pushHeaders(["authorization": "bearer \(older)"]), SimulatorHarness.updateBody()),
            (url, "POST", harness.pushHeaders(["authorization": "bearer \(renewed)"]), SimulatorHarness.updateBody()),
            (url, "POST", harness.pushHeaders(["authorization": "bearer \(older)"]), SimulatorHarness.updateBody()),
            (url, "POST", harness.pushHeaders(["authorization": "bearer \(renewed)"]), SimulatorHarness.updateBody()),
        ])
        #expect(responses.map { $0.status } == [200, 200, 429, 200])
        #expect(responses[2].reason == "TooManyProviderTokenUpdates")
        #expect(harness.simulator.stats().connectionsAccepted == 1, "curl --next must have reused one connection")
    }

    /// Fleets whose replicas mint their own tokens for one key draw 429 TooManyProviderTokenUpdates even
    /// on fresh connections: each `devicePush` is its own curl, so its own connection.
    @Test func moreNewTokensForOneKeyThanAllowedWithin20MinutesIsTooManyUpdates() async throws {
        let now = Mutex<Double>(1_800_000_000)
        let harness = try SimulatorHarness(clock: { now.withLock { $0 } })
        #expect(harness.simulator.configuration.maxNewProviderTokensPerKey == 2)
        let start = Int(now.withLock { $0 })
        let replicas = try [start - 30, start - 20, start - 10].map { try harness.credentials.providerToken(issuedAt: $0) }
        func push(_ token: String) async throws -> SimulatorHarness.Response {
            try await harness.devicePush(headers: harness.pushHeaders(["authorization": "bearer \(token)"]))
        }
        #expect(try await push(replicas[0]).status == 200)
        #expect(try await push(replicas[1]).status == 200)
        let third = try await push(replicas[2])
        #expect(third.status == 429)
        #expect(third.reason == "TooManyProviderTokenUpdates")
        #expect(third.json?["detail"] as? String == "key \(harness.credentials.keyID) already brought 2 new provider tokens into use "
                    + "in the last 1200 s; every replica should present the same token")
        // Tokens already in use stay welcome on any connection; the refused one was not counted.
        #expect(try await push(replicas[0]).status == 200)
        #expect(try await push(replicas[1]).status == 200)
        #expect(try await push(replicas[2]).status == 429)
        // 20 minutes after the first two came into use, the third may.
        now.withLock { $0 += 1199 }
        #expect(try await push(replicas[2]).status == 429)
        now.withLock { $0 += 1 }
        #expect(try await push(replicas[2]).status == 200)
        #expect(harness.simulator.stats().responses["429 TooManyProviderTokenUpdates"] == 3)
    }

    @Test func theNewTokenLimitIsPerKeyAndConfigurable() async throws {
        let second = try SimulatorCredentials.generate(keyID: "KEY0000002")
        let harness = try SimulatorHarness(configure: { configuration in
            configuration.keys[second.keyID] = try? second.publicKeyPEM()
            configuration.maxNewProviderTokensPerKey = 3
        })
        let now = Int(Date().timeIntervalSince1970)
        let other = SimulatorCredentials(teamID: harness.credentials.teamID, keyID: second.keyID, privateKey: second.privateKey)
        func push(_ credentials: SimulatorCredentials, _ iat: Int) async throws -> Int {
            let token = try credentials.providerToken(issuedAt: iat)
            return try await harness.devicePush(headers: harness.pushHeaders(["authorization": "bearer \(token)"])).status
        }
        var statuses: [Int] = []
        for offset in 1...4 { statuses.append(try await push(harness.credentials, now - offset)) }
        for offset in 1...3 { statuses.append(try await push(other, now - offset)) }
        #expect(statuses == [200, 200, 200, 429, 200, 200, 200])

        let unlimited = try SimulatorHarness(configure: { $0.maxNewProviderTokensPerKey = 0 })
        for offset in 1...5 {
            let token = try unlimited.credentials.providerToken(issuedAt: now - offset)
            #expect(try await unlimited.devicePush(headers: unlimited.pushHeaders(["authorization": "bearer \(token)"])).status == 200)
        }
    }

    @Test func secondKeyOnSameConnectionIsUnrelated() async throws {
        let second = try SimulatorCredentials.generate(keyID: "KEY0000002")
        let harness = try SimulatorHarness(configure: { configuration in
            configuration.keys[second.keyID] = try? second.publicKeyPEM()
        })
        let url = "\(harness.simulator.deviceURL)/3/device/\(SimulatorHarness.token)"
        let other = try SimulatorCredentials(teamID: harness.credentials.teamID, keyID: second.keyID, privateKey: second.privateKey)
            .providerToken(issuedAt: Int(Date().timeIntervalSince1970))
        let responses = try await harness.curlSequence([
            (url, "POST", harness.pushHeaders(), SimulatorHarness.updateBody()),
            (url, "POST", harness.pushHeaders(["authorization": "bearer \(other)"]), SimulatorHarness.updateBody()),
        ])
        #expect(responses.map { $0.status } == [200, 403])
        #expect(responses[1].reason == "UnrelatedKeyIdInToken")
    }

    /// nghttp (an independent HTTP/2 client) shows the frames: one stream allowed until a valid JWT,
    /// then the configured limit.
    @Test func maxConcurrentStreamsRisesAfterFirstValidToken() async throws {
        let harness = try SimulatorHarness(configure: { $0.maxConcurrentStreams = 777 })
        let bodyFile = harness.scratch + "/body.json"
        try Data(SimulatorHarness.updateBody().utf8).write(to: URL(fileURLWithPath: bodyFile))
        var arguments = ["-v", "-d", bodyFile]
        for (name, value) in harness.pushHeaders() { arguments += ["-H", "\(name): \(value)"] }
        arguments.append("\(harness.simulator.deviceURL)/3/device/\(SimulatorHarness.token)")
        let result = try await SimulatorHarness.run("/usr/bin/nghttp", arguments)
        let limits = Self.receivedStreamLimits(result.stdout)
        #expect(limits == [1, 777], "\(result.stdout)")
        #expect(result.stdout.contains(":status: 200"))
    }

    @Test func streamLimitStaysAtOneWithoutValidToken() async throws {
        let harness = try SimulatorHarness()
        let bodyFile = harness.scratch + "/body.json"
        try Data(SimulatorHarness.updateBody().utf8).write(to: URL(fileURLWithPath: bodyFile))
        var arguments = ["-v", "-d", bodyFile]
        for (name, value) in harness.pushHeaders(["authorization": "bearer x.y.z"]) { arguments += ["-H", "\(name): \(value)"] }
        arguments.append("\(harness.simulator.deviceURL)/3/device/\(SimulatorHarness.token)")
        let result = try await SimulatorHarness.run("/usr/bin/nghttp", arguments)
        #expect(Self.receivedStreamLimits(result.stdout) == [1], "\(result.stdout)")
        #expect(result.stdout.contains(":status: 403"))
    }

    /// SETTINGS_MAX_CONCURRENT_STREAMS values in SETTINGS frames nghttp received, in order.
    static func receivedStreamLimits(_ verbose: String) -> [Int] {
        var receiving = false
        var limits: [Int] = []
        for line in verbose.split(separator: "\n") {
            if line.contains(" recv ") { receiving = line.contains("recv SETTINGS") }
            else if line.contains(" send ") { receiving = false }
            if receiving, let range = line.range(of: "SETTINGS_MAX_CONCURRENT_STREAMS(0x03):") {
                limits.append(Int(line[range.upperBound...].prefix { $0.isNumber }) ?? -1)
            }
        }
        return limits
    }
}
