import APNsSimulator
import Foundation
import Testing

@Suite("Injected faults")
struct FaultTests {
    @Test func everyRequestFailsWithTheConfiguredStatus() async throws {
        let harness = try SimulatorHarness()
        for (faults, status, reason) in [(APNsSimulatorFaults(internalServerErrorRate: 1), 500, "InternalServerError"),
                                         (APNsSimulatorFaults(serviceUnavailableRate: 1), 503, "ServiceUnavailable"),
                                         (APNsSimulatorFaults(tooManyRequestsRate: 1), 429, "TooManyRequests")] {
            try harness.simulator.setFaults(faults)
            let response = try await harness.devicePush()
            #expect(response.status == status)
            #expect(response.reason == reason)
        }
        try harness.simulator.setFaults(APNsSimulatorFaults())
        #expect(try await harness.devicePush().status == 200)
        #expect(harness.simulator.deliveries().count == 1, "faulted requests are not deliveries")
    }

    /// Any status with any reason, also one Apple does not document, or with no body at all: what a
    /// client must be tested against before live APNs sends it first.
    @Test func injectedAnswerCarriesAnyStatusAndReason() async throws {
        let harness = try SimulatorHarness()
        try harness.simulator.setFaults(APNsSimulatorFaults(injectedAnswer: .init(status: 400, reason: "SomethingAppleAddedLater")))
        let unknown = try await harness.devicePush()
        #expect(unknown.status == 400)
        #expect(unknown.reason == "SomethingAppleAddedLater")
        #expect(unknown.headers["apns-id"] != nil)
        try harness.simulator.setFaults(APNsSimulatorFaults(injectedAnswer: .init(status: 403, reason: nil)))
        let bare = try await harness.devicePush()
        #expect(bare.status == 403)
        #expect(bare.body.isEmpty)
        #expect(harness.simulator.stats().responses["400 SomethingAppleAddedLater"] == 1)
        #expect(harness.simulator.stats().responses["403 (no reason)"] == 1)
        #expect(harness.simulator.deliveries().isEmpty, "answered requests are not deliveries")
        #expect(throws: (any Error).self) {
            try harness.simulator.setFaults(APNsSimulatorFaults(injectedAnswer: .init(status: 200, reason: nil)))
        }
    }

    /// The same seed and the same request sequence (h2load, one stream at a time) give the same fault mix.
    @Test func seededFaultMixRepeats() async throws {
        func run() async throws -> APNsSimulatorStats {
            let harness = try SimulatorHarness(configure: {
                $0.seed = 42
                $0.faults = APNsSimulatorFaults(internalServerErrorRate: 0.2, serviceUnavailableRate: 0.2, tooManyRequestsRate: 0.2)
            })
            let result = try await harness.h2load(requests: 100, clients: 1, streams: 1)
            #expect(result.done == 100, "\(result.output)")
            return harness.simulator.stats()
        }
        let first = try await run(), second = try await run()
        #expect(first.responses == second.responses)
        for (status, reason) in [(500, APNsRejection.internalServerError), (503, .serviceUnavailable), (429, .tooManyRequests)] {
            #expect(first.count(status: status, reason: reason) > 0)
        }
        #expect(first.count(status: 200) > 0)
        #expect(first.responses.values.reduce(0, +) == 100)
    }

    @Test func latencyDelaysResponses() async throws {
        let harness = try SimulatorHarness(configure: { $0.faults = APNsSimulatorFaults(latencyMillis: 300) })
        let started = ContinuousClock.now
        #expect(try await harness.devicePush().status == 200)
        // A lower bound only: the response cannot arrive before the injected delay.
        #expect(ContinuousClock.now - started >= .milliseconds(300))
    }

    /// nghttp shows the GOAWAY frame and its JSON reason; curl then moves to a new connection.
    @Test func goAwayAfterNRequestsCarriesReason() async throws {
        let harness = try SimulatorHarness(configure: { $0.faults = APNsSimulatorFaults(goAwayAfterRequests: 2, goAwayReason: "Shutdown") })
        let url = "\(harness.simulator.deviceURL)/3/device/\(SimulatorHarness.token)"
        let responses = try await harness.curlSequence(Array(repeating: (url, "POST", harness.pushHeaders(), SimulatorHarness.updateBody()), count: 3))
        #expect(responses.map { $0.status } == [200, 200, 200])
        let stats = harness.simulator.stats()
        #expect(stats.goAwaysSent == 1)
        #expect(stats.connectionsAccepted == 2, "curl reconnects after GOAWAY")

        try harness.simulator.setFaults(APNsSimulatorFaults(goAwayAfterRequests: 1, goAwayReason: "Shutdown"))
        let bodyFile = harness.scratch + "/body.json"
        try Data(SimulatorHarness.updateBody().utf8).write(to: URL(fileURLWithPath: bodyFile))
        var arguments = ["-v", "-d", bodyFile]
        for (name, value) in harness.pushHeaders() { arguments += ["-H", "\(name): \(value)"] }
        // A second request keeps nghttp reading until the GOAWAY arrives.
        arguments += [url, "\(harness.simulator.deviceURL)/3/device/\(String(repeating: "cd", count: 32))"]
        let result = try await SimulatorHarness.run("/usr/bin/nghttp", arguments)
        #expect(result.stdout.contains("recv GOAWAY"), "\(result.stdout)")
        #expect(result.stdout.contains("{\"reason\":\"Shutdown\"}"), "\(result.stdout)")
    }

    @Test func connectionResetDropsWithoutResponse() async throws {
        let harness = try SimulatorHarness(configure: { $0.faults = APNsSimulatorFaults(connectionResetRate: 1) })
        await #expect(throws: HarnessError.self) { _ = try await harness.devicePush() }
        #expect(harness.simulator.stats().connectionsReset == 1)
        #expect(harness.simulator.deliveries().isEmpty)
    }

    @Test func outageWindowFailsEverything() async throws {
        let harness = try SimulatorHarness()
        let now = Date().timeIntervalSince1970
        try harness.simulator.setFaults(APNsSimulatorFaults(outageStart: now - 1, outageEnd: now + 600))
        let response = try await harness.devicePush()
        #expect(response.status == 503)
        #expect(response.reason == "ServiceUnavailable")
        try harness.simulator.setFaults(APNsSimulatorFaults(outageStart: now - 10, outageEnd: now - 5))
        #expect(try await harness.devicePush().status == 200)
    }

    @Test func invalidFaultsAreRejected() throws {
        let harness = try SimulatorHarness()
        #expect(throws: APNsSimulatorError.self) { try harness.simulator.setFaults(APNsSimulatorFaults(internalServerErrorRate: 1.5)) }
        #expect(throws: APNsSimulatorError.self) { try harness.simulator.setFaults(APNsSimulatorFaults(outageStart: 10, outageEnd: 5)) }
    }
}
