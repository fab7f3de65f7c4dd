import FanoutCore
import FanoutWorker
import Foundation

/// Text of the demo: one line per Lock Screen change, and the closing summary.
enum DemoSummary {
    static func describe(_ line: LockScreenBoard.Line, console: DemoConsole) -> String {
        switch line {
        case let .card(name, face):
            let label = console.paint("[\(name)]".padding(toLength: 12, withPad: " ", startingAt: 0), .bold)
            var text = label + " " + face.text.padding(toLength: 30, withPad: " ", startingAt: 0)
            let priority = face.lastPriority.map { "p\($0), " } ?? ""
            text += console.paint(" (\(priority)\(face.sends) send\(face.sends == 1 ? "" : "s"))", .dim)
            if face.ended { text += " " + console.paint("■ ended", .cyan) }
            if face.tokenGone { text += " " + console.paint("⊘ token unregistered", .yellow) }
            return text
        case let .alert(name, title, body, priority):
            return console.paint("🔔 [\(name)] \(title) — \(body)", .magenta) + console.paint(" (alert, p\(priority))", .dim)
        }
    }

    static func render(_ outcome: DemoOutcome, console: DemoConsole) -> [String] {
        var lines: [String] = [""]
        let timing = outcome.succeeded ? "scene played and drained in %.1f s" : "stopped %.1f s into the scene"
        lines.append(console.paint("Summary", .bold) + console.paint("  (" + String(format: timing, outcome.seconds) + ")", .dim))
        let worker = outcome.worker
        let ledger = outcome.ledger

        let produced = DemoScene.Topic.allCases.map { "\($0.rawValue) \(ledger.acked[$0.rawValue] ?? 0)" }.joined(separator: " · ")
        lines.append(row("Events in", produced))
        lines.append(row("", "the worker read \(worker.eventsIn) event(s), accepted \(worker.eventsAccepted), applied \(worker.tokenUpdates) token record(s)"))

        let sends = worker.sends.sorted { ($0.key.lane.rawValue, -$0.key.priority) < ($1.key.lane.rawValue, -$1.key.priority) }
            .map { key, count in "\(key.lane.rawValue) p\(key.priority) \(count)" }.joined(separator: " · ")
        lines.append(row("Sends", sends.isEmpty ? "none" : sends))
        let delivered = outcome.deliveries.count
        let rejected = outcome.simulatorStats.responses.filter { $0.key != "200" }.sorted { $0.key < $1.key }
            .map { "\($0.value)× \($0.key)" }.joined(separator: ", ")
        lines.append(row("", "APNs (simulator) accepted \(delivered)" + (rejected.isEmpty ? "" : "; answered \(rejected)")))

        lines.append(row("Coalesced", "\(worker.coalesced) event(s) completed by a newer state's send, not sent one by one"))
        if !worker.dropped.isEmpty {
            lines.append(row("Dropped", worker.dropped.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: " · ")))
        }

        let reasons = Dictionary(grouping: outcome.deadLetters, by: \.reason).sorted { $0.key < $1.key }
            .map { reason, letters in "\(reason) ×\(letters.count) (\(Set(letters.map(\.key)).sorted().joined(separator: ", ")))" }
        lines.append(row("Dead-lettered", reasons.isEmpty ? "none" : reasons.joined(separator: " · ")))
        let feedback = outcome.feedback.map { "\($0.key) \(DemoScene.prefix($0.token)) \($0.status) \($0.reason)" }
        lines.append(row("Feedback", feedback.isEmpty ? "none" : feedback.joined(separator: " · ")))

        var commits: [String] = []
        for partition in outcome.eventPartitions {
            let end = ledger.ends[partition] ?? 0
            let committed = outcome.committed[partition] ?? nil
            let mark = (committed ?? 0) >= end ? console.paint("✓", .green) : console.paint("✗", .red)
            commits.append(end == 0 && committed == nil ? "\(partition) empty" : "\(partition) \(committed.map(String.init) ?? "-")/\(end) \(mark)")
        }
        for (index, chunk) in stride(from: 0, to: commits.count, by: 3).enumerated() {
            lines.append(row(index == 0 ? "Committed" : "", commits[chunk..<min(chunk + 3, commits.count)].joined(separator: "   ")))
        }
        lines.append(row("", "(committed offset / end offset, read back from the group after the worker stopped)"))

        for card in outcome.scene.cards {
            guard let face = outcome.faces[card.name] else {
                lines.append(row(card == outcome.scene.cards.first ? "Lock Screens" : "", "[\(card.name)] nothing shown"))
                continue
            }
            var text = "[\(card.name)] \(face.text)"
            if face.ended { text += " (ended)" }
            if face.tokenGone { text += " (token unregistered)" }
            lines.append(row(card == outcome.scene.cards.first ? "Lock Screens" : "", text))
        }
        if let path = outcome.workerLogPath { lines.append(row("Worker log", path)) }
        if let path = outcome.deliveryLogPath { lines.append(row("Delivery log", path)) }
        if outcome.workerLogWriteFailures > 0 {
            lines.append(row("Worker log", "\(outcome.workerLogWriteFailures) line(s) could not be written"))
        }
        lines.append("")
        if outcome.succeeded {
            lines.append(console.paint("✓ Every Lock Screen shows its final state and every event is committed.", .green))
        } else {
            lines.append(console.paint("✗ The demo did not end as scripted:", .red))
            lines += outcome.problems.map { "  " + $0 }
        }
        return lines
    }

    private static func row(_ title: String, _ value: String) -> String {
        "  " + title.padding(toLength: 14, withPad: " ", startingAt: 0) + value
    }
}
