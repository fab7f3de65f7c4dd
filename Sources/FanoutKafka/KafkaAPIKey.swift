/// A Kafka protocol API number, for fault injection on the mock cluster.
public struct KafkaAPIKey: RawRepresentable, Sendable, Hashable {
    public var rawValue: Int16
    public init(rawValue: Int16) { self.rawValue = rawValue }
    public static let produce = KafkaAPIKey(rawValue: 0)
    public static let fetch = KafkaAPIKey(rawValue: 1)
    public static let listOffsets = KafkaAPIKey(rawValue: 2)
    public static let metadata = KafkaAPIKey(rawValue: 3)
    public static let offsetCommit = KafkaAPIKey(rawValue: 8)
    public static let offsetFetch = KafkaAPIKey(rawValue: 9)
    public static let findCoordinator = KafkaAPIKey(rawValue: 10)
    public static let joinGroup = KafkaAPIKey(rawValue: 11)
    public static let heartbeat = KafkaAPIKey(rawValue: 12)
    public static let leaveGroup = KafkaAPIKey(rawValue: 13)
    public static let syncGroup = KafkaAPIKey(rawValue: 14)
    public static let initProducerID = KafkaAPIKey(rawValue: 22)
}
