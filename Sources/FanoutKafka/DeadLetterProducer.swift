/// Produces rejected records to `<source topic><suffix>` (default `-dlq`) with the original key,
/// value bytes and headers, plus `fanout-error` (the stable reason code), `fanout-source`
/// (`topic/partition/offset`) and, when given, `fanout-detail`.
///
/// `deadLetter` returns only after the broker acknowledged the record (acks=all), so the caller may
/// then mark the source offset done; if it throws, the source offset must stay incomplete.
public final class DeadLetterProducer: Sendable {
    public static let errorHeader = "fanout-error"
    public static let sourceHeader = "fanout-source"
    public static let detailHeader = "fanout-detail"

    private let producer: KafkaProducer
    public let topicSuffix: String

    public init(producer: KafkaProducer, topicSuffix: String = "-dlq") {
        self.producer = producer
        self.topicSuffix = topicSuffix
    }

    public func deadLetterTopic(for sourceTopic: String) -> String { sourceTopic + topicSuffix }

    /// The record that `deadLetter` produces, exposed so its shape can be checked without a broker.
    public func record(for message: KafkaMessage, reason: String, detail: String?) -> (topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader]) {
        var headers = message.headers
        headers.append(KafkaHeader(name: Self.errorHeader, string: reason))
        headers.append(KafkaHeader(name: Self.sourceHeader,
                                   string: "\(message.topic)/\(message.partition)/\(message.offset)"))
        if let detail { headers.append(KafkaHeader(name: Self.detailHeader, string: detail)) }
        return (deadLetterTopic(for: message.topic), message.key, message.value, headers)
    }

    /// - Parameter reason: a stable reason code (e.g. `RejectionReason.rawValue`).
    @discardableResult
    public func deadLetter(_ message: KafkaMessage, reason: String, detail: String? = nil) async throws -> KafkaDeliveryReport {
        let record = record(for: message, reason: reason, detail: detail)
        return try await producer.produce(topic: record.topic, key: record.key, value: record.value, headers: record.headers)
    }

    /// Callback variant for callers on their own threads; `completion` runs on librdkafka's background thread.
    public func deadLetter(_ message: KafkaMessage, reason: String, detail: String? = nil,
                           completion: @escaping KafkaProducer.Completion) throws {
        let record = record(for: message, reason: reason, detail: detail)
        try producer.produce(topic: record.topic, key: record.key, value: record.value, headers: record.headers,
                             completion: completion)
    }
}
