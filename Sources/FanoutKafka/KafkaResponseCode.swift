import CRdKafka

/// A librdkafka response code (`rd_kafka_resp_err_t`): Kafka protocol errors are positive,
/// librdkafka's own local errors (names starting with `_`) are negative.
public struct KafkaResponseCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    init(_ code: rd_kafka_resp_err_t) { rawValue = code.rawValue }
    var rd: rd_kafka_resp_err_t { rd_kafka_resp_err_t(rawValue: rawValue) }

    /// librdkafka's symbolic name, e.g. `NOT_COORDINATOR` or `_QUEUE_FULL`.
    public var name: String { String(cString: rd_kafka_err2name(rd)) }
    /// librdkafka's human description.
    public var message: String { String(cString: rd_kafka_err2str(rd)) }
    public var description: String { "\(name) (\(rawValue))" }

    public static let noError = KafkaResponseCode(rawValue: 0)
    public static let offsetOutOfRange = KafkaResponseCode(rawValue: 1)
    public static let unknownTopicOrPartition = KafkaResponseCode(rawValue: 3)
    public static let leaderNotAvailable = KafkaResponseCode(rawValue: 5)
    public static let notLeaderForPartition = KafkaResponseCode(rawValue: 6)
    public static let requestTimedOut = KafkaResponseCode(rawValue: 7)
    public static let coordinatorNotAvailable = KafkaResponseCode(rawValue: 15)
    public static let notCoordinator = KafkaResponseCode(rawValue: 16)
    public static let notEnoughReplicas = KafkaResponseCode(rawValue: 19)
    public static let illegalGeneration = KafkaResponseCode(rawValue: 22)
    public static let unknownMemberID = KafkaResponseCode(rawValue: 25)
    public static let rebalanceInProgress = KafkaResponseCode(rawValue: 27)
    public static let queueFull = KafkaResponseCode(RD_KAFKA_RESP_ERR__QUEUE_FULL)
    /// MESSAGE_TOO_LARGE: over `message.max.bytes` (checked by librdkafka before sending) or the topic's limit.
    public static let messageTooLarge = KafkaResponseCode(rawValue: 10)
    /// RECORD_LIST_TOO_LARGE: the broker refused the batch holding the record as too large.
    public static let recordListTooLarge = KafkaResponseCode(rawValue: 18)
    public static let timedOut = KafkaResponseCode(RD_KAFKA_RESP_ERR__TIMED_OUT)
    public static let messageTimedOut = KafkaResponseCode(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)
    public static let unknownTopic = KafkaResponseCode(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
    public static let fatal = KafkaResponseCode(RD_KAFKA_RESP_ERR__FATAL)
    /// The fetch position was out of range and `auto.offset.reset=error` forbade a jump.
    public static let autoOffsetReset = KafkaResponseCode(RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET)
    public static let invalidMessageSize = KafkaResponseCode(rawValue: 4)
    public static let invalidTopic = KafkaResponseCode(rawValue: 17)
    public static let invalidRequiredAcks = KafkaResponseCode(rawValue: 21)
    public static let topicAuthorizationFailed = KafkaResponseCode(rawValue: 29)
    public static let clusterAuthorizationFailed = KafkaResponseCode(rawValue: 31)
    public static let unsupportedVersion = KafkaResponseCode(rawValue: 35)
    public static let invalidConfig = KafkaResponseCode(rawValue: 40)
    public static let unsupportedForMessageFormat = KafkaResponseCode(rawValue: 43)
    public static let policyViolation = KafkaResponseCode(rawValue: 44)
    public static let saslAuthenticationFailed = KafkaResponseCode(rawValue: 58)
    public static let invalidRecord = KafkaResponseCode(rawValue: 87)
    public static let transport = KafkaResponseCode(RD_KAFKA_RESP_ERR__TRANSPORT)
    public static let allBrokersDown = KafkaResponseCode(RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
    public static let unknownPartition = KafkaResponseCode(RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION)
    public static let invalidArgument = KafkaResponseCode(RD_KAFKA_RESP_ERR__INVALID_ARG)
    public static let authentication = KafkaResponseCode(RD_KAFKA_RESP_ERR__AUTHENTICATION)
    public static let unsupportedFeature = KafkaResponseCode(RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE)
    public static let purgedInQueue = KafkaResponseCode(RD_KAFKA_RESP_ERR__PURGE_QUEUE)
}
