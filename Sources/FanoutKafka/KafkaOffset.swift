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
