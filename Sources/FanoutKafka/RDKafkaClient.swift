import CRdKafka
import FanoutCore
import Synchronization

/// Owns one `rd_kafka_t` and the context object whose pointer librdkafka holds as its opaque.
///
/// `@unchecked Sendable`: a pointer wrapper. librdkafka handles are thread-safe for every call made
/// here; the handle is immutable after init and destroyed only in `deinit`, when no one else holds it.
final class RDKafkaClient: @unchecked Sendable {
    private let handle: OpaquePointer
    /// Kept alive until after `rd_kafka_destroy`, because librdkafka callbacks dereference it.
    private let context: ClientContext
    /// Set by `neverDestroy()`: `deinit` then leaves the handle (and its context) alive.
    private let abandoned = Atomic(false)
    /// Partitions paused through `pause` and not resumed since: `FetchNudge` leaves them alone.
    private let paused = Mutex<Set<PartitionID>>([])
    let fetchNudge = FetchNudge()

    init(type: rd_kafka_type_t, conf: RDKafkaConf, context: ClientContext) throws {
        let opaque = Unmanaged.passUnretained(context).toOpaque()
        conf.withPointer { conf in
            rd_kafka_conf_set_opaque(conf, opaque)
            if context.wantsLogCallback { rd_kafka_conf_set_log_cb(conf, fanoutLogCallback) }
        }
        handle = try conf.makeClient(type)
        self.context = context
    }

    deinit {
        if abandoned.load(ordering: .acquiring) {
            // librdkafka's threads keep the opaque: the context must outlive them, i.e. forever.
            _ = Unmanaged.passRetained(context)
            return
        }
        // Blocking: a consumer that was not closed leaves its group here.
        rd_kafka_destroy(handle)
        // `context` is released after this body, i.e. after librdkafka is gone.
    }

    /// For a handle that `rd_kafka_destroy` would abort on (see `KafkaConsumer.close`): it is never
    /// destroyed; its memory and idle threads stay until the process exits.
    func neverDestroy() {
        abandoned.store(true, ordering: .releasing)
    }

    /// Blocking (a round trip to librdkafka's main thread): `"NONE"` until a JoinGroup response
    /// chose an assignor, then `"COOPERATIVE"` or `"EAGER"`; `nil` once the group is gone.
    var rebalanceProtocol: String? {
        rd_kafka_rebalance_protocol(handle).map { String(cString: $0) }
    }

    /// What librdkafka holds for `property` in this client's configuration (nil when unset or
    /// unknown): how a test sees that a setting reached librdkafka, not only Fanout's dictionary.
    func configuredValue(of property: String) -> String? {
        guard let conf = rd_kafka_conf(handle) else { return nil }
        var size = 0
        guard rd_kafka_conf_get(conf, property, nil, &size) == RD_KAFKA_CONF_OK, size > 1 else { return nil }
        var buffer = [CChar](repeating: 0, count: size)
        guard rd_kafka_conf_get(conf, property, &buffer, &size) == RD_KAFKA_CONF_OK else { return nil }
        return cString(buffer)
    }

    func withHandle<R>(_ body: (OpaquePointer) throws -> R) rethrows -> R {
        try body(handle)
    }

    // MARK: Consumer operations shared by the group consumer and the partition reader

    /// Blocking: waits up to `timeout` for the first event, then drains what is ready without waiting.
    func pollBatch(timeout: Duration, maxMessages: Int) throws -> KafkaPollBatch {
        var batch = KafkaPollBatch()
        batch.messages.reserveCapacity(min(maxMessages, 1024))
        var wait = timeout.librdkafkaMilliseconds
        var lastTopic: (pointer: OpaquePointer, name: String)?
        while batch.messages.count < maxMessages {
            guard let message = rd_kafka_consumer_poll(handle, wait) else { break }
            defer { rd_kafka_message_destroy(message) }
            wait = 0
            let err = message.pointee.err
            if err == RD_KAFKA_RESP_ERR_NO_ERROR {
                let topic: String
                if let rkt = message.pointee.rkt {
                    if let cached = lastTopic, cached.pointer == rkt {
                        topic = cached.name
                    } else {
                        topic = String(cString: rd_kafka_topic_name(rkt))
                        lastTopic = (rkt, topic)
                    }
                } else {
                    topic = ""
                }
                batch.messages.append(Self.copy(message, topic: topic))
            } else if err == RD_KAFKA_RESP_ERR__PARTITION_EOF, let rkt = message.pointee.rkt {
                batch.reachedEnd.append(PartitionID(topic: String(cString: rd_kafka_topic_name(rkt)), partition: message.pointee.partition))
            } else if err == RD_KAFKA_RESP_ERR__FATAL {
                throw fatalError(context: "consumer")
            } else {
                let text = String(cString: rd_kafka_message_errstr(message))
                var location = ""
                if let rkt = message.pointee.rkt {
                    location = " on \(String(cString: rd_kafka_topic_name(rkt)))/\(message.pointee.partition)"
                }
                batch.errors.append(KafkaError(.consume, err, "consume error\(location): \(text)"))
            }
        }
        if batch.messages.count < maxMessages { fetchNudge.afterShortPoll(of: self) } else { fetchNudge.afterFullPoll() }
        return batch
    }

    private static func copy(_ message: UnsafeMutablePointer<rd_kafka_message_t>, topic: String) -> KafkaMessage {
        let m = message.pointee
        let key = m.key.map { Array(UnsafeRawBufferPointer(start: $0, count: m.key_len)) }
        let value = m.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: m.len)) }
        var headers: [KafkaHeader] = []
        var list: OpaquePointer?
        if rd_kafka_message_headers(message, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list {
            let count = rd_kafka_header_cnt(list)
            headers.reserveCapacity(count)
            for index in 0..<count {
                var name: UnsafePointer<CChar>?
                var bytes: UnsafeRawPointer?
                var size = 0
                guard rd_kafka_header_get_all(list, index, &name, &bytes, &size) == RD_KAFKA_RESP_ERR_NO_ERROR,
                      let name else { continue }
                headers.append(KafkaHeader(name: String(cString: name),
                                           value: bytes.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) }))
            }
        }
        var type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &type)
        return KafkaMessage(topic: topic, partition: m.partition, offset: m.offset, key: key, value: value,
                            headers: headers, timestampMilliseconds: type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : timestamp)
    }

    func fatalError(context: String) -> KafkaError {
        var errstr = [CChar](repeating: 0, count: 512)
        let code = rd_kafka_fatal_error(handle, &errstr, errstr.count)
        return KafkaError(.fatal, code,
                          "\(context) hit a fatal librdkafka error and must be recreated: \(cString(errstr))")
    }

    func pause(_ partitions: some Collection<PartitionID>) throws {
        guard !partitions.isEmpty else { return }
        let list = RDKafkaTopicPartitionList(partitions)
        let err = list.withPointer { rd_kafka_pause_partitions(handle, $0) }
        let failures = list.failures
        if err != RD_KAFKA_RESP_ERR_NO_ERROR || !failures.isEmpty {
            throw KafkaError(.pause, err, "could not pause \(partitions.count) partition(s)", partitionFailures: failures)
        }
        paused.withLock { $0.formUnion(partitions) }
    }

    func resume(_ partitions: some Collection<PartitionID>) throws {
        guard !partitions.isEmpty else { return }
        paused.withLock { $0.subtract(partitions) }
        let list = RDKafkaTopicPartitionList(partitions)
        let err = list.withPointer { rd_kafka_resume_partitions(handle, $0) }
        let failures = list.failures
        if err != RD_KAFKA_RESP_ERR_NO_ERROR || !failures.isEmpty {
            throw KafkaError(.resume, err, "could not resume \(partitions.count) partition(s)", partitionFailures: failures)
        }
    }

    /// Partitions paused and not resumed since, after forgetting those outside `assigned`.
    func forgetPauses(outside assigned: Set<PartitionID>) -> Set<PartitionID> {
        paused.withLock { paused in
            paused.formIntersection(assigned)
            return paused
        }
    }

    func assignment() throws -> Set<PartitionID> {
        var pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        let err = rd_kafka_assignment(handle, &pointer)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let pointer else {
            throw KafkaError(.assignment, err, "could not read the current assignment")
        }
        return Set(RDKafkaTopicPartitionList(adopting: pointer).entries.map(\.partition))
    }

    /// Synchronous commit of explicit "next offset to read" values. Blocking.
    func commit(_ offsets: [PartitionID: Int64]) throws {
        guard !offsets.isEmpty else { return }
        let list = RDKafkaTopicPartitionList(offsets: offsets)
        let err = list.withPointer { rd_kafka_commit(handle, $0, 0) }
        let failures = list.failures
        if err != RD_KAFKA_RESP_ERR_NO_ERROR || !failures.isEmpty {
            throw KafkaError(.commit, err, "commit of \(PartitionID.describe(offsets)) failed", partitionFailures: failures)
        }
    }

    /// Blocking: queries the broker for the partition's low and high watermarks.
    func watermarks(of partition: PartitionID, timeout: Duration) throws -> KafkaWatermarks {
        var low: Int64 = -1
        var high: Int64 = -1
        let err = rd_kafka_query_watermark_offsets(handle, partition.topic, partition.partition, &low, &high,
                                                   timeout.librdkafkaMilliseconds)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.watermarks, err, "could not query the watermarks of \(partition): \(KafkaResponseCode(err).message)")
        }
        return KafkaWatermarks(low: low, high: high)
    }

    /// Non-blocking: the high watermark librdkafka last saw in a fetch response for this partition
    /// (updated on every fetched message set; stale while the partition is paused), or nil when none
    /// was seen yet.
    func lastKnownHighWatermark(of partition: PartitionID) -> Int64? {
        var low: Int64 = -1
        var high: Int64 = -1
        let err = rd_kafka_get_watermark_offsets(handle, partition.topic, partition.partition, &low, &high)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, high >= 0 else { return nil }
        return high
    }

    /// Blocking: partition counts from a metadata request for all topics (a request for one named
    /// topic could auto-create it on brokers that allow that).
    func partitionCounts(of topics: [String], timeout: Duration) throws -> [String: Int] {
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let err = rd_kafka_metadata(handle, 1, nil, &metadata, timeout.librdkafkaMilliseconds)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
            throw KafkaError(.metadata, err, "metadata request failed: \(KafkaResponseCode(err).message)")
        }
        defer { rd_kafka_metadata_destroy(metadata) }
        var found: [String: Int] = [:]
        var topicErrors: [String: KafkaResponseCode] = [:]
        let wanted = Set(topics)
        for index in 0..<Int(metadata.pointee.topic_cnt) {
            let topic = metadata.pointee.topics[index]
            let name = String(cString: topic.topic)
            guard wanted.contains(name) else { continue }
            if topic.err != RD_KAFKA_RESP_ERR_NO_ERROR {
                topicErrors[name] = KafkaResponseCode(topic.err)
            } else {
                found[name] = Int(topic.partition_cnt)
            }
        }
        for topic in topics where found[topic] == nil {
            if let code = topicErrors[topic] {
                throw KafkaError(.topicNotFound, underlying: code,
                                 reason: "topic '\(topic)' is not usable: \(code.message)")
            }
            throw KafkaError(.topicNotFound, underlying: .unknownTopicOrPartition,
                             reason: "topic '\(topic)' does not exist on the cluster; create it (with the partition count the deployment expects) before starting")
        }
        return found
    }
}

extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// A librdkafka timeout: never negative (librdkafka reads -1 as "wait forever").
    var librdkafkaMilliseconds: Int32 { Int32(clamping: max(0, milliseconds)) }
}
