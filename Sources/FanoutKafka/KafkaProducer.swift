import APNsModel
import CRdKafka

/// An idempotent producer (`acks=all`, `enable.idempotence=true`) whose delivery reports arrive on
/// librdkafka's background event thread, so no poll thread is needed.
///
/// Bounds: the local queue holds at most `queue.buffering.max.messages` (default 100,000) records;
/// when full, `produce` fails at once with `.queueFull` instead of blocking. Every record gets a
/// delivery report within `delivery.timeout.ms` (default 30 s): acked, or failed with `.delivery`.
///
/// Threading: `produce` never blocks and is safe from any thread or task. Completion closures run on
/// librdkafka's background thread: keep them short and never capture the producer strongly in
/// them (destroying it from that thread deadlocks). `flush` and `partitionCounts` block.
public final class KafkaProducer: Sendable {
    private let client: RDKafkaClient

    public typealias Completion = @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void

    /// The stderr line of a client error when no `onError` was given: librdkafka's text, with any push
    /// token or JWT it quotes (a topic, a client id) masked by `Redact.text`.
    static func unhandledErrorLine(_ error: KafkaError) -> String { Redact.text("fanout kafka producer: \(error)") }

    /// - Parameter onError: client-level errors (broker down, fatal errors), from the background
    ///   thread. Per-record failures go to each record's completion instead.
    ///   `nil` writes them to stderr.
    /// - Parameter log: receives librdkafka's log lines; `nil` leaves librdkafka's own stderr logger.
    public init(configuration: KafkaConfiguration, onError: (@Sendable (KafkaError) -> Void)? = nil,
                log: KafkaLogHandler? = nil) throws {
        let effective = try configuration.outsideTheGroup()
            .withDefaults(["acks": "all", "queue.buffering.max.messages": "100000", "delivery.timeout.ms": "30000"])
            .pinning(["enable.idempotence": "true"], client: "producer")
        let conf = try RDKafkaConf(effective)
        conf.withPointer { conf in
            rd_kafka_conf_set_events(conf, RD_KAFKA_EVENT_DR | RD_KAFKA_EVENT_ERROR)
            rd_kafka_conf_set_background_event_cb(conf, fanoutProducerEventCallback)
        }
        let onError = onError ?? { error in FileHandleOutput.standardError(Self.unhandledErrorLine(error)) }
        client = try RDKafkaClient(type: RD_KAFKA_PRODUCER, conf: conf,
                                   context: ClientContext(log: log, clientErrors: onError))
        // Delivery reports and errors are posted on the main queue; hand them to the background
        // thread that runs the event callback.
        client.withHandle { handle in
            let main = rd_kafka_queue_get_main(handle)
            let background = rd_kafka_queue_get_background(handle)
            rd_kafka_queue_forward(main, background)
            rd_kafka_queue_destroy(main)
            rd_kafka_queue_destroy(background)
        }
    }

    deinit {
        // Whatever is still queued fails with a purge error delivered to its completion.
        client.withHandle { handle in
            _ = rd_kafka_purge(handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
            _ = rd_kafka_flush(handle, 2000)
        }
    }

    /// Enqueues one record; `completion` runs once with the broker's acknowledgement or the failure.
    /// Throws at once (and never calls `completion`) when the record cannot be enqueued:
    /// `.queueFull`, unknown partition, record too large, fatal producer state.
    /// - Parameter partition: `nil` uses the key's partition (librdkafka's `partitioner` property,
    ///   by default consistent-random: CRC32 of the key, a random partition for a null key).
    /// - Parameter timestampMilliseconds: the record's CreateTime; `nil` lets librdkafka use now.
    public func produce(topic: String, partition: Int32? = nil, key: [UInt8]?, value: [UInt8]?,
                        headers: [KafkaHeader] = [], timestampMilliseconds: Int64? = nil,
                        completion: @escaping Completion) throws {
        try withOptionalBytes(key) { keyBytes in
            try withOptionalBytes(value) { valueBytes in
                try produce(topic: topic, partition: partition, keyBytes: keyBytes, valueBytes: valueBytes, headers: headers,
                            timestampMilliseconds: timestampMilliseconds, completion: completion)
            }
        }
    }

    /// `produce` with key and value as bytes the caller keeps (librdkafka copies them before this
    /// returns), so a caller producing many records can encode each into one reused buffer. A nil
    /// value is a tombstone.
    public func produce(topic: String, partition: Int32? = nil, keyBytes: UnsafeRawBufferPointer?, valueBytes: UnsafeRawBufferPointer?,
                        headers: [KafkaHeader] = [], timestampMilliseconds: Int64? = nil,
                        completion: @escaping Completion) throws {
        let box = Unmanaged.passRetained(DeliveryBox(completion))
        let headerList: OpaquePointer? = headers.isEmpty ? nil : Self.makeHeaders(headers)
        let error: OpaquePointer? = client.withHandle { handle in
            topic.withCString { topicName in
                // On the stack: a heap array here was one allocation per record.
                withUnsafeTemporaryAllocation(of: rd_kafka_vu_t.self, capacity: 8) { args in
                    args.initialize(repeating: rd_kafka_vu_t())
                    args[0].vtype = RD_KAFKA_VTYPE_TOPIC
                    args[0].u.cstr = topicName
                    args[1].vtype = RD_KAFKA_VTYPE_PARTITION
                    args[1].u.i32 = partition ?? -1   // RD_KAFKA_PARTITION_UA
                    args[2].vtype = RD_KAFKA_VTYPE_MSGFLAGS
                    args[2].u.i = RD_KAFKA_MSG_F_COPY
                    args[3].vtype = RD_KAFKA_VTYPE_VALUE
                    args[3].u.mem.ptr = valueBytes.flatMap { UnsafeMutableRawPointer(mutating: $0.baseAddress) }
                    args[3].u.mem.size = valueBytes?.count ?? 0
                    args[4].vtype = RD_KAFKA_VTYPE_KEY
                    args[4].u.mem.ptr = keyBytes.flatMap { UnsafeMutableRawPointer(mutating: $0.baseAddress) }
                    args[4].u.mem.size = keyBytes?.count ?? 0
                    args[5].vtype = RD_KAFKA_VTYPE_OPAQUE
                    args[5].u.ptr = box.toOpaque()
                    var count = 6
                    if let headerList {
                        args[count].vtype = RD_KAFKA_VTYPE_HEADERS
                        args[count].u.headers = headerList   // owned by the record on success only
                        count += 1
                    }
                    if let timestampMilliseconds {
                        args[count].vtype = RD_KAFKA_VTYPE_TIMESTAMP
                        args[count].u.i64 = timestampMilliseconds
                        count += 1
                    }
                    return rd_kafka_produceva(handle, args.baseAddress, count)
                }
            }
        }
        if let error {
            box.release()
            if let headerList { rd_kafka_headers_destroy(headerList) }
            let code = KafkaResponseCode(rd_kafka_error_code(error))
            if code == .queueFull {
                rd_kafka_error_destroy(error)
                throw KafkaError(.queueFull, underlying: code,
                                 reason: "the producer queue is full (queue.buffering.max.messages); wait for deliveries or slow down")
            }
            if code == .fatal { rd_kafka_error_destroy(error); throw client.fatalError(context: "producer") }
            throw KafkaError(.produce, consuming: error, context: "could not enqueue a record for \(topic)")
        }
    }

    /// Enqueues one record and waits (without blocking a thread) for the broker's acknowledgement.
    public func produce(topic: String, partition: Int32? = nil, key: [UInt8]?, value: [UInt8]?,
                        headers: [KafkaHeader] = [], timestampMilliseconds: Int64? = nil) async throws -> KafkaDeliveryReport {
        try await withCheckedThrowingContinuation { continuation in
            do {
                try produce(topic: topic, partition: partition, key: key, value: value, headers: headers,
                            timestampMilliseconds: timestampMilliseconds) { result in
                    continuation.resume(with: result)
                }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Blocking: waits until every enqueued record has its delivery report, or throws `.flushTimedOut`.
    public func flush(timeout: Duration) throws {
        let err = client.withHandle { rd_kafka_flush($0, timeout.librdkafkaMilliseconds) }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            let waiting = client.withHandle { rd_kafka_outq_len($0) }
            throw KafkaError(.flushTimedOut, err, "\(waiting) record(s) still without a delivery report after \(timeout)")
        }
    }

    /// Blocking (up to `timeout`): drops every queued and in-flight record; each one's completion runs
    /// with a `.delivery` failure (purged) before this returns, unless the reports take longer.
    public func purge(timeout: Duration = .seconds(5)) throws {
        try client.withHandle { handle in
            let err = rd_kafka_purge(handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
            guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(.produce, err, "could not purge the producer queue: \(KafkaResponseCode(err).message)")
            }
        }
        try flush(timeout: timeout)
    }

    /// Records enqueued or in flight, not yet reported.
    public var pendingCount: Int { Int(client.withHandle { rd_kafka_outq_len($0) }) }

    /// Blocking. Throws `.topicNotFound` naming the first missing topic.
    public func partitionCounts(of topics: [String], timeout: Duration) throws -> [String: Int] {
        try client.partitionCounts(of: topics, timeout: timeout)
    }

    private static func makeHeaders(_ headers: [KafkaHeader]) -> OpaquePointer {
        let list = rd_kafka_headers_new(headers.count)!
        for header in headers {
            if let value = header.value {
                value.withUnsafeBytes { bytes in
                    _ = rd_kafka_header_add(list, header.name, -1, bytes.baseAddress, bytes.count)
                }
            } else {
                _ = rd_kafka_header_add(list, header.name, -1, nil, 0)
            }
        }
        return list
    }
}

private func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
    guard let bytes else { return try body(nil) }
    return try bytes.withUnsafeBytes { try body($0) }
}

/// One record's completion, retained as librdkafka's per-message opaque until its delivery report.
private final class DeliveryBox {
    let completion: KafkaProducer.Completion
    init(_ completion: @escaping KafkaProducer.Completion) { self.completion = completion }
}

/// Runs on librdkafka's background thread for every delivery-report and error event.
private func fanoutProducerEventCallback(_ rk: OpaquePointer?, _ event: OpaquePointer?, _ opaque: UnsafeMutableRawPointer?) {
    guard let event else { return }
    defer { rd_kafka_event_destroy(event) }
    switch rd_kafka_event_type(event) {
    case RD_KAFKA_EVENT_DR:
        while let message = rd_kafka_event_message_next(event) {
            guard let opaque = message.pointee._private else { continue }
            let box = Unmanaged<DeliveryBox>.fromOpaque(opaque).takeRetainedValue()
            let topic = message.pointee.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
            let err = message.pointee.err
            if err == RD_KAFKA_RESP_ERR_NO_ERROR {
                box.completion(.success(KafkaDeliveryReport(topic: topic, partition: message.pointee.partition,
                                                            offset: message.pointee.offset)))
            } else {
                let text = String(cString: rd_kafka_err2str(err))
                box.completion(.failure(KafkaError(.delivery, err, "record for \(topic) was not acknowledged: \(text)")))
            }
        }
    case RD_KAFKA_EVENT_ERROR:
        guard let opaque, let onError = ClientContext.from(opaque).clientErrors else { return }
        let err = rd_kafka_event_error(event)
        let text = String(cString: rd_kafka_event_error_string(event))
        let fatal = rd_kafka_event_error_is_fatal(event) != 0
        onError(KafkaError(fatal ? .fatal : .client, err, "producer client error: \(text)"))
    default:
        break
    }
}
