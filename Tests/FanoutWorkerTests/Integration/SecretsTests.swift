import APNsSimulator
import FanoutKafka
import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    /// Text from outside the worker (an APNs answer, an event quoting its input) keeps no whole push
    /// token or JWT on its way to the logs, `/metrics`, `/readyz`, `/debug` and dead-letter headers.
    @Suite struct Secrets {
        static let jwt = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJURUFNMTIzNDU2In0.c2lnbmF0dXJl"

        static func hasNoSecret(_ text: String, token: String) -> Bool {
            !text.contains(token) && !text.contains(jwt) && !text.contains("eyJpc3Mi")
        }

        static func get(_ port: Int, _ path: String) async throws -> String {
            try FanoutWorkerTests.get(port: port, path).body
        }

        static func detail(_ letter: KafkaMessage) -> String {
            letter.header(DeadLetterProducer.detailHeader)?.value.map { String(decoding: $0, as: UTF8.self) } ?? ""
        }

        /// APNs answers with a reason quoting a token and a JWT: first 413 (the event is dead-lettered),
        /// then 400 (the app is paused, its reason shown by `/readyz` and `/debug`).
        @Test func apnsReasonsQuotingSecretsAreMaskedEverywhere() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let token = IntegrationHarness.token(61)
            let quoted = "BadDeviceToken for \(token), bearer \(Self.jwt)"
            let masked = "BadDeviceToken for \(token.prefix(8))…(64), bearer <jwt redacted>"
            let base = IntegrationHarness.now - 60
            let worker = try harness.makeWorker(name: "s", adminServer: true)
            try worker.start()
            let port = try #require(worker.adminPort)

            try harness.simulator.setFaults(APNsSimulatorFaults(injectedAnswer: .init(status: 413, reason: quoted), scope: .devicePushes))
            try await harness.registerToken(key: "rejected", token: token, at: base - 10)
            try await harness.produceEvent(key: "rejected", IntegrationHarness.event(id: "r", key: "rejected", timestamp: base, state: "{}"))
            try await harness.eventually("the 413 dead-lettered") { try !harness.readAll(IntegrationHarness.deadLetters).isEmpty }

            try harness.simulator.setFaults(APNsSimulatorFaults(injectedAnswer: .init(status: 400, reason: quoted), scope: .devicePushes))
            try await harness.registerToken(key: "paused", token: token, at: base - 10)
            try await harness.produceEvent(key: "paused", IntegrationHarness.event(id: "p", key: "paused", timestamp: base, state: "{}"))
            try await harness.eventually("the app paused by the 400") { !worker.isReady().isReady }

            let letters = try harness.readAll(IntegrationHarness.deadLetters)
            #expect(letters.map(Self.detail) == ["APNs 413 " + masked])
            let outputs = ["metrics": try await Self.get(port, "/metrics"), "readyz": try await Self.get(port, "/readyz"),
                           "debug": try await Self.get(port, "/debug/targets/paused")]
            for (name, text) in outputs {
                #expect(Self.hasNoSecret(text, token: token), "\(name): \(text)")
                #expect(text.contains(masked), "\(name) shows the reason, masked: \(text)")
            }
            await worker.stop(timeout: .seconds(5))
            let lines = harness.logs.lines
            #expect(lines.contains { $0.contains(masked) }, "the reason was logged")
            for line in lines where !Self.hasNoSecret(line, token: token) { Issue.record("a log line shows a secret: \(line)") }
        }

        /// Validation messages quote what the producer sent: a Kafka key that is a token, a field name
        /// that is a JWT. The dead letters and the log lines say so without either.
        @Test func rejectionsQuotingTheEventAreMasked() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let token = IntegrationHarness.token(62)
            let base = IntegrationHarness.now - 60
            let worker = try harness.makeWorker(name: "s")
            try worker.start()
            try await harness.produceEvent(key: token, IntegrationHarness.event(id: "k", key: "activity-7", timestamp: base, state: "{}"))
            try await harness.produceEvent(key: "activity-7", "{\"v\":1,\"\(Self.jwt)\":1}")
            try await harness.eventually("both dead-lettered") { try harness.readAll(IntegrationHarness.deadLetters).count == 2 }
            let details = try harness.readAll(IntegrationHarness.deadLetters).map(Self.detail)
            #expect(details.count == 2 && details[0].contains("\"\(token.prefix(8))…(64)\"") && details[1].contains("\"<jwt redacted>\""),
                    "\(details)")
            await worker.stop(timeout: .seconds(5))
            for text in details + harness.logs.lines where !Self.hasNoSecret(text, token: token) {
                Issue.record("a secret came through: \(text)")
            }
        }
    }
}
