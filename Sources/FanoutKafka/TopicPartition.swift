/// A topic and partition: the unit of assignment, ordering, pausing and committing.
public struct TopicPartition: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32
    public init(_ topic: String, _ partition: Int32) {
        self.topic = topic
        self.partition = partition
    }
    public var description: String { "\(topic)/\(partition)" }
    public static func < (lhs: TopicPartition, rhs: TopicPartition) -> Bool {
        (lhs.topic, lhs.partition) < (rhs.topic, rhs.partition)
    }
}

extension TopicPartition {
    /// `topic/0@13, topic/1@4`, sorted: offsets in error messages.
    static func describe(_ offsets: [TopicPartition: Int64]) -> String {
        offsets.keys.sorted().map { "\($0)@\(offsets[$0]!)" }.joined(separator: ", ")
    }
}
