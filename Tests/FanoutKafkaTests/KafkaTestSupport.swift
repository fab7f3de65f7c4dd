import Foundation
import Synchronization
@testable import FanoutKafka

/// Per-test unique names so tests sharing a process never share a group or topic.
func uniqueName(_ prefix: String) -> String {
    "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())"
}

/// Group settings from docs/environment.md §1: the mock completes a rebalance only after the rebalance
/// timeout, so keep it short in tests.
func groupConfiguration(_ cluster: MockKafkaCluster, _ extra: [String: String] = [:]) -> KafkaConfiguration {
    cluster.configuration([
        "session.timeout.ms": "6000",
        "max.poll.interval.ms": "7000",
        "heartbeat.interval.ms": "500",
        "topic.metadata.refresh.interval.ms": "1000",
    ].merging(extra) { _, new in new })
}

/// Runs blocking librdkafka calls on a thread of its own, never on the cooperative pool.
func onThread<T: Sendable>(_ name: String = "kafka-test", _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.name = name
        thread.start()
    }
}

struct PollTimedOut: Error, CustomStringConvertible {
    var description: String
}

/// Polls until `done` says so, failing after `limit` (a safety net against hangs, not a timing check).
func pollUntil(_ poll: (Duration) throws -> KafkaPollBatch, limit: Duration = .seconds(60),
               what: String, _ done: (KafkaPollBatch) -> Bool) throws {
    let clock = ContinuousClock()
    let deadline = clock.now + limit
    while clock.now < deadline {
        if done(try poll(.milliseconds(200))) { return }
    }
    throw PollTimedOut(description: "gave up waiting for \(what) after \(limit)")
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
func text(_ bytes: [UInt8]?) -> String? { bytes.map { String(decoding: $0, as: UTF8.self) } }

/// Produces `count` records keyed `key-i` with value `value-i`, waiting for every acknowledgement.
@discardableResult
func produceAll(_ producer: KafkaProducer, topic: String, range: Range<Int>, partition: Int32? = nil,
                headers: [KafkaHeader] = []) async throws -> [KafkaDeliveryReport] {
    try await withThrowingTaskGroup(of: KafkaDeliveryReport.self) { group in
        for index in range {
            group.addTask {
                try await producer.produce(topic: topic, partition: partition, key: bytes("key-\(index)"),
                                           value: bytes("value-\(index)"), headers: headers)
            }
        }
        var reports: [KafkaDeliveryReport] = []
        for try await report in group { reports.append(report) }
        return reports
    }
}

/// Waits (suspending, not blocking a thread) until `condition` holds, failing after `limit`:
/// a safety net against hangs, not a timing check.
func waitUntil(_ what: String, limit: Duration = .seconds(60), _ condition: @Sendable () -> Bool) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + limit
    while !condition() {
        guard clock.now < deadline else { throw PollTimedOut(description: "gave up waiting for \(what) after \(limit)") }
        try await Task.sleep(for: .milliseconds(50))
    }
}

/// A flag shared between a test and its polling threads. It counts as set once `limit` has passed
/// since it was made: a test that fails before it sets the flag (a wait that timed out) must not leave
/// a member polling for the rest of the run, nor hang the scope that awaits that member (`async let`
/// awaits it on the way out). A TSan run whose group tests all timed out hung this way until killed.
final class Flag: Sendable {
    private let state = Mutex(false)
    private let expires: ContinuousClock.Instant
    init(limit: Duration = .seconds(300)) { expires = .now + limit }
    func set() { state.withLock { $0 = true } }
    var isSet: Bool { state.withLock { $0 } || ContinuousClock.now >= expires }
}
