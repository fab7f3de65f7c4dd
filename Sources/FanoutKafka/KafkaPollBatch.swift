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

/// Consecutive records of one partition in a batch: librdkafka delivers a fetch's records of a
/// partition together, offsets rising, so a batch is a few such runs. Per-partition bookkeeping
/// done once per run instead of once per record saves a partition lookup (a topic string hashed)
/// per record.
public struct KafkaPartitionRun: Sendable, Equatable {
    public var partition: PartitionID
    /// Indices into the batch's `messages`.
    public var range: Range<Int>

    public init(partition: PartitionID, range: Range<Int>) {
        self.partition = partition
        self.range = range
    }

    /// The runs of `messages`, in order (a partition may have more than one).
    public static func runs(in messages: [KafkaMessage]) -> [KafkaPartitionRun] {
        var runs: [KafkaPartitionRun] = []
        var start = 0
        for index in messages.indices.dropFirst() {
            let previous = messages[index - 1], message = messages[index]
            if message.partition != previous.partition || message.topic != previous.topic {
                runs.append(KafkaPartitionRun(partition: messages[start].topicPartition, range: start..<index))
                start = index
            }
        }
        if !messages.isEmpty { runs.append(KafkaPartitionRun(partition: messages[start].topicPartition, range: start..<messages.count)) }
        return runs
    }
}
