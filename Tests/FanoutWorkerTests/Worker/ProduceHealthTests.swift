import FanoutCore
import FanoutKafka
import Testing
@testable import FanoutWorker

/// What the worker says about an output topic it cannot write to, and how long a record waits.
@Suite struct ProduceHealthTests {
    static let second = Nanoseconds.nanosecondsPerSecond
    static let forbidden = ProduceFailure(KafkaError(.delivery, underlying: .topicAuthorizationFailed, reason: ""))
    static let timedOut = ProduceFailure(KafkaError(.delivery, underlying: .messageTimedOut, reason: ""))

    @Test func aPermanentFailureIsAProblemUntilAProduceSucceeds() throws {
        var health = ProduceHealth()
        #expect(health.failed(topic: "updates-dlq", Self.forbidden, error: "Broker: Topic authorization failed", now: 0) == .warn)
        #expect(health.problems == ["cannot produce to updates-dlq: Broker: Topic authorization failed — grant the worker's Kafka principal write access to the topic; the offsets it covers stay uncommitted"])
        // Another topic is unaffected; its success ends nothing.
        #expect(health.succeeded(topic: "activity-token-feedback") == nil)
        #expect(health.problems.count == 1)
        let recovery = health.succeeded(topic: "updates-dlq")
        let ended = try #require(recovery)
        #expect(ended.failure == Self.forbidden && ended.error == "Broker: Topic authorization failed")
        #expect(health.problems.isEmpty)
        #expect(health.succeeded(topic: "updates-dlq") == nil)
    }

    @Test func aTransientFailureIsNoReadinessProblem() {
        var health = ProduceHealth()
        #expect(health.failed(topic: "updates-dlq", Self.timedOut, error: "Local: Message timed out", now: 0) == .warn)
        #expect(health.problems.isEmpty)
        #expect(health.succeeded(topic: "updates-dlq")?.failure == Self.timedOut)
    }

    @Test func theWarningRepeatsAtMostOnceAMinutePerTopic() {
        var health = ProduceHealth()
        #expect(health.failed(topic: "a", Self.forbidden, error: "e", now: 0) == .warn)
        #expect(health.failed(topic: "b", Self.forbidden, error: "e", now: 1) == .warn)
        #expect(health.failed(topic: "a", Self.forbidden, error: "e", now: 59 * Self.second) == .none)
        #expect(health.failed(topic: "a", Self.forbidden, error: "e", now: 60 * Self.second) == .warn)
        #expect(health.failed(topic: "a", Self.forbidden, error: "e", now: 119 * Self.second) == .none)
        // A change of kind is news at once.
        #expect(health.failed(topic: "a", Self.timedOut, error: "t", now: 119 * Self.second + 1) == .warn)
        #expect(health.problems.filter { $0.contains(" a:") }.isEmpty)
        // After a success, the next failure is news again.
        _ = health.succeeded(topic: "b")
        #expect(health.failed(topic: "b", Self.forbidden, error: "e", now: 2) == .warn)
    }

    @Test func permanentRetriesBackOffToACapTransientOnesDoNot() {
        let base = Duration.milliseconds(200)
        let permanent = (1...8).map { ProduceHealth.retryDelay(after: .permanent, attempt: $0, base: base) }
        #expect(permanent == [0.2, 0.4, 0.8, 1.6, 3.2, 6, 6, 6].map { Duration.milliseconds(Int64($0 * 1000)) })
        #expect(ProduceHealth.retryDelay(after: .permanent, attempt: 10_000, base: base) == .seconds(6))
        #expect((1...8).allSatisfy { ProduceHealth.retryDelay(after: .transient, attempt: $0, base: base) == base })
    }
}
