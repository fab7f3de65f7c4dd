import APNsSimulator
import Foundation
import Testing

@Suite("Start, stop and restart")
struct LifecycleTests {
    /// One device push with curl against `simulator`, verifying its own CA; curl's exit status.
    static func curlPush(_ simulator: APNsSimulator, harness: SimulatorHarness) async throws -> SimulatorHarness.ProcessResult {
        var arguments = ["--http2", "--silent", "--show-error", "--cacert", simulator.caCertificatePath, "-o", "/dev/null",
                         "-w", "%{http_code}"]
        for (name, value) in harness.pushHeaders() { arguments += ["-H", "\(name): \(value)"] }
        arguments += ["--data-binary", SimulatorHarness.updateBody(), "\(simulator.deviceURL)/3/device/\(SimulatorHarness.token)"]
        return try await SimulatorHarness.run("/usr/bin/curl", arguments)
    }

    /// "APNs is back up on the same address": a stopped simulator frees its ports for the next one.
    @Test func aStoppedSimulatorFreesItsPortsForANewOne() async throws {
        let harness = try SimulatorHarness(configure: { $0.threads = 2 })
        let first = try await Self.curlPush(harness.simulator, harness: harness)
        #expect(first.status == 0 && first.stdout == "200", "\(first.stderr)")
        var configuration = harness.simulator.configuration
        configuration.port = harness.simulator.port
        configuration.managementPort = harness.simulator.managementPort
        configuration.controlPort = harness.simulator.controlPort
        harness.simulator.stop()

        let replacement = try APNsSimulator(configuration: configuration)
        try replacement.start()
        defer { replacement.stop() }
        #expect(replacement.port == configuration.port)
        let second = try await Self.curlPush(replacement, harness: harness)
        #expect(second.status == 0 && second.stdout == "200", "\(second.stderr)")
        #expect(replacement.stats().count(status: 200) == 1)
    }

    /// Stop and start the same simulator again (new ports unless configured).
    @Test func theSameSimulatorRestarts() async throws {
        let harness = try SimulatorHarness()
        harness.simulator.stop()
        #expect(harness.simulator.port == 0)
        try harness.simulator.start()
        let result = try await Self.curlPush(harness.simulator, harness: harness)
        #expect(result.status == 0 && result.stdout == "200", "\(result.stderr)")
    }

    @Test func listensOnIPv6Loopback() async throws {
        let harness = try SimulatorHarness(configure: { $0.host = "::1" })
        #expect(harness.simulator.deviceURL == "https://[::1]:\(harness.simulator.port)")
        let result = try await Self.curlPush(harness.simulator, harness: harness)
        #expect(result.status == 0 && result.stdout == "200", "certificate SAN ::1 verifies: \(result.stderr)")
    }

    @Test func aHostNameIsRejectedWithAClearError() throws {
        let credentials = try SimulatorCredentials.generate()
        var configuration = APNsSimulatorConfiguration(
            teamID: credentials.teamID, keys: [credentials.keyID: try credentials.publicKeyPEM()], apps: [SimulatorHarness.app])
        configuration.host = "localhost"
        #expect {
            try APNsSimulator(configuration: configuration)
        } throws: { error in
            "\(error)".contains("numeric IPv4 or IPv6 address")
        }
    }
}
