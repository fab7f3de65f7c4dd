import APNsModel
import FanoutCore

/// Produces rejected records to `<source topic><suffix>` (default `-dlq`) with the original key,
/// value bytes and headers, plus `fanout-error` (the stable reason code), `fanout-source`
/// (`topic/partition/offset`) and, when given, `fanout-detail`. Fanout's own header values go through
/// `Redact.text`: a detail quoting an event or an APNs answer never carries a whole push token or JWT
/// (the original value and headers are copied unchanged: they are the producer's record).
///
/// `deadLetter` returns only after the broker acknowledged the record (acks=all), so the caller may
/// then mark the source offset done; if it throws, the source offset must stay incomplete.
///
/// A record too large for the dead-letter topic (the original plus Fanout's headers over the producer's
/// `message.max.bytes`, or a topic whose limit is smaller than the source's) would fail forever and
/// hold its partition's commits back for good; it is dead-lettered without its value and original
/// headers instead, with `fanout-original-bytes` and a detail naming where the original is.
public final class DeadLetterProducer: Sendable {
    public static let errorHeader = "fanout-error"
    public static let sourceHeader = "fanout-source"
    public static let detailHeader = "fanout-detail"
    public static let originalBytesHeader = "fanout-original-bytes"
    /// A valueless dead letter keeps at most this much of the key, so it always fits.
    static let valuelessKeyLimit = 4096

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
        headers.append(KafkaHeader(name: Self.errorHeader, string: Redact.text(reason)))
        headers.append(KafkaHeader(name: Self.sourceHeader,
                                   string: "\(message.topic)/\(message.partition)/\(message.offset)"))
        if let detail { headers.append(KafkaHeader(name: Self.detailHeader, string: Redact.text(detail))) }
        return (deadLetterTopic(for: message.topic), message.key, message.value, headers)
    }

    /// W3C trace context headers (`traceparent`, `tracestate`) a dead letter keeps even without the
    /// rest of the original, bounded (a `tracestate` is at most 512 characters by the W3C rules).
    static func traceContext(of message: KafkaMessage) -> [KafkaHeader] {
        message.headers.filter { header in
            (header.name == TraceParent.headerName || header.name == "tracestate") && (header.value?.count ?? 0) <= 512
        }.prefix(2).map { $0 }
    }

    /// The record produced when the whole one is too large: key, Fanout's headers and the trace context only.
    public func valuelessRecord(for message: KafkaMessage, reason: String, detail: String?, refusal: KafkaError)
        -> (topic: String, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader]) {
        let originalBytes = (message.value?.count ?? 0)
            + message.headers.reduce(0) { $0 + $1.name.utf8.count + ($1.value?.count ?? 0) }
        let keyCut = (message.key?.count ?? 0) > Self.valuelessKeyLimit
        let note = "the original (\(originalBytes) bytes of value and headers) was too large for the dead-letter topic "
            + "(\(refusal.underlying.name)) and is left out" + (keyCut ? ", its key cut to \(Self.valuelessKeyLimit) bytes" : "")
            + "; read it at its source offset while retention keeps it"
        let headers = [KafkaHeader(name: Self.errorHeader, string: Redact.text(reason)),
                       KafkaHeader(name: Self.sourceHeader, string: "\(message.topic)/\(message.partition)/\(message.offset)"),
                       KafkaHeader(name: Self.detailHeader, string: detail.map { String(Redact.text($0).prefix(1024)) + "; " + note } ?? note),
                       KafkaHeader(name: Self.originalBytesHeader, string: String(originalBytes))]
            + Self.traceContext(of: message)
        return (deadLetterTopic(for: message.topic), message.key.map { Array($0.prefix(Self.valuelessKeyLimit)) }, nil, headers)
    }

    /// True when Kafka refused a record for its size: trying again cannot help.
    public static func isTooLarge(_ error: KafkaError) -> Bool {
        error.underlying == .messageTooLarge || error.underlying == .recordListTooLarge
    }

    /// - Parameter reason: a stable reason code (e.g. `RejectionReason.rawValue`).
    @discardableResult
    public func deadLetter(_ message: KafkaMessage, reason: String, detail: String? = nil) async throws -> KafkaDeliveryReport {
        try await withCheckedThrowingContinuation { continuation in
            do {
                try deadLetter(message, reason: reason, detail: detail) { continuation.resume(with: $0) }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Callback variant for callers on their own threads; `completion` runs on librdkafka's background thread.
    /// Throws (and never calls `completion`) when no record could be enqueued.
    public func deadLetter(_ message: KafkaMessage, reason: String, detail: String? = nil,
                           completion: @escaping KafkaProducer.Completion) throws {
        let full = record(for: message, reason: reason, detail: detail)
        let valueless: @Sendable (KafkaError, @escaping KafkaProducer.Completion) throws -> Void = { [self] refusal, completion in
            let record = valuelessRecord(for: message, reason: reason, detail: detail, refusal: refusal)
            try producer.produce(topic: record.topic, key: record.key, value: record.value, headers: record.headers,
                                 completion: completion)
        }
        do {
            try producer.produce(topic: full.topic, key: full.key, value: full.value, headers: full.headers) { result in
                guard case .failure(let refusal) = result, Self.isTooLarge(refusal) else { return completion(result) }
                do {
                    try valueless(refusal, completion)
                } catch let error as KafkaError {
                    completion(.failure(error))
                } catch {
                    completion(.failure(KafkaError(.produce, reason: "\(error)")))
                }
            }
        } catch let refusal as KafkaError where Self.isTooLarge(refusal) {
            try valueless(refusal, completion)
        }
    }
}
