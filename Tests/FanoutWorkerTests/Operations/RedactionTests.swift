import APNsModel
import FanoutKafka
import FanoutTestSupport
import Foundation
import Synchronization
import Testing
@testable import FanoutWorker

/// Where text from outside (librdkafka's lines, an APNs reason, a requested key) leaves the worker,
/// a push token or JWT inside it is masked: each test would fail if one came through whole.
@Suite struct RedactionTests {
    static let token = String(repeating: "9a8b7c6d", count: 8)
    static let jwt = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJURUFNMTIzNDU2In0.c2lnbmF0dXJl"

    static func hasNoSecret(_ text: String) -> Bool {
        !text.contains(token) && !text.contains(jwt) && !text.contains("eyJpc3Mi")
    }

    /// librdkafka names its client by `client.id` in every line; a broker that refuses the connection
    /// makes it log one. The lines, as the worker writes them, carry neither secret.
    @Test func librdkafkaLinesLoseTokensAndJWTs() async throws {
        let unreachable = try RefusingAddress()
        let lines = LineCollector()
        let log = Log(level: .debug, sink: lines.sink)
        var configuration = KafkaConfiguration(bootstrapServers: unreachable.hostAndPort)
        configuration.properties["client.id"] = "fanout-\(Self.token)-\(Self.jwt)"
        let producer = try KafkaProducer(configuration: configuration, onError: { error in
            log.warning("Kafka producer error", ["error": .string(error.description)])
        }, log: KafkaLogBridge.handler(log))
        let deadline = ContinuousClock.now + .seconds(30)
        while !lines.all.contains(where: { $0.contains("\"facility\":\"FAIL\"") }) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        withExtendedLifetime((producer, unreachable)) {}
        let failures = lines.all.filter { $0.contains("\"facility\":\"FAIL\"") }
        #expect(!failures.isEmpty, "librdkafka logged the refused connection")
        for line in lines.all { #expect(Self.hasNoSecret(line), "\(line)") }
        #expect(failures.allSatisfy { $0.contains("fanout-9a8b7c6d…(64)-<jwt redacted>") }, "\(failures.first ?? "")")
    }

    /// A reason label quoting an APNs answer is kept masked; two such answers are one series, never
    /// two that render alike.
    @Test func metricLabelsNeverHoldAWholeToken() {
        let registry = MetricsRegistry()
        let errors = registry.counter("fanout_test_errors_total", help: "Errors.", labels: ["reason"])
        errors.labels("BadDeviceToken \(Self.token) \(Self.jwt)").increment()
        errors.labels("BadDeviceToken \(Self.token) \(Self.jwt)").increment()
        errors.labels("BadTopic").increment()
        let rendered = registry.render()
        #expect(Self.hasNoSecret(rendered), "\(rendered)")
        #expect(rendered.contains("fanout_test_errors_total{reason=\"BadDeviceToken 9a8b7c6d…(64) <jwt redacted>\"} 2"), "\(rendered)")
        #expect(rendered.contains("fanout_test_errors_total{reason=\"BadTopic\"} 1"))
    }

    @Test func readinessAndUnknownTargetsNeverShowAWholeToken() {
        let routes = AdminRoutes(metrics: { "" },
                                 readiness: { Readiness(isReady: false, reasons: ["app com.example.a: APNs 400 \(Self.token) \(Self.jwt)"]) },
                                 liveness: { .alive("1 record(s) wait on: app com.example.a: APNs 400 \(Self.token) \(Self.jwt)") },
                                 target: { _ in nil })
        let ready = String(decoding: routes.respond(to: AdminRequest(method: "GET", path: "/readyz")).body, as: UTF8.self)
        #expect(Self.hasNoSecret(ready) && ready.contains("APNs 400 9a8b7c6d…(64) <jwt redacted>"), "\(ready)")
        let live = String(decoding: routes.respond(to: AdminRequest(method: "GET", path: "/livez")).body, as: UTF8.self)
        #expect(Self.hasNoSecret(live) && live.contains("APNs 400 9a8b7c6d…(64) <jwt redacted>"), "\(live)")
        let unknown = String(decoding: routes.respond(to: AdminRequest(method: "GET", path: "/debug/targets/\(Self.token)")).body,
                             as: UTF8.self)
        #expect(Self.hasNoSecret(unknown) && unknown.contains("9a8b7c6d…(64)"), "\(unknown)")
    }
}
