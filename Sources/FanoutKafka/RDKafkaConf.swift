import CRdKafka

/// Owns an `rd_kafka_conf_t` until `rd_kafka_new` takes it (only on success).
final class RDKafkaConf {
    private var pointer: OpaquePointer?

    init(_ configuration: KafkaConfiguration) throws {
        let conf = rd_kafka_conf_new()!
        pointer = conf
        var errstr = [CChar](repeating: 0, count: 512)
        // Sorted so the first bad property reported is deterministic.
        for (name, value) in configuration.properties.sorted(by: { $0.key < $1.key }) {
            let result = rd_kafka_conf_set(conf, name, value, &errstr, errstr.count)
            guard result == RD_KAFKA_CONF_OK else {
                let message = cString(errstr)
                let kind = result == RD_KAFKA_CONF_UNKNOWN ? "unknown property" : "invalid value"
                throw KafkaError(.invalidConfiguration,
                                 reason: "\(kind) '\(name)': \(message)")
            }
        }
    }

    deinit {
        if let pointer { rd_kafka_conf_destroy(pointer) }
    }

    func withPointer<R>(_ body: (OpaquePointer) throws -> R) rethrows -> R {
        try body(pointer!)
    }

    /// Creates the client; on success librdkafka owns the conf and this object forgets it.
    func makeClient(_ type: rd_kafka_type_t) throws -> OpaquePointer {
        var errstr = [CChar](repeating: 0, count: 512)
        guard let handle = rd_kafka_new(type, pointer, &errstr, errstr.count) else {
            let message = cString(errstr)
            throw KafkaError(.clientCreation, reason: "librdkafka could not create the client: \(message)")
        }
        pointer = nil   // rd_kafka_new took ownership of the conf
        return handle
    }
}

/// A NUL-terminated C buffer as a String.
func cString(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
