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
