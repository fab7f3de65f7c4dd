import APNsSimulator
import Foundation
import Testing

@Suite("TLS, ALPN and connection limits")
struct TransportTests {
    func curlExitCode(_ harness: SimulatorHarness, _ extra: [String]) async throws -> Int32 {
        var arguments = ["--silent", "--cacert", harness.simulator.caCertificatePath, "-o", "/dev/null"] + extra
        for (name, value) in harness.pushHeaders() { arguments += ["-H", "\(name): \(value)"] }
        arguments += ["--data-binary", SimulatorHarness.updateBody(), "\(harness.simulator.deviceURL)/3/device/\(SimulatorHarness.token)"]
        return try await SimulatorHarness.run("/usr/bin/curl", arguments).status
    }

    @Test func onlyHTTP2OverTLS12OrLater() async throws {
        let harness = try SimulatorHarness()
        #expect(try await curlExitCode(harness, ["--http2", "--tlsv1.3"]) == 0)
        #expect(try await curlExitCode(harness, ["--http2", "--tlsv1.2", "--tls-max", "1.2"]) == 0)
        #expect(try await curlExitCode(harness, ["--http1.1"]) != 0, "no ALPN h2: the handshake is refused, like APNs")
        #expect(try await curlExitCode(harness, ["--http2", "--tls-max", "1.1"]) != 0, "TLS 1.1 is refused")
        #expect(harness.simulator.stats().count(status: 200) == 2)
    }

    @Test func certificateVerifiesForLocalhostWithoutInsecureFlag() async throws {
        let harness = try SimulatorHarness()
        let url = "https://localhost:\(harness.simulator.port)/3/device/\(SimulatorHarness.token)"
        let response = try await harness.curl(url: url, method: "POST", headers: harness.pushHeaders(), body: SimulatorHarness.updateBody())
        #expect(response.status == 200)
    }

    @Test func manyConnectionsAtOnce() async throws {
        let harness = try SimulatorHarness(configure: { $0.threads = 2 })
        let result = try await harness.h2load(requests: 2000, clients: 200, streams: 1)
        #expect(result.done == 2000 && result.status2xx == 2000, "\(result.output)")
        let stats = harness.simulator.stats()
        #expect(stats.connectionsAccepted == 200)
        #expect(stats.accepted == 2000)
    }

    @Test func connectionsBeyondTheLimitAreClosed() async throws {
        let harness = try SimulatorHarness(configure: { $0.maxConnections = 3 })
        let result = try await harness.h2load(requests: 100, clients: 10, streams: 1)
        let stats = harness.simulator.stats()
        #expect(stats.connectionsRefused > 0, "\(result.output)")
        #expect(stats.accepted == result.status2xx)
    }
}
