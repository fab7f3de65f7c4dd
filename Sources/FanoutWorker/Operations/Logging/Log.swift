import APNsModel
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Structured logging: one JSON object a line (`time`, `level`, `msg`, then typed fields).
///
/// Threading: safe from any thread. The level check is one atomic load, and the message and fields
/// are autoclosures, so a disabled level costs no formatting. Lines are written whole under a
/// `Mutex`, so concurrent lines never interleave. Children made with `with(_:)` share the level and sink.
///
/// Secrets: the message and every string field go through `Redact.text`, so a JWT inside them becomes
/// `Redact.jwtPlaceholder` and a run of 32+ hex digits (a push token) is reduced as `Redact.token`
/// reduces it, whether the text is Fanout's own or quotes an APNs answer, librdkafka or an event.
/// Callers should still pass tokens as `.token(_)`.
public final class Log: Sendable {
    /// Receives one complete line, newline included.
    public typealias Sink = @Sendable (String) -> Void

    private final class Core: Sendable {
        let level: Atomic<Int>
        /// Held while the sink writes a line. The sink is not the Mutex's value: a closure stored as a
        /// generic container's value is reabstracted on each `inout` access, which an unoptimized build
        /// does by wrapping it in two more thunks per line, so memory grew with every line logged and
        /// calling the sink after ≈10,000 lines overflowed a 256 KiB thread stack.
        let writing = Mutex(())
        let sink: Sink
        let clock: @Sendable () -> Date
        init(level: LogLevel, sink: @escaping Sink, clock: @escaping @Sendable () -> Date) {
            self.level = Atomic(level.rank)
            self.sink = sink
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

    /// Writes to file descriptor 2 with `write(2)`, retrying partial writes. A failed write (stderr
    /// closed, EPIPE) is dropped rather than crashing the worker: there is nowhere left to report it.
    public static let standardErrorSink: Sink = { line in
        var line = line
        line.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(2, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
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
        core.writing.withLock { _ in core.sink(line) }
    }

    /// `log` with fields that are there only sometimes (`more`, after `fields`): an event's trace
    /// context, say.
    public func log(_ level: LogLevel, _ message: @autoclosure () -> String,
                    _ fields: @autoclosure () -> KeyValuePairs<String, LogValue>, more: @autoclosure () -> [(String, LogValue)]) {
        guard isEnabled(level) else { return }
        let line = Self.format(time: core.clock(), level: level, message: message(), context: context, fields: fields(), more: more())
        core.writing.withLock { _ in core.sink(line) }
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
                       fields: KeyValuePairs<String, LogValue>, more: [(String, LogValue)] = []) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        out.append(contentsOf: #"{"time":""#.utf8)
        RFC3339.append(time, to: &out)
        out.append(contentsOf: #"","level":""#.utf8)
        out.append(contentsOf: level.rawValue.utf8)
        out.append(contentsOf: #"","msg":"#.utf8)
        JSONString.append(Redact.text(message), to: &out)
        for (name, value) in context { appendField(name, value, to: &out) }
        for (name, value) in fields { appendField(name, value, to: &out) }
        for (name, value) in more { appendField(name, value, to: &out) }
        out.append(contentsOf: "}\n".utf8)
        return String(decoding: out, as: UTF8.self)
    }

    private static func appendField(_ name: String, _ value: LogValue, to out: inout [UInt8]) {
        out.append(UInt8(ascii: ","))
        JSONString.append(reservedNames.contains(name) ? "field_" + name : name, to: &out)
        out.append(UInt8(ascii: ":"))
        switch value {
        case .string(let text): JSONString.append(Redact.text(text), to: &out)
        case .int(let n): out.append(contentsOf: String(n).utf8)
        case .double(let d): out.append(contentsOf: (d.isFinite ? String(d) : "null").utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .duration(let d): out.append(contentsOf: String(DurationText.seconds(d)).utf8)
        case .traceContext(let text): JSONString.append(text, to: &out)
        case .traceContexts(let texts):
            out.append(UInt8(ascii: "["))
            for (index, text) in texts.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSONString.append(text, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }
}

/// RFC 3339 UTC timestamps with milliseconds (`2026-03-06T09:10:00.123Z`), without a formatter object.
public enum RFC3339 {
    public static func format(_ date: Date) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(24)
        append(date, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func append(_ date: Date, to out: inout [UInt8]) {
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

        digits(year, 4, &out); out.append(UInt8(ascii: "-"))
        digits(month, 2, &out); out.append(UInt8(ascii: "-"))
        digits(day, 2, &out); out.append(UInt8(ascii: "T"))
        digits(millisOfDay / 3_600_000, 2, &out); out.append(UInt8(ascii: ":"))
        digits(millisOfDay / 60_000 % 60, 2, &out); out.append(UInt8(ascii: ":"))
        digits(millisOfDay / 1000 % 60, 2, &out); out.append(UInt8(ascii: "."))
        digits(millisOfDay % 1000, 3, &out); out.append(UInt8(ascii: "Z"))
    }

    /// Zero-padded decimal of a non-negative value (years before 0 do not occur in logs).
    private static func digits(_ value: Int64, _ width: Int, _ out: inout [UInt8]) {
        var value = max(0, value)
        var buffer: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (48, 48, 48, 48, 48, 48)
        var count = 0
        withUnsafeMutableBytes(of: &buffer) { raw in
            repeat {
                raw[5 - count] = UInt8(48 + value % 10)
                value /= 10
                count += 1
            } while value > 0 && count < 6
            let used = max(count, width)
            out.append(contentsOf: raw[(6 - used)...])
        }
    }
}
