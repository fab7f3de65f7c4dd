import FanoutCore

public struct KafkaHeader: Sendable, Hashable {
    public var name: String
    /// `nil` is a header with a null value (distinct from an empty one).
    public var value: [UInt8]?
    public init(name: String, value: [UInt8]?) {
        self.name = name
        self.value = value
    }
    public init(name: String, string: String) {
        self.init(name: name, value: Array(string.utf8))
    }
}

/// One consumed record, copied out of librdkafka before its C message was destroyed.
public struct KafkaMessage: Sendable, Hashable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    public var key: [UInt8]?
    /// `nil` is a tombstone.
    public var value: [UInt8]?
    public var headers: [KafkaHeader]
    /// Milliseconds since the UNIX epoch (create or log-append time), when the broker gave one.
    public var timestampMilliseconds: Int64?

    public init(topic: String, partition: Int32, offset: Int64, key: [UInt8]?, value: [UInt8]?,
                headers: [KafkaHeader] = [], timestampMilliseconds: Int64? = nil) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestampMilliseconds = timestampMilliseconds
    }

    public var topicPartition: PartitionID { PartitionID(topic: topic, partition: partition) }

    /// The first header with this name.
    public func header(_ name: String) -> KafkaHeader? { headers.first { $0.name == name } }
}
