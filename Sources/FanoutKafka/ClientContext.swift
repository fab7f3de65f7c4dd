import CRdKafka
#if canImport(Glibc)
import Glibc
#endif

/// One librdkafka line of its own log (connection failures, rebalances, retries, ...).
public struct KafkaLogRecord: Sendable, Hashable {
    /// Syslog severity: 0 emergency ... 3 error, 4 warning, 6 info, 7 debug.
    public var level: Int
    /// librdkafka's facility, e.g. `FAIL`, `CGRPOP`, `REQTMOUT`.
    public var facility: String
    public var message: String
    /// The client instance, e.g. `rdkafka#consumer-1`.
    public var client: String
}

/// Receives librdkafka's log lines; runs on librdkafka's internal threads, so keep it short.
public typealias KafkaLogHandler = @Sendable (KafkaLogRecord) -> Void

/// What librdkafka's C callbacks of one client need; held by `RDKafkaClient`, passed to librdkafka
/// as the client opaque (unretained) and kept alive until after `rd_kafka_destroy`.
final class ClientContext: Sendable {
    let log: KafkaLogHandler?
    let rebalance: RebalanceContext?
    let clientErrors: (@Sendable (KafkaError) -> Void)?
    let groupJoin: GroupJoinWatch?
    /// Lines above this syslog level are not forwarded: they come from a debug context Fanout turned
    /// on for itself (`GroupJoinWatch`), not one the user asked for.
    let forwardedLevel: Int32

    init(log: KafkaLogHandler?, rebalance: RebalanceContext? = nil,
         clientErrors: (@Sendable (KafkaError) -> Void)? = nil,
         groupJoin: GroupJoinWatch? = nil, forwardedLevel: Int32 = 7) {
        self.log = log
        self.rebalance = rebalance
        self.clientErrors = clientErrors
        self.groupJoin = groupJoin
        self.forwardedLevel = forwardedLevel
    }

    /// Whether librdkafka must call `fanoutLogCallback` (else it keeps its own stderr logger).
    var wantsLogCallback: Bool { log != nil || groupJoin != nil }

    static func from(_ opaque: UnsafeMutableRawPointer) -> ClientContext {
        Unmanaged<ClientContext>.fromOpaque(opaque).takeUnretainedValue()
    }
}

/// The C log callback: librdkafka threads, no throwing, minimum work.
func fanoutLogCallback(_ rk: OpaquePointer?, _ level: Int32, _ facility: UnsafePointer<CChar>?,
                       _ message: UnsafePointer<CChar>?) {
    guard let rk, let opaque = rd_kafka_opaque(rk) else { return }
    let context = ClientContext.from(opaque)
    if let watch = context.groupJoin, let facility, let message {
        watch.observe(facility: facility, message: message)
    }
    guard level <= context.forwardedLevel else { return }
    guard let log = context.log else {
        rd_kafka_log_print(rk, level, facility, message)   // librdkafka's own stderr format
        return
    }
    log(KafkaLogRecord(level: Int(level), facility: facility.map { String(cString: $0) } ?? "",
                       message: message.map { String(cString: $0) } ?? "",
                       client: String(cString: rd_kafka_name(rk))))
}
