import FanoutCore

/// Names one `KafkaConsumer.commitAsync`: increasing per consumer, starting at 1.
public struct KafkaCommitID: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "commit#\(rawValue)" }
    public static func < (lhs: KafkaCommitID, rhs: KafkaCommitID) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// The answer to one `commitAsync`, reported once in a poll batch (or by `drainCommitAnswers`).
public struct KafkaCommitAnswer: Sendable, Hashable {
    public var id: KafkaCommitID
    /// The offsets ("next to read") this commit asked for.
    public var offsets: [PartitionID: Int64]
    /// `nil` when every partition was committed. Otherwise `.commit` with the overall librdkafka code
    /// and the partitions the coordinator refused in `partitionFailures` (e.g. ILLEGAL_GENERATION
    /// during a rebalance), or `.closed` when the consumer closed before any answer came.
    public var error: KafkaError?

    public init(id: KafkaCommitID, offsets: [PartitionID: Int64], error: KafkaError?) {
        self.id = id
        self.offsets = offsets
        self.error = error
    }

    /// The offsets the group now holds because of this commit.
    public var committed: [PartitionID: Int64] {
        guard let error else { return offsets }
        if error.code == .closed { return [:] }
        let failed = Set(error.partitionFailures.map(\.partition))
        // An overall failure without per-partition detail stored nothing.
        if failed.isEmpty { return [:] }
        return offsets.filter { !failed.contains($0.key) }
    }
}
