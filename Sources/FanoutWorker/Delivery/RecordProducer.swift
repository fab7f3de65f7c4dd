import APNsModel
import FanoutCore
import FanoutKafka
import Foundation
import Synchronization

/// A delivered send's state to save, and the resolution its acknowledgement completes (`EngineAction.saveState`).
typealias StateSave = (handoff: TargetHandoff, partition: Int32, resolution: ResolutionID)

/// One `saveStates` call's records: the saves, how many are unanswered, which failed (each
/// goes on alone and is acknowledged by itself), and whom to tell.
private final class StateBatch: Sendable {
    /// Held until the batch's last answer: a record that fails is produced again from here, so each
    /// record's completion carries only its index, not a copy of its state.
    let saves: [StateSave]
    let remaining: Atomic<Int>
    let failed = Mutex<Set<Int>>([])
    let acknowledged: @Sendable ([ResolutionID]) -> Void

    init(saves: [StateSave], acknowledged: @escaping @Sendable ([ResolutionID]) -> Void) {
        self.saves = saves
        self.acknowledged = acknowledged
        remaining = Atomic(saves.count)
    }
}

/// Produces the worker's output records — dead letters to `<source topic><dlq suffix>` and token
/// feedback to the feedback topic — and tells the caller once Kafka acknowledged each, so only
/// then may the offsets a record covers complete.
///
/// A record is retried until acknowledged: after a transient failure every `retryDelay`, after a
/// permanent one (`ProduceFailure`) with a delay doubling up to 30 × `retryDelay`. Its offsets
/// stay incomplete meanwhile, so nothing is lost, but a topic that fails permanently is reported
/// by `problems()` (readiness), counted in `fanout_produce_failures_total` and warned about at most
/// once a minute, until a produce to it succeeds again. After `stop()`, a failure is logged and
/// given up: its offsets are never committed, the next owner replays the events.
///
/// Threading: any thread. Acknowledgements arrive on librdkafka's background thread, retries on
/// a queue of this type's own.
final class RecordProducer: Sendable {
    private let producer: KafkaProducer
    private let deadLetters: DeadLetterProducer
    private let feedbackTopic: String
    private let stateTopic: String
    private let log: Log
    private let metrics: FanoutMetrics
    private let clock: WorkerClock
    private let retryDelay: Duration
    private let health = Mutex(ProduceHealth())
    /// Records produced and not yet acknowledged or given up (including those waiting for a retry).
    private let unacknowledged = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let retryQueue = DispatchQueue(label: "fanout-produce-retry")

    init(producer: KafkaProducer, topics: FanoutConfiguration.Topics, log: Log, metrics: FanoutMetrics, clock: WorkerClock,
         retryDelay: Duration) {
        self.producer = producer
        deadLetters = DeadLetterProducer(producer: producer, topicSuffix: topics.dlqSuffix)
        feedbackTopic = topics.activityTokenFeedback
        stateTopic = topics.state
        self.log = log
        self.metrics = metrics
        self.clock = clock
        self.retryDelay = retryDelay
    }

    /// Records not yet acknowledged (0 when every dead letter and feedback record is in Kafka).
    var outstanding: Int { unacknowledged.load(ordering: .relaxed) }

    /// The worker is shutting down: failures from now on are logged and given up, not retried.
    func stop() { stopped.store(true, ordering: .relaxed) }

    /// One line per output topic that cannot be produced to for good, naming it, the error and what to do.
    func problems() -> [String] { health.withLock { $0.problems } }

    /// Dead-letters `message` with a stable reason code; `acknowledged` runs once Kafka has it.
    func deadLetter(_ message: KafkaMessage, reason: String, detail: String?, acknowledged: @escaping @Sendable () -> Void) {
        let topic = deadLetters.deadLetterTopic(for: message.topic)
        produceReliably(topic: topic, what: "dead letter for \(message.topic)/\(message.partition)/\(message.offset)", attempt: 0,
                        send: { [deadLetters] completion in
                            try deadLetters.deadLetter(message, reason: reason, detail: detail, completion: completion)
                        }, acknowledged: { [metrics] in
                            metrics.deadLetters.labels(message.topic, reason).increment()
                            acknowledged()
                        })
    }

    /// Produces a token feedback record keyed by the activity key; `acknowledged` runs once Kafka has it.
    /// `headers`: the trace contexts of the events the send covered (`EventTraces.headers`).
    func feedback(_ feedback: TokenFeedback, headers: [KafkaHeader], acknowledged: @escaping @Sendable () -> Void) {
        let value = Self.feedbackValue(feedback), key = Array(feedback.key.utf8), topic = feedbackTopic
        produceReliably(topic: topic, what: "token feedback for \(feedback.key)", attempt: 0, send: { [producer] completion in
            try producer.produce(topic: topic, key: key, value: value, headers: headers, completion: completion)
        }, acknowledged: { [metrics] in
            metrics.feedbackRecords.labels(feedback.app, feedback.reason).increment()
            acknowledged()
        })
    }

    /// Saves the target states of delivered sends to the changelog (each keyed by its activity key, in
    /// the partition of its activity partition's number); `acknowledged` runs once with the resolutions
    /// of the records Kafka has, when the last of the batch is answered. A record that fails is
    /// retried on its own (`saveState`) and acknowledged by itself. Per record: its Kafka message and
    /// completion only; values are encoded into one buffer, and health, metrics and the caller's lock
    /// are touched once per batch.
    func saveStates(_ saves: [StateSave],
                    acknowledged: @escaping @Sendable ([ResolutionID]) -> Void) {
        guard !saves.isEmpty else { return }
        let batch = StateBatch(saves: saves, acknowledged: acknowledged)
        let topic = stateTopic
        unacknowledged.add(saves.count, ordering: .relaxed)
        var value: [UInt8] = []
        for (index, save) in saves.enumerated() {
            value.removeAll(keepingCapacity: true)
            save.handoff.encode(into: &value)
            let completion: KafkaProducer.Completion = { [self] result in
                if case .failure(let error) = result { retrySave(batch: batch, index: index, error) }
                finish(batch, topic: topic)
            }
            do {
                var key = save.handoff.key
                try key.withUTF8 { keyBytes in
                    try value.withUnsafeBytes { valueBytes in
                        try producer.produce(topic: topic, partition: save.partition, keyBytes: UnsafeRawBufferPointer(keyBytes),
                                             valueBytes: valueBytes, completion: completion)
                    }
                }
            } catch {
                let failure = error as? KafkaError ?? KafkaError(.produce, reason: "\(error)")
                retrySave(batch: batch, index: index, failure)
                finish(batch, topic: topic)
            }
        }
    }

    /// One record of a batch failed: it leaves the batch and is produced again on its own.
    private func retrySave(batch: StateBatch, index: Int, _ error: KafkaError) {
        let save = batch.saves[index]
        _ = batch.failed.withLock { $0.insert(index) }
        let failure = ProduceFailure(error)
        metrics.produceFailures.labels(stateTopic, failure.kind.rawValue).increment()
        noteFailure(topic: stateTopic, what: "state of \(save.handoff.key)", failure, error)
        retryQueue.asyncAfter(deadline: .now() + ProduceHealth.retryDelay(after: failure.kind, attempt: 1, base: retryDelay).timeInterval) { [self] in
            saveState(save.handoff, partition: save.partition) { [batch] in batch.acknowledged([save.resolution]) }
        }
    }

    /// A record of the batch is answered; the last one acknowledges every record that succeeded.
    private func finish(_ batch: StateBatch, topic: String) {
        unacknowledged.subtract(1, ordering: .relaxed)
        guard batch.remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
        let failed = batch.failed.withLock { $0 }
        let done = failed.isEmpty ? batch.saves.map(\.resolution)
            : batch.saves.indices.filter { !failed.contains($0) }.map { batch.saves[$0].resolution }
        guard !done.isEmpty else { return }
        noteSuccess(topic: topic)
        metrics.stateRecords.labels("saved").increment(by: UInt64(done.count))
        batch.acknowledged(done)
    }

    /// Saves one target state (a batch's record produced again after a failure), retried until acknowledged.
    func saveState(_ handoff: TargetHandoff, partition: Int32, acknowledged: @escaping @Sendable () -> Void) {
        let value = handoff.encoded(), key = Array(handoff.key.utf8), topic = stateTopic
        produceReliably(topic: topic, what: "state of \(handoff.key)", attempt: 0, send: { [producer] completion in
            try producer.produce(topic: topic, partition: partition, key: key, value: value, completion: completion)
        }, acknowledged: { [metrics] in
            metrics.stateRecords.labels("saved").increment()
            acknowledged()
        })
    }

    /// Deletes a forgotten target's changelog record (a tombstone, so compaction drops the key).
    func forgetState(key: String, partition: Int32) {
        let keyBytes = Array(key.utf8), topic = stateTopic
        produceReliably(topic: topic, what: "state tombstone of \(key)", attempt: 0, send: { [producer] completion in
            try producer.produce(topic: topic, partition: partition, key: keyBytes, value: nil, completion: completion)
        }, acknowledged: { [metrics] in
            metrics.stateRecords.labels("forgotten").increment()
        })
    }

    /// `{key, token, app, status, reason, apns_timestamp, observed_at}` (docs/design.md §2), strings escaped by `JSONString`.
    static func feedbackValue(_ feedback: TokenFeedback) -> [UInt8] {
        var json = "{\"key\":"
        JSONString.append(feedback.key, to: &json)
        json += ",\"token\":"
        JSONString.append(feedback.token.hex, to: &json)
        json += ",\"app\":"
        JSONString.append(feedback.app, to: &json)
        json += ",\"status\":\(feedback.status),\"reason\":"
        JSONString.append(feedback.reason, to: &json)
        json += ",\"apns_timestamp\":" + (feedback.apnsTimestampMillis.map(String.init) ?? "null")
        json += ",\"observed_at\":\(feedback.observedAt)}"
        return Array(json.utf8)
    }

    /// - Parameter attempt: retries made so far (0 for the first try).
    /// - Parameter what: names the record in a failure's log line; built only then (a state record is
    ///   produced per delivered send).
    private func produceReliably(topic: String, what: @autoclosure @escaping @Sendable () -> String, attempt: Int,
                                 send: @escaping @Sendable (@escaping KafkaProducer.Completion) throws -> Void,
                                 acknowledged: @escaping @Sendable () -> Void) {
        unacknowledged.add(1, ordering: .relaxed)
        let retry: @Sendable (KafkaError) -> Void = { [self] error in
            let failure = ProduceFailure(error)
            metrics.produceFailures.labels(topic, failure.kind.rawValue).increment()
            if stopped.load(ordering: .relaxed) {
                log.error("record not produced before shutdown; its offsets stay uncommitted and will be replayed",
                          ["record": .string(what()), "error": .string(error.description)])
                unacknowledged.subtract(1, ordering: .relaxed)
                return
            }
            noteFailure(topic: topic, what: what(), failure, error)
            let delay = ProduceHealth.retryDelay(after: failure.kind, attempt: attempt + 1, base: retryDelay)
            retryQueue.asyncAfter(deadline: .now() + delay.timeInterval) { [self] in
                unacknowledged.subtract(1, ordering: .relaxed)
                produceReliably(topic: topic, what: what(), attempt: attempt + 1, send: send, acknowledged: acknowledged)
            }
        }
        do {
            try send { [self] result in
                switch result {
                case .success:
                    noteSuccess(topic: topic)
                    acknowledged()
                    unacknowledged.subtract(1, ordering: .relaxed)
                case .failure(let error):
                    retry(error)
                }
            }
        } catch let error as KafkaError {
            retry(error)
        } catch {
            retry(KafkaError(.produce, reason: "\(error)"))
        }
    }

    private func noteFailure(topic: String, what: String, _ failure: ProduceFailure, _ error: KafkaError) {
        let words = error.underlying == .noError ? error.reason : error.underlying.message
        let now = clock.now()
        let warning = health.withLock { $0.failed(topic: topic, failure, error: words, now: now) }
        guard warning == .warn else { return }
        switch failure.kind {
        case .permanent:
            log.warning(ProduceHealth.problem(topic: topic, ProduceHealth.Trouble(failure: failure, error: words, lastWarned: now))
                            + "; retrying with backoff (repeated at most once a minute)",
                        ["topic": .string(topic), "record": .string(what), "error": .string(error.description)])
        case .transient:
            log.warning("producing failed, retrying; the offsets it covers stay uncommitted meanwhile (repeated at most once a minute)",
                        ["topic": .string(topic), "record": .string(what), "error": .string(error.description)])
        }
    }

    private func noteSuccess(topic: String) {
        guard let ended = health.withLock({ $0.succeeded(topic: topic) }) else { return }
        log.info("producing works again: the records held back are being acknowledged and their offsets can be committed",
                 ["topic": .string(topic), "was": .string("\(ended.failure.kind.rawValue): \(ended.error)")])
    }
}
