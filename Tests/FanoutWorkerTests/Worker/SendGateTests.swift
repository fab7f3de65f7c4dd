@testable import FanoutWorker
import FanoutAPNs
import FanoutCrypto
import Foundation
import Testing

/// Each APNs client holds the send gate it asks before every write, so the gate must not hold the
/// clients in turn: that cycle kept every client, its connections and the metrics alive after the
/// worker was released, and every `fanout run` exited 1 under LeakSanitizer.
struct SendGateTests {
    @Test func theGateDoesNotKeepAliveTheClientsItWakes() async throws {
        let gate = SendGate(sessionTimeout: .seconds(45), log: Log(level: .error, sink: { _ in }), metrics: FanoutMetrics())
        weak var released: APNsClient?
        do {
            var configuration = APNsClientConfiguration(endpoint: .custom(baseURL: "https://127.0.0.1:9", caFile: nil),
                                                        credentials: ["com.example.exports": APNsCredentials(teamID: "TEAM000001", keyID: "KEY0000001",
                                                                                                          key: try P256PrivateKey.generate())],
                                                        connections: 1)
            configuration.writeGate = gate
            let client = try APNsClient(configuration: configuration)
            gate.guarding([client])
            released = client
            await client.shutdown(deadline: .now + .seconds(5))
        }
        #expect(released == nil, "the client outlived everything but the gate")
    }
}
