import FanoutCore

/// What one `poll` returned: records in the order librdkafka delivered them (ordered per partition),
/// partitions that reached their current end (only with `enable.partition.eof=true`), and non-fatal
/// errors librdkafka reported meanwhile (broker down, fetch errors, a failed commit inside a revoke);
/// these are informational: librdkafka keeps retrying, but the caller should log or count them.
/// A group consumer's batch also carries the answers to `commitAsync` calls that arrived meanwhile.
public struct KafkaPollBatch: Sendable {
    public var messages: [KafkaMessage] = []
    public var reachedEnd: [PartitionID] = []
    public var errors: [KafkaError] = []
    /// Answers to earlier `KafkaConsumer.commitAsync` calls, each id exactly once across all batches
    /// (and `drainCommitAnswers`), oldest first.
    public var commitAnswers: [KafkaCommitAnswer] = []
    public init() {}
    public var isEmpty: Bool { messages.isEmpty && reachedEnd.isEmpty && errors.isEmpty && commitAnswers.isEmpty }
}
