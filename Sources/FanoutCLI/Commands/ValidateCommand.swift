import Dispatch
import Foundation
import FanoutCore

/// `fanout validate`: checks JSON-lines events against the v1 contract exactly as the worker does,
/// so producers can test their output before publishing it.
struct ValidateCommand: Command {
    static let name = "validate"
    static let summary = "Check JSON-lines events against the v1 event contract"
    static let help = """
    Usage: fanout validate <file | -> [options]

    Reads one event per line (empty lines are skipped) from a file, or from stdin with '-', and checks
    each against the v1 event contract with the same decoder the worker uses, including the final
    APNs payload size. Prints 'line N: <reason-code>: <detail>' for each rejected line, then
    'N valid, M rejected'. Exits 0 when every line is valid, 1 otherwise.

    Options:
      --lane activity|broadcast   which topic the events are for (default: activity)
      --app <bundle id>           a configured app; repeat for several. With exactly one, events may
                                  omit "app"; with none, any bundle id is accepted and "app" is required
      --now <unix seconds>        the time to check "not more than 8 h ahead" against (default: now)
      --max-event-bytes <n>       largest event accepted (default: 65536)
    """

    static func run(_ arguments: [String]) async throws -> Int32 {
        var args = Arguments(arguments)
        let laneText = try args.option("lane") ?? "activity"
        guard let lane = Lane(rawValue: laneText) else {
            throw UsageError("--lane must be 'activity' or 'broadcast', got '\(laneText)'")
        }
        let apps = try args.options("app")
        let now = try args.int("now").map(Int64.init) ?? Int64(Date().timeIntervalSince1970)
        let maxEventBytes = try args.int("max-event-bytes") ?? EventPolicy.defaultMaxEventBytes
        guard maxEventBytes > 0 else { throw UsageError("--max-event-bytes must be positive") }
        guard let path = args.positional() else { throw UsageError("give a file to read, or '-' for stdin") }
        try args.finish()

        let decoder = EventDecoder(policy: EventPolicy(apps: Set(apps), maxEventBytes: maxEventBytes))
        // File reads block: keep them off Swift's cooperative pool.
        let summary = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Summary, Error>) in
            DispatchQueue(label: "fanout.validate").async {
                continuation.resume(with: Result {
                    try validate(path: path, decoder: decoder, lane: lane, now: now, maxLineBytes: maxEventBytes)
                })
            }
        }
        Output.out("\(summary.valid) valid, \(summary.rejected) rejected")
        return summary.rejected == 0 ? 0 : 1
    }

    struct InputError: Error, CustomStringConvertible {
        var description: String
    }

    struct Summary {
        var valid = 0
        var rejected = 0
    }

    static func validate(path: String, decoder: EventDecoder, lane: Lane, now: Int64, maxLineBytes: Int) throws -> Summary {
        var summary = Summary()
        summary.rejected = try EventLines.decode(path: path, decoder: decoder, lane: lane, now: now, maxLineBytes: maxLineBytes) { _, _, _ in
            summary.valid += 1
        }
        return summary
    }
}

/// Reads JSON-lines events from a file or stdin ('-'), decodes each with the worker's decoder, prints
/// 'line N: <reason-code>: <detail>' for each rejected line and hands every valid one to `accept`.
/// Shared by `fanout validate` and `fanout produce` so both judge a line exactly alike.
enum EventLines {
    /// Returns the number of rejected lines. Blocks on file reads: call it from a thread of your own.
    static func decode(path: String, decoder: EventDecoder, lane: Lane, now: Int64, maxLineBytes: Int,
                       accept: (_ bytes: ArraySlice<UInt8>, _ event: ActivityEvent, _ line: Int) -> Void) throws -> Int {
        let handle: FileHandle
        if path == "-" {
            handle = FileHandle.standardInput
        } else {
            guard let file = FileHandle(forReadingAtPath: path) else {
                throw ValidateCommand.InputError(description: "cannot open '\(path)' for reading")
            }
            handle = file
        }
        var rejected = 0
        var lines = LineSplitter(maxLineBytes: maxLineBytes)
        func take(_ line: LineSplitter.Line) {
            switch line {
            case let .bytes(number, bytes):
                var bytes = bytes[...]
                if bytes.last == UInt8(ascii: "\r") { bytes = bytes.dropLast() }
                if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return }
                switch bytes.withUnsafeBufferPointer({ decoder.decode($0, key: nil, lane: lane, now: now) }) {
                case let .success(event):
                    accept(bytes, event, number)
                case let .failure(rejection):
                    rejected += 1
                    Output.out("line \(number): \(rejection.reason.rawValue): \(rejection.detail)")
                }
            case let .tooLong(number, length):
                rejected += 1
                Output.out("line \(number): \(RejectionReason.eventTooLarge.rawValue): the event is at least \(length) bytes, over the \(maxLineBytes)-byte limit (max_event_bytes)")
            }
        }
        while true {
            let chunk = try handle.read(upToCount: 1 << 20) ?? Data()
            if chunk.isEmpty { break }
            lines.feed(chunk, take)
        }
        lines.finish(take)
        if path != "-" { try handle.close() }
        return rejected
    }
}

/// Splits a byte stream into numbered lines, holding at most `maxLineBytes + 1` bytes of any one line
/// so a huge line cannot exhaust memory.
struct LineSplitter {
    enum Line {
        case bytes(number: Int, [UInt8])
        case tooLong(number: Int, length: Int)
    }

    let maxLineBytes: Int
    private var current: [UInt8] = []
    private var currentLength = 0
    private var number = 1

    init(maxLineBytes: Int) { self.maxLineBytes = maxLineBytes }

    mutating func feed(_ data: Data, _ emit: (Line) -> Void) {
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            var start = 0
            while start < raw.count {
                let end = raw[start...].firstIndex(of: 0x0A) ?? raw.count
                let piece = raw[start..<end]
                if currentLength <= maxLineBytes {
                    current.append(contentsOf: piece.prefix(maxLineBytes + 1 - currentLength))
                }
                currentLength += piece.count
                if end < raw.count { endLine(emit) }
                start = end + 1
            }
        }
    }

    mutating func finish(_ emit: (Line) -> Void) {
        if currentLength > 0 { endLine(emit) }
    }

    private mutating func endLine(_ emit: (Line) -> Void) {
        // A trailing '\r' does not count against the limit.
        let limit = current.last == UInt8(ascii: "\r") ? maxLineBytes + 1 : maxLineBytes
        if currentLength > limit {
            emit(.tooLong(number: number, length: currentLength))
        } else {
            emit(.bytes(number: number, current))
        }
        current.removeAll(keepingCapacity: true)
        currentLength = 0
        number += 1
    }
}
