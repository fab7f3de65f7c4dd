import APNsSimulator
import FanoutKafka
import Foundation
import Synchronization

/// Plays a `DemoScene` in wall-clock time: publishes its records with a real Kafka producer (as the
/// apps' backends would) and flips token states in the simulator (as a user deleting an app would).
/// Records every broker acknowledgement, so the demo knows each partition's end offset.
struct DemoPlayer: Sendable {
    /// Wall seconds per story second at speed 1: the 86-second story plays in about 22 seconds.
    static let wallSecondsPerStorySecond = 0.25

    let scene: DemoScene
    let producer: KafkaProducer
    let simulator: APNsSimulator
    let ledger: ProduceLedger
    let console: DemoConsole
    let speed: Double

    /// Wall time from the scene's start to story second `at`.
    func wallOffset(_ at: Int) -> Duration {
        .nanoseconds(Int64((Double(at) * Self.wallSecondsPerStorySecond / speed * 1e9).rounded()))
    }

    /// The steps at story second 0: the apps' backends registering tokens before anything happens.
    /// The runner plays them first and waits for the worker to apply them, so the story's first
    /// seconds are not spent on the worker catching up with activity-tokens.
    var prelude: ArraySlice<DemoScene.Step> { scene.steps.prefix { $0.at == 0 } }
    var story: ArraySlice<DemoScene.Step> { scene.steps.drop { $0.at == 0 } }

    /// Plays `steps` each at its moment (relative to `start`). Returns when the last record is enqueued;
    /// acknowledgements arrive in `ledger`. Throws when a record cannot be enqueued.
    func play(_ steps: ArraySlice<DemoScene.Step>, from start: ContinuousClock.Instant) async throws {
        for step in steps {
            try await Task.sleep(until: start + wallOffset(step.at), clock: .continuous)
            if let note = step.note { console.story(console.paint("▸ " + note, .dim)) }
            switch step.action {
            case let .produce(topic, key, value):
                ledger.enqueued(topic.rawValue)
                try producer.produce(topic: topic.rawValue, key: Array(key.utf8), value: value) { [ledger] result in
                    ledger.record(result, topic: topic.rawValue)
                }
            case let .unregister(token):
                simulator.registerToken(token, state: .unregistered(timestampMillis: Int64(Date().timeIntervalSince1970 * 1000)))
                ledger.unregistered(token, at: Date().timeIntervalSince1970)
            }
        }
    }
}

/// What the player published and Kafka acknowledged. Thread-safe: completions arrive on librdkafka's
/// background thread.
final class ProduceLedger: Sendable {
    struct State: Sendable {
        var enqueued: [String: Int] = [:]
        var acked: [String: Int] = [:]
        /// Next offset to be written per partition (highest acknowledged offset + 1).
        var ends: [TopicPartition: Int64] = [:]
        var failed: [String: Int] = [:]
        var failures: [String] = []
        /// Token → UNIX seconds when the simulator started answering 410 for it.
        var unregistered: [String: Double] = [:]
    }

    private let state = Mutex(State())

    var snapshot: State { state.withLock { $0 } }

    func enqueued(_ topic: String) { state.withLock { $0.enqueued[topic, default: 0] += 1 } }

    func record(_ result: Result<KafkaDeliveryReport, KafkaError>, topic: String) {
        state.withLock { state in
            switch result {
            case .success(let report):
                state.acked[topic, default: 0] += 1
                let partition = TopicPartition(report.topic, report.partition)
                state.ends[partition] = max(state.ends[partition] ?? 0, report.offset + 1)
            case .failure(let error):
                state.failed[topic, default: 0] += 1
                if state.failures.count < 20 { state.failures.append("\(topic): \(error)") }
            }
        }
    }

    func unregistered(_ token: String, at time: Double) { state.withLock { $0.unregistered[token] = time } }

    /// Every enqueued record acknowledged (or failed).
    var settled: Bool {
        state.withLock { state in
            state.enqueued.allSatisfy { topic, count in (state.acked[topic] ?? 0) + (state.failed[topic] ?? 0) >= count }
        }
    }
}
