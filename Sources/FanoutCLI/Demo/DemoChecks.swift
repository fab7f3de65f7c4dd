import APNsSimulator
import FanoutCore
import Foundation

/// What a finished demo run must show; a violated expectation makes `fanout demo` exit 1.
/// Pure: reads a `DemoOutcome`, returns human-readable problems (empty when all is well).
enum DemoChecks {
    static func problems(in outcome: DemoOutcome) -> [String] {
        var problems: [String] = []
        let scene = outcome.scene

        for (name, expected) in scene.expectedFinal.sorted(by: { $0.key < $1.key }) {
            guard let face = outcome.faces[name] else {
                problems.append("\(name): the simulator never showed it on a Lock Screen")
                continue
            }
            if !sameJSON(face.contentState, expected.contentState) {
                problems.append("\(name): the Lock Screen shows \(face.contentState), expected \(String(decoding: expected.contentState, as: UTF8.self))")
            }
            if face.ended != expected.ended {
                problems.append("\(name): expected the activity to be \(expected.ended ? "ended" : "live"), it is \(face.ended ? "ended" : "live")")
            }
        }

        for partition in outcome.eventPartitions {
            let end = outcome.ledger.ends[partition] ?? 0
            let committed = outcome.committed[partition] ?? nil
            if end > 0 && committed != end {
                problems.append("\(partition): the group committed \(committed.map(String.init) ?? "nothing"), the partition ends at \(end)")
            }
        }

        let malformed = outcome.deadLetters.filter { $0.reason == RejectionReason.timestampInMilliseconds.rawValue }
        if malformed.count != 1 || malformed.first?.key != "export-42" {
            problems.append("expected export-42's millisecond event dead-lettered once as \(RejectionReason.timestampInMilliseconds.rawValue), found \(malformed.count)")
        }
        for letter in outcome.deadLetters where letter.reason != RejectionReason.timestampInMilliseconds.rawValue {
            // After its token is gone, export-43's later events may wait token_wait and be dead-lettered as no-token.
            if !(letter.reason == RejectionReason.noToken.rawValue && letter.key == "export-43") {
                problems.append("unexpected dead letter on \(letter.topic): \(letter.key) \(letter.reason) \(letter.detail ?? "")")
            }
        }

        let goneToken = scene.export43Token
        if !outcome.feedback.contains(where: { $0.token == goneToken && $0.status == 410 && $0.key == "export-43" }) {
            problems.append("expected a 410 feedback record for export-43's token on activity-token-feedback")
        }
        if let goneAt = outcome.ledger.unregistered[goneToken] {
            let late = outcome.deliveries.filter { $0.token == goneToken && $0.time >= goneAt }.count
            if late > 0 { problems.append("the simulator accepted \(late) push(es) for export-43's token after it was unregistered") }
        }
        let rejections = outcome.simulatorStats.count(status: 410, reason: .unregistered)
        if rejections != 1 {
            problems.append("expected exactly one send to the unregistered token (answered 410), the simulator saw \(rejections)")
        }
        return problems
    }

    /// Equal as JSON values (numbers compared by value, keys unordered).
    static func sameJSON(_ text: String, _ expected: [UInt8]) -> Bool {
        guard let left = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? NSDictionary,
              let right = try? JSONSerialization.jsonObject(with: Data(expected)) as? NSDictionary else { return false }
        return left.isEqual(right)
    }
}
