import FanoutKafka

/// Why a worker could not be built or started. `isConfigurationError` errors are the operator's to
/// fix (`fanout run` exits 78, EX_CONFIG); others are the environment's (Kafka unreachable, …).
public struct WorkerError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// A bad value: key file, Kafka property, topic layout, APNs endpoint.
        case configuration
        /// Kafka could not be reached or answered with an error.
        case kafka
        /// The APNs clients could not be set up.
        case apns
        /// The admin server could not listen.
        case admin
        /// `start` was called twice, or after `stop`.
        case lifecycle
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var isConfigurationError: Bool { code == .configuration }

    public var description: String { message }

    /// A Kafka client error: bad properties are configuration errors, the rest Kafka's.
    static func kafka(_ error: any Error, while doing: String) -> WorkerError {
        if let kafka = error as? KafkaError, kafka.code == .invalidConfiguration {
            return WorkerError(.configuration, "kafka: \(kafka.description) (check kafka.properties and FANOUT_KAFKA__* variables)")
        }
        if let kafka = error as? KafkaError, kafka.code == .topicNotFound {
            return WorkerError(.configuration, "kafka: \(kafka.description): create the topic or fix kafka.topics")
        }
        return WorkerError(.kafka, "kafka: \(doing): \(error)")
    }
}
