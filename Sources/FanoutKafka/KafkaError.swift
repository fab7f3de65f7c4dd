import CRdKafka
import FanoutCore

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
        public var partition: PartitionID
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
