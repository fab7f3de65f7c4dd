import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Where the demo's story goes: whole lines, optionally colored, each prefixed with the time since
/// the scene started. Thread-safe: lines from the player, the board and the tails never interleave.
final class DemoConsole: Sendable {
    enum Style: String, Sendable {
        case plain = ""
        case dim = "\u{1B}[2m"
        case bold = "\u{1B}[1m"
        case green = "\u{1B}[32m"
        case yellow = "\u{1B}[33m"
        case red = "\u{1B}[31m"
        case cyan = "\u{1B}[36m"
        case magenta = "\u{1B}[35m"
    }

    typealias Sink = @Sendable (String) -> Void

    let color: Bool
    /// Story lines are suppressed (`--quiet`); headings and the summary are always written.
    let quiet: Bool
    private let sink: Sink
    private let started = Mutex<ContinuousClock.Instant?>(nil)
    private let lock = Mutex(())

    init(color: Bool, quiet: Bool, sink: @escaping Sink = { Output.out($0) }) {
        self.color = color
        self.quiet = quiet
        self.sink = sink
    }

    /// Colors are used when stdout is a terminal, `TERM` is not `dumb` and `NO_COLOR` is unset.
    static func stdoutWantsColor() -> Bool {
        let environment = ProcessInfo.processInfo.environment
        return isatty(1) == 1 && environment["NO_COLOR"] == nil && environment["TERM"] != "dumb"
    }

    func startClock() { started.withLock { $0 = ContinuousClock.now } }

    /// Seconds since `startClock`, for the line prefix.
    var elapsed: Double {
        guard let start = started.withLock({ $0 }) else { return 0 }
        let duration = ContinuousClock.now - start
        return Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    func paint(_ text: String, _ style: Style) -> String {
        color && style != .plain ? style.rawValue + text + "\u{1B}[0m" : text
    }

    /// A line of the story, prefixed with `+12.3s`.
    func story(_ text: String) {
        guard !quiet else { return }
        let stamp = String(format: "%+6.1fs", elapsed)
        write(paint(stamp, .dim) + "  " + text)
    }

    /// A line without a time prefix, suppressed by `--quiet`.
    func note(_ text: String) {
        guard !quiet else { return }
        write(text)
    }

    /// A line shown even with `--quiet`.
    func line(_ text: String) { write(text) }

    private func write(_ text: String) {
        lock.withLock { _ in sink(text) }
    }
}
