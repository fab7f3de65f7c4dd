import APNsModel
@testable import APNsSimulator
import FanoutAPNs
import FanoutCrypto
import Foundation
import FuzzSupport

/// A fresh simulator (fixed clock, no faults) and one connection's token gate, fed requests as the
/// HTTP/2 server session hands them over; checks every answer (`SimulatorAnswer`).
final class SimulatorConnection {
    static let now: Double = 1_772_790_000
    static let teamID = "TEAM000001", keyID = "KEY0000001"
    /// Broadcast-capable; `com.example.exports` is not (its broadcasts get BroadcastFeatureNotEnabled).
    static let broadcastApp = "com.example.sports"

    struct Tokens {
        let pem: String
        let current: String, next: String, expired: String
    }

    static let tokens: Tokens = {
        do {
            let key = try P256PrivateKey.generate()
            func jwt(_ issuedAt: Double) throws -> String {
                try APNsJWT.make(teamID: teamID, keyID: keyID, issuedAt: Int64(issuedAt), key: key)
            }
            return Tokens(pem: try key.publicKey().pemSPKI(), current: try jwt(now - 60), next: try jwt(now - 60 + 1200),
                          expired: try jwt(now - 3700))
        } catch {
            Property.fail("cannot make the provider key: \(error)")
        }
    }()

    let engine: SimulatorEngine
    var gate = ProviderTokenGate()
    var random = SeededRandom(seed: 7)
    var lastChannel = ""

    /// Built once: reading the processor count for the default `threads` is a file read per configuration.
    static let configuration: APNsSimulatorConfiguration = {
        var configuration = APNsSimulatorConfiguration(teamID: teamID, keys: [keyID: tokens.pem],
                                                       apps: ["com.example.exports", broadcastApp])
        configuration.broadcastApps = [broadcastApp]
        configuration.clock = { SimulatorConnection.now }
        configuration.deliveryMemoryCapacity = 64
        configuration.maxTrackedTargets = 64
        configuration.maxChannelsPerApp = 4
        configuration.threads = 1
        return configuration
    }()

    init() {
        do {
            engine = try SimulatorEngine(configuration: Self.configuration)
        } catch {
            Property.fail("the simulator starts with a valid key: \(error)")
        }
    }

    func send(_ bytes: [UInt8]) {
        let (headers, body) = FuzzText.headersAndBody(bytes)
        let request = RequestHead()
        var sent: [RequestHeader: [UInt8]] = [:]
        for (name, value) in headers where FuzzText.isDeliverableFieldName(name) {
            let value = substitute(value)
            guard FuzzText.isDeliverableFieldValue(value) else { continue }
            guard let known = name.withUnsafeBufferPointer({ RequestHeader.named($0) }) else { continue }
            value.withUnsafeBufferPointer { request.set(known, $0) }
            if sent[known] == nil { sent[known] = value }
        }
        body.withUnsafeBufferPointer { request.appendBody($0) }

        let management = sent[.path].map { $0.starts(with: Array("/1/".utf8)) } ?? false
        let acceptedBefore = engine.state.withLock { $0.deliveries.count }
        let plan = management ? engine.handleManagement(request, gate: &gate, random: &random)
                              : engine.handlePush(request, gate: &gate, random: &random)
        let accepted = engine.state.withLock { $0.deliveries.count } - acceptedBefore
        SimulatorAnswer.check(plan, sent: sent, body: body, management: management, accepted: accepted)
        if plan.status == 201, let id = plan.headers.first(where: { $0.0 == "apns-channel-id" })?.1 { lastChannel = id }
    }

    func substitute(_ value: [UInt8]) -> [UInt8] {
        var text = String(decoding: value, as: UTF8.self)
        guard text.contains("$") else { return value }
        text = text.replacingOccurrences(of: "$JWT_NEXT", with: Self.tokens.next)
            .replacingOccurrences(of: "$JWT_EXPIRED", with: Self.tokens.expired)
            .replacingOccurrences(of: "$JWT", with: Self.tokens.current)
            .replacingOccurrences(of: "$CHANNEL", with: lastChannel)
        return Array(text.utf8)
    }
}
