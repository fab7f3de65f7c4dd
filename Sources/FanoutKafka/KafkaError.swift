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
    public static let timedOut = KafkaResponseCode(RD_KAFKA_RESP_ERR__TIMED_OUT)
    public static let messageTimedOut = KafkaResponseCode(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)
    public static let unknownTopic = KafkaResponseCode(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
    public static let fatal = KafkaResponseCode(RD_KAFKA_RESP_ERR__FATAL)
}

/// The one error type of the Kafka subsystem.
///
/// `code` is Fanout's stable classification (match on it); `underlying` is librdkafka's response code
/// when the failure came from librdkafka; `reason` says what happened in words a person can act on.
public struct KafkaError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// A property was unknown, had a bad value, or is one Fanout does not allow to be changed.
        case invalidConfiguration = "invalid-configuration"
        /// librdkafka refused to create the client.
        case clientCreation = "client-creation"
        case subscribe = "subscribe"
        /// An error reported while consuming (fetch, partition, broker); usually transient.
        case consume = "consume"
        case commit = "commit"
        case committedOffsets = "committed-offsets"
        case assignment = "assignment"
        case pause = "pause"
        case resume = "resume"
        case produce = "produce"
        /// The producer's bounded local queue is full; retry after deliveries drain.
        case queueFull = "queue-full"
        /// The broker did not acknowledge the message (it may or may not be stored).
        case delivery = "delivery"
        case flushTimedOut = "flush-timed-out"
        case metadata = "metadata"
        case topicNotFound = "topic-not-found"
        case watermarks = "watermarks"
        /// The client hit a fatal error (e.g. idempotent producer state lost) and must be recreated.
        case fatal = "fatal"
        case closed = "closed"
        /// A client-level condition (broker connection lost, all brokers down); librdkafka retries.
        case client = "client"
        case mockCluster = "mock-cluster"
    }

    /// One partition's share of a multi-partition failure (commit, pause, committed offsets).
    public struct PartitionFailure: Sendable, Hashable, CustomStringConvertible {
        public var partition: TopicPartition
        public var underlying: KafkaResponseCode
        public var description: String { "\(partition): \(underlying.name): \(underlying.message)" }
    }

    public var code: Code
    public var underlying: KafkaResponseCode
    public var reason: String
    public var partitionFailures: [PartitionFailure]

    public init(_ code: Code, underlying: KafkaResponseCode = .noError, reason: String,
                partitionFailures: [PartitionFailure] = []) {
        self.code = code
        self.underlying = underlying
        self.reason = reason
        self.partitionFailures = partitionFailures
    }

    init(_ code: Code, _ rdError: rd_kafka_resp_err_t, _ reason: String, partitionFailures: [PartitionFailure] = []) {
        self.init(code, underlying: KafkaResponseCode(rdError), reason: reason, partitionFailures: partitionFailures)
    }

    /// Consumes (destroys) a librdkafka `rd_kafka_error_t`.
    init(_ code: Code, consuming error: OpaquePointer, context: String) {
        let underlying = KafkaResponseCode(rd_kafka_error_code(error))
        let text = String(cString: rd_kafka_error_string(error))
        rd_kafka_error_destroy(error)
        self.init(code, underlying: underlying, reason: "\(context): \(text)")
    }

    public var description: String {
        var text = "kafka \(code.rawValue): \(reason)"
        if underlying != .noError { text += " [\(underlying.name)]" }
        if !partitionFailures.isEmpty {
            text += " (" + partitionFailures.map(\.description).joined(separator: "; ") + ")"
        }
        return text
    }
}
