import FanoutKafka
import Foundation
import Synchronization

/// A generated workload: `activities` Live Activities, each registered with its own token first, then
/// rounds of updates (each round a seeded random share of the activities moves to the round's step,
/// with a seeded phase), ending with an `end` for every activity: its final state.
/// Step n carries timestamp `base + n`, so a delivery's step is its `aps.timestamp - base`.
struct FleetWorkload: Sendable {
    static let app = "com.example.exports"
    static let phases = ["queued", "rendering", "uploading", "verifying", "packaging"]
    var activities: Int
    /// Share of the activities that get an event in each round.
    var share: Double
    var seed: UInt64
    var base: Int64

    func key(_ index: Int) -> String { "fleet-\(index)" }
    func token(_ index: Int) -> String { String(repeating: String(format: "%08x", index + 1), count: 8) }

    /// The content state of activity `index` at `step`.
    func state(_ index: Int, step: Int, final: Bool) -> [String: Any] {
        var random = SplitMix(seed: seed ^ UInt64(index) &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(step) &* 0xC2B2_AE3D_27D4_EB4F)
        let phase = final ? "done" : Self.phases[Int(random.next() % UInt64(Self.phases.count))]
        return ["step": step, "phase": phase, "who": index]
    }

    /// Activities (indices) that get an event in round `round`.
    func movers(round: Int) -> [Int] {
        var random = SplitMix(seed: seed &+ UInt64(round) &* 0xD6E8_FEB8_6659_FD93)
        return (0..<activities).filter { _ in Double(random.next() % 1_000_000) / 1_000_000 < share }
    }

    func event(_ index: Int, step: Int, final: Bool) -> String {
        let state = String(decoding: try! JSONSerialization.data(withJSONObject: state(index, step: step, final: final), options: [.sortedKeys]),
                           as: UTF8.self)
        let timestamp = base + Int64(step)
        var json = "{\"v\":1,\"id\":\"\(key(index))-\(step)\",\"app\":\"\(Self.app)\",\"activity\":\"\(key(index))\",\"event\":\"\(final ? "end" : "update")\","
            + "\"timestamp\":\(timestamp),\"content_state\":\(state)"
        if final { json += ",\"dismissal_date\":\(timestamp + 3600)" }
        return json + "}"
    }

    func tokenRecord(_ index: Int) -> String {
        "{\"token\":\"\(token(index))\",\"app\":\"\(Self.app)\",\"environment\":\"production\",\"at\":\(base - 60)}"
    }
}

/// SplitMix64: a tiny seeded generator for the workload.
struct SplitMix {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One event the producer wrote, with where Kafka put it.
struct ProducedEvent: Sendable {
    var activity: Int
    var step: Int
    var final: Bool
    var partition: Int32
    var offset: Int64
}

/// Replays a `FleetWorkload` into `activity-updates` at a round every `interval`, from a task,
/// until `finish()`, which writes the final round and waits for every record's acknowledgement.
final class FleetProducer: Sendable {
    let workload: FleetWorkload
    let producer: KafkaProducer
    private let produced = Mutex<[ProducedEvent]>([])
    private let failures = Mutex<[String]>([])
    private let enqueued = Atomic(0)
    private let stopFlag = Atomic(false)
    private let loop = Mutex<Task<Int, Error>?>(nil)
    /// Activity index → partition of activity-updates (the same for activity-tokens).
    private let partitionOf = Mutex<[Int: Int32]>([:])

    init(workload: FleetWorkload, bootstrap: String) throws {
        self.workload = workload
        // Transient client errors (the broker going away at the end of a test, or on purpose) are retried by librdkafka; a record that
        // fails for good is reported by `settle()`.
        // Back within 1 s of a broker outage, as the workers are (their default): a gap after the outage
        // is then the workers', not this producer's waiting out librdkafka's 10 s reconnect backoff.
        producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: bootstrap, ["linger.ms": "5", "reconnect.backoff.max.ms": "1000"]),
                                     onError: { _ in })
    }

    var events: [ProducedEvent] { produced.withLock { $0 } }
    var partitions: [Int: Int32] { partitionOf.withLock { $0 } }

    /// Every activity's token on activity-tokens, acknowledged.
    func registerTokens() async throws {
        for index in 0..<workload.activities {
            try enqueue("activity-tokens", index, workload.tokenRecord(index)) { [self] report in
                partitionOf.withLock { $0[index] = report.partition }
            }
        }
        try await settle()
    }

    /// Starts the rounds.
    func start(interval: Duration) {
        let task = Task<Int, Error> {
            var round = 0
            let start = ContinuousClock.now
            while !stopFlag.load(ordering: .relaxed) {
                round += 1
                for index in workload.movers(round: round) { try produceEvent(index, step: round, final: false) }
                try await Task.sleep(until: start + interval * round, clock: .continuous)
            }
            return round
        }
        loop.withLock { $0 = task }
    }

    /// Stops the rounds, writes every activity's end (its final state) and waits for all acknowledgements.
    /// Returns the final step.
    @discardableResult
    func finish() async throws -> Int {
        stopFlag.store(true, ordering: .relaxed)
        let rounds = try await loop.withLock { $0 }!.value
        let final = rounds + 1
        for index in 0..<workload.activities { try produceEvent(index, step: final, final: true) }
        try await settle()
        return final
    }

    private func produceEvent(_ index: Int, step: Int, final: Bool) throws {
        try enqueue("activity-updates", index, workload.event(index, step: step, final: final)) { [self] report in
            produced.withLock { $0.append(ProducedEvent(activity: index, step: step, final: final, partition: report.partition, offset: report.offset)) }
        }
    }

    private func enqueue(_ topic: String, _ index: Int, _ value: String, _ done: @escaping @Sendable (KafkaDeliveryReport) -> Void) throws {
        enqueued.add(1, ordering: .relaxed)
        try producer.produce(topic: topic, key: Array(workload.key(index).utf8), value: Array(value.utf8)) { [self] result in
            switch result {
            case .success(let report): done(report)
            case .failure(let error): failures.withLock { $0.append("\(topic) \(index): \(error)") }
            }
        }
    }

    /// Waits until every record enqueued so far is acknowledged (bounded), and none failed.
    private func settle() async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let answered = produced.withLock { $0.count } + partitionOf.withLock { $0.count } + failures.withLock { $0.count }
            if answered >= enqueued.load(ordering: .relaxed) { break }
            guard ContinuousClock.now < deadline else {
                throw FleetError("the producer's records were not all acknowledged within 30 s (\(answered) of \(enqueued.load(ordering: .relaxed)))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let failed = failures.withLock { $0 }
        guard failed.isEmpty else { throw FleetError("\(failed.count) record(s) could not be produced, first: \(failed[0])") }
    }
}
