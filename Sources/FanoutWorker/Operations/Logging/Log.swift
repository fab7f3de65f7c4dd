import Foundation
import Synchronization

/// Structured logging: one JSON object a line (`time`, `level`, `msg`, then typed fields).
///
/// Threading: safe from any thread. The level check is one atomic load, and the message and fields
/// are autoclosures, so a disabled level costs no formatting. Lines are written whole under a
/// `Mutex`, so concurrent lines never interleave. Children made with `with(_:)` share the level and sink.
///
/// Secrets: any string that looks like a JWT is replaced by `Redact.jwtPlaceholder`, and any field
/// value that is a bare run of 32+ hex characters (a push token) is reduced with `Redact.token`.
/// Callers should still pass tokens as `.token(_)`.
public final class Log: Sendable {
    /// Receives one complete line, newline included.
    public typealias Sink = @Sendable (String) -> Void

    private final class Core: Sendable {
        let level: Atomic<Int>
        let sink: Mutex<Sink>
        let clock: @Sendable () -> Date
        init(level: LogLevel, sink: @escaping Sink, clock: @escaping @Sendable () -> Date) {
            self.level = Atomic(level.rank)
            self.sink = Mutex(sink)
            self.clock = clock
        }
    }

    private let core: Core
    private let context: [(String, LogValue)]

    public init(level: LogLevel = .info, sink: @escaping Sink = Log.standardErrorSink, clock: @escaping @Sendable () -> Date = { Date() }) {
        core = Core(level: level, sink: sink, clock: clock)
        context = []
    }

    private init(core: Core, context: [(String, LogValue)]) {
        self.core = core
        self.context = context
    }

    public static let standardErrorSink: Sink = { line in
        FileHandle.standardError.write(Data(line.utf8))
    }

    /// A logger that adds `fields` to every line (e.g. `["component": "kafka"]`), sharing level and sink.
    public func with(_ fields: KeyValuePairs<String, LogValue>) -> Log {
        Log(core: core, context: context + fields.map { ($0.key, $0.value) })
    }

    public var level: LogLevel {
        let rank = core.level.load(ordering: .relaxed)
        return LogLevel.allCases.first { $0.rank == rank } ?? .info
    }

    public func setLevel(_ level: LogLevel) { core.level.store(level.rank, ordering: .relaxed) }

    @inline(__always)
    public func isEnabled(_ level: LogLevel) -> Bool { level.rank >= core.level.load(ordering: .relaxed) }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String,
                    _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]) {
        guard isEnabled(level) else { return }
        let line = Self.format(time: core.clock(), level: level, message: message(), context: context, fields: fields())
        core.sink.withLock { $0(line) }
    }

    public func trace(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]) {
        log(.trace, message(), fields())
    }
    public func debug(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]) {
        log(.debug, message(), fields())
    }
    public func info(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]) {
        log(.info, message(), fields())
    }
    public func warning(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]) {
        log(.warning, message(), fields())
    }
    public func error(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]) {
        log(.error, message(), fields())
    }

    // MARK: Formatting

    static let reservedNames: Set<String> = ["time", "level", "msg"]

    static func format(time: Date, level: LogLevel, message: String, context: [(String, LogValue)],
                       fields: KeyValuePairs<String, LogValue>) -> String {
        var out = "{\"time\":\""
        out += RFC3339.format(time)
        out += "\",\"level\":\""
        out += level.rawValue
        out += "\",\"msg\":"
        appendString(Redact.containsJWT(message) ? Redact.jwtPlaceholder : message, to: &out)
        for (name, value) in context { appendField(name, value, to: &out) }
        for (name, value) in fields { appendField(name, value, to: &out) }
        out += "}\n"
        return out
    }

    private static func appendField(_ name: String, _ value: LogValue, to out: inout String) {
        out += ","
        appendString(reservedNames.contains(name) ? "field_" + name : name, to: &out)
        out += ":"
        switch value {
        case .string(let text):
            if Redact.containsJWT(text) { appendString(Redact.jwtPlaceholder, to: &out) }
            else if Redact.looksLikeToken(text) { appendString(Redact.token(text), to: &out) }
            else { appendString(text, to: &out) }
        case .int(let n): out += String(n)
        case .double(let d): out += d.isFinite ? String(d) : "null"
        case .bool(let b): out += b ? "true" : "false"
        case .duration(let d): out += String(DurationText.seconds(d))
        }
    }

    /// Appends `text` as a JSON string literal.
    static func appendString(_ text: String, to out: inout String) {
        out += "\""
        var plainStart = text.unicodeScalars.startIndex
        let scalars = text.unicodeScalars
        var index = scalars.startIndex
        while index < scalars.endIndex {
            let scalar = scalars[index]
            let escape: String?
            switch scalar {
            case "\"": escape = "\\\""
            case "\\": escape = "\\\\"
            case "\n": escape = "\\n"
            case "\r": escape = "\\r"
            case "\t": escape = "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029 {
                    let hex = String(scalar.value, radix: 16)
                    escape = "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    escape = nil
                }
            }
            if let escape {
                out.unicodeScalars.append(contentsOf: scalars[plainStart..<index])
                out += escape
                plainStart = scalars.index(after: index)
            }
            index = scalars.index(after: index)
        }
        out.unicodeScalars.append(contentsOf: scalars[plainStart..<scalars.endIndex])
        out += "\""
    }
}

/// RFC 3339 UTC timestamps with milliseconds (`2026-03-06T09:10:00.123Z`), without a formatter object.
public enum RFC3339 {
    public static func format(_ date: Date) -> String {
        let totalMillis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var days = totalMillis >= 0 ? totalMillis / 86_400_000 : (totalMillis - 86_399_999) / 86_400_000
        let millisOfDay = totalMillis - days * 86_400_000
        // Howard Hinnant's civil_from_days.
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)

        let hour = millisOfDay / 3_600_000
        let minute = millisOfDay / 60_000 % 60
        let second = millisOfDay / 1000 % 60
        let millis = millisOfDay % 1000
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T" + pad(hour, 2) + ":" + pad(minute, 2) + ":"
            + pad(second, 2) + "." + pad(millis, 3) + "Z"
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}
