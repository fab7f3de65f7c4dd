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

    public var topicPartition: TopicPartition { TopicPartition(topic, partition) }

    /// The first header with this name.
    public func header(_ name: String) -> KafkaHeader? { headers.first { $0.name == name } }
}

/// What one `poll` returned: records in the order librdkafka delivered them (ordered per partition),
/// partitions that reached their current end (only with `enable.partition.eof=true`), and non-fatal
/// errors librdkafka reported meanwhile (broker down, fetch errors, a failed commit inside a revoke);
/// these are informational: librdkafka keeps retrying, but the caller should log or count them.
public struct KafkaPollBatch: Sendable {
    public var messages: [KafkaMessage] = []
    public var reachedEnd: [TopicPartition] = []
    public var errors: [KafkaError] = []
    public init() {}
    public var isEmpty: Bool { messages.isEmpty && reachedEnd.isEmpty && errors.isEmpty }
}

/// Where a manual assignment starts reading.
public enum KafkaOffset: Sendable, Hashable {
    case beginning
    case end
    /// An absolute offset (the next record to read).
    case offset(Int64)
    /// The group's committed offset (falls back to `auto.offset.reset`).
    case stored

    var rawValue: Int64 {
        switch self {
        case .beginning: return -2   // RD_KAFKA_OFFSET_BEGINNING
        case .end: return -1         // RD_KAFKA_OFFSET_END
        case .stored: return -1000   // RD_KAFKA_OFFSET_STORED
        case .offset(let value): return value
        }
    }
}

/// The low (first available) and high (next to be written) offsets of a partition.
public struct KafkaWatermarks: Sendable, Hashable {
    public var low: Int64
    public var high: Int64
    public init(low: Int64, high: Int64) {
        self.low = low
        self.high = high
    }
    public var isEmpty: Bool { high <= low }
}

/// Where a produced record was stored, from the broker's acknowledgement.
public struct KafkaDeliveryReport: Sendable, Hashable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    public init(topic: String, partition: Int32, offset: Int64) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
    }
}
