/// Whether a failed produce can succeed by trying again, and what a person must do when it cannot:
/// the one place that reads librdkafka's produce and delivery errors.
///
/// Permanent: the topic or partition does not exist (or the principal may not even see it), the
/// principal may not write to it, the record is too large for it (after `DeadLetterProducer`'s
/// valueless fallback), or the request or configuration is one the cluster will always refuse.
/// Transient: everything else — timeouts, brokers down or moving, a full local queue — which
/// librdkafka or a later attempt gets past without anyone's help. A permanent failure still
/// deserves retries (someone may create the topic or grant access), but also an operator's attention.
public struct ProduceFailure: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case permanent, transient
    }

    public var kind: Kind
    /// What to do about a permanent failure ("create the topic or grant write access"); empty when transient.
    public var remedy: String

    public init(_ error: KafkaError) {
        if let remedy = Self.permanentRemedy(error) {
            kind = .permanent
            self.remedy = remedy
        } else {
            kind = .transient
            remedy = ""
        }
    }

    private static let missing: Set<KafkaResponseCode> = [.unknownTopicOrPartition, .unknownTopic, .unknownPartition]
    private static let forbidden: Set<KafkaResponseCode> = [.topicAuthorizationFailed,
                                                            .saslAuthenticationFailed, .authentication]
    private static let tooLarge: Set<KafkaResponseCode> = [.messageTooLarge, .recordListTooLarge, .invalidMessageSize]
    private static let refused: Set<KafkaResponseCode> = [.invalidTopic, .invalidRequiredAcks, .unsupportedVersion, .invalidConfig,
                                                          .unsupportedForMessageFormat, .policyViolation, .invalidRecord,
                                                          .invalidArgument, .unsupportedFeature]

    private static func permanentRemedy(_ error: KafkaError) -> String? {
        switch error.code {
        case .invalidConfiguration: return "fix the producer's kafka properties"
        case .fatal: return "restart the worker: its producer hit a fatal error and must be recreated"
        case .queueFull, .closed: return nil
        default: break
        }
        let code = error.underlying
        if code == .fatal { return "restart the worker: its producer hit a fatal error and must be recreated" }
        if missing.contains(code) { return "create the topic or grant write access" }
        if code == .clusterAuthorizationFailed { return "grant the worker's Kafka principal IdempotentWrite on the cluster" }
        if forbidden.contains(code) { return "grant the worker's Kafka principal write access to the topic" }
        if tooLarge.contains(code) { return "raise the topic's max.message.bytes (and the producer's message.max.bytes)" }
        if refused.contains(code) { return "check the topic's configuration and the kafka properties against the broker" }
        return nil
    }
}
