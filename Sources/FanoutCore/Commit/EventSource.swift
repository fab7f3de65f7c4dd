/// A Kafka partition: topic name plus partition number, as the engine and the Kafka adapter both name it.
public struct PartitionID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32
    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }
    public var description: String { "\(topic)/\(partition)" }
    /// By topic, then partition number.
    public static func < (lhs: PartitionID, rhs: PartitionID) -> Bool {
        (lhs.topic, lhs.partition) < (rhs.topic, rhs.partition)
    }
}

/// Where one input record came from.
public struct EventSource: Sendable, Hashable, CustomStringConvertible {
    public var partition: PartitionID
    public var offset: Int64
    public init(partition: PartitionID, offset: Int64) {
        self.partition = partition
        self.offset = offset
    }
    public var description: String { "\(partition)@\(offset)" }
}
