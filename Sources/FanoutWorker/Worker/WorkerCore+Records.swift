import FanoutCore
import FanoutKafka
import Synchronization

/// The engine's side of dead letters and token feedback: which records to produce, and what an
/// acknowledgement resolves. Producing, retrying and reporting a topic that cannot be written are
/// `RecordProducer`'s.
extension WorkerCore {
    /// A record the decoder rejected: dead-letter it, then its offset is done.
    func deadLetterRejected(_ message: KafkaMessage, _ rejection: EventRejection) {
        let source = EventSource(partition: message.topicPartition, offset: message.offset)
        records.deadLetter(message, reason: rejection.reason.rawValue, detail: rejection.detail) { [self] in
            state.withLock { state in
                state.engine.resolveRejected(source)
                state.summary.deadLettered[rejection.reason.rawValue, default: 0] += 1
            }
            wakeTicker()
        }
    }

    /// A dead letter the engine asked for: every source record, then `resolve`.
    func deadLetter(_ letter: DeadLetter) {
        var missing = 0
        let messages: [KafkaMessage]? = state.withLock { state in
            var messages: [KafkaMessage] = []
            for source in letter.sources {
                // Revoked since the engine decided (a race with the intake thread): its offsets were not
                // committed, and the next owner replays and judges these events again.
                guard let retained = state.retained[source.partition] else { return nil }
                if let message = retained.message(at: source.offset) {
                    messages.append(message)
                } else {
                    missing += 1
                    messages.append(KafkaMessage(topic: source.partition.topic, partition: source.partition.partition, offset: source.offset,
                                                 key: Array(letter.target.utf8), value: nil))
                }
            }
            return messages
        }
        guard let messages else {
            log.info("dead letter skipped: its partition was revoked meanwhile; the next owner replays the events",
                     ["reason": .string(letter.reason.rawValue), "key": .string(letter.target)])
            return
        }
        if missing > 0 {
            log.warning("dead-lettering events whose original record is no longer retained: the dead letters carry no value",
                        ["reason": .string(letter.reason.rawValue), "key": .string(letter.target), "count": .int(missing)])
        }
        if letter.reason == .noToken {
            metrics.lane(.activity).decision(.noToken).increment(by: UInt64(messages.count))
        } else {
            for message in messages {
                metrics.lane(lane(of: message.topic)).decision(.deadLettered).increment()
            }
        }
        log.log(.info, "events dead-lettered", ["reason": .string(letter.reason.rawValue), "detail": .string(letter.detail),
                                                "key": .string(letter.target), "count": .int(messages.count)],
                more: EventTraces(messages).logFields)
        let remaining = Atomic<Int>(messages.count)
        for message in messages {
            records.deadLetter(message, reason: letter.reason.rawValue, detail: letter.detail) { [self] in
                let last = remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0
                state.withLock { state in
                    state.summary.deadLettered[letter.reason.rawValue, default: 0] += 1
                    if last { state.engine.resolve(letter.resolution) }
                }
                wakeTicker()
            }
        }
    }

    func produceFeedback(_ feedback: TokenFeedback) {
        // Its offsets stay uncommitted until the record is acknowledged: their records are retained.
        let traces: EventTraces = state.withLock { state in
            guard let partition = feedback.sources.first?.partition else { return EventTraces([]) }
            return EventTraces(offsets: feedback.sources.map(\.offset), in: state.retained[partition])
        }
        records.feedback(feedback, headers: traces.headers) { [self] in
            state.withLock { state in
                state.summary.feedbackRecords += 1
                state.engine.resolve(feedback.resolution)
            }
            wakeTicker()
        }
    }
}
