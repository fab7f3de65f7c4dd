import Foundation

/// What a replay did, for the final report on stdout and the exit code.
struct ReplaySummary: Sendable {
    struct Tally: Sendable, Equatable {
        /// Records of this source partition acknowledged by the destination.
        var records = 0
        /// Key + value + header names and values of those records.
        var bytes = 0
    }

    var from: String
    var to: String
    var speed: Double
    /// Source partitions in range (including empty ones), with what was acknowledged.
    var partitions: [Int32: Tally] = [:]
    var produced = 0
    var failed = 0
    /// The first delivery failure, in words.
    var firstFailure: String?
    /// Why the copy stopped early, if it did (not a signal).
    var error: String?
    /// The signal that stopped the copy, if one did.
    var interruptedBy: Int32?
    /// From the start of the copy to the last acknowledgement.
    var elapsed: Duration = .zero
    /// Smallest and largest timestamps among the records produced.
    var recordedFirst: Int64?
    var recordedLast: Int64?

    var acknowledged: Int { partitions.values.reduce(0) { $0 + $1.records } }
    var bytes: Int { partitions.values.reduce(0) { $0 + $1.bytes } }

    /// 0 when every record in range was acknowledged; 130 when interrupted; 1 otherwise.
    var exitCode: Int32 {
        if interruptedBy != nil { return 130 }
        return error == nil && failed == 0 && acknowledged == produced ? 0 : 1
    }

    mutating func noteRecorded(_ stamp: Int64?) {
        guard let stamp else { return }
        recordedFirst = min(recordedFirst ?? stamp, stamp)
        recordedLast = max(recordedLast ?? stamp, stamp)
    }

    var text: String {
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        var lines = ["replay \(from) → \(to): \(acknowledged) record(s), \(bytes) byte(s) acknowledged in \(format(seconds, 2)) s"]
        for partition in partitions.keys.sorted() {
            let tally = partitions[partition]!
            lines.append("  partition \(partition): \(tally.records) record(s), \(tally.bytes) byte(s)")
        }
        let achieved = seconds > 0 ? Double(acknowledged) / seconds : 0
        var rates = "achieved \(format(achieved, 1)) records/s"
        if let first = recordedFirst, let last = recordedLast, last > first, acknowledged > 0 {
            let span = Double(last - first) / 1000
            let recorded = Double(produced) / span
            rates += "; recorded \(format(recorded, 1)) records/s over \(format(span, 3)) s"
            if seconds > 0 { rates += " (\(format(span / seconds, 2))× the recorded pace" + (speed > 0 ? ", asked \(format(speed, 2))×)" : ", asked as fast as possible)") }
        } else {
            rates += "; recorded rate unknown (fewer than two distinct record timestamps)"
        }
        lines.append(rates)
        if let interruptedBy {
            lines.append("interrupted by signal \(interruptedBy): \(produced) record(s) produced before stopping, \(acknowledged) acknowledged, \(failed) failed; the rest of the range was not copied")
        } else if let error {
            lines.append("failed: \(error)")
        } else if failed > 0 || acknowledged != produced {
            lines.append("failed: \(failed) of \(produced) record(s) were not acknowledged" + (firstFailure.map { "; first: \($0)" } ?? ""))
        } else {
            lines.append("complete: every record in range was acknowledged")
        }
        if interruptedBy != nil || error != nil, failed > 0, let firstFailure { lines.append("first failure: \(firstFailure)") }
        return lines.joined(separator: "\n")
    }

    private func format(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }
}
