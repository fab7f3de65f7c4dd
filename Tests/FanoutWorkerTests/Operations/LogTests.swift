import APNsModel
import Foundation
import Synchronization
import Testing
@testable import FanoutWorker

/// Collects log lines in memory.
final class LineCollector: Sendable {
    private let lines = Mutex<[String]>([])
    var sink: Log.Sink { { line in self.lines.withLock { $0.append(line) } } }
    var all: [String] { lines.withLock { $0 } }

    func objects() throws -> [[String: Any]] {
        try all.map { line in
            try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }
}

@Suite struct LogTests {
    let fixedTime = Date(timeIntervalSince1970: 1_772_788_200.123)

    @Test func writesOneJSONObjectPerLineWithTypedFields() throws {
        let lines = LineCollector()
        let log = Log(level: .info, sink: lines.sink, clock: { [fixedTime] in fixedTime })
        log.info("sent \"update\"\nnext", ["lane": "activity", "status": 200, "latency": .duration(.milliseconds(250)), "retry": false, "ratio": 0.5])
        #expect(lines.all.count == 1)
        #expect(lines.all[0].hasSuffix("}\n"))
        #expect(lines.all[0].filter { $0 == "\n" }.count == 1)
        let object = try #require(try lines.objects().first)
        #expect(object["time"] as? String == "2026-03-06T09:10:00.123Z")
        #expect(object["level"] as? String == "info")
        #expect(object["msg"] as? String == "sent \"update\"\nnext")
        #expect(object["lane"] as? String == "activity")
        #expect(object["status"] as? Int == 200)
        #expect(object["latency"] as? Double == 0.25)
        #expect(object["retry"] as? Bool == false)
        #expect(object["ratio"] as? Double == 0.5)
    }

    @Test func escapesEveryControlCharacterAndKeepsUnicode() throws {
        let lines = LineCollector()
        let log = Log(level: .info, sink: lines.sink)
        let text = "é ✓ 🚀 tab\t cr\r nul\u{0} bell\u{7} esc\u{1B} slash\\ quote\""
        log.info(text, ["f": .string(text)])
        let line = try #require(lines.all.first)
        #expect(!line.dropLast().contains { $0.asciiValue.map { $0 < 0x20 } ?? false })
        let object = try #require(try lines.objects().first)
        #expect(object["msg"] as? String == text)
        #expect(object["f"] as? String == text)
    }

    @Test func levelsFilterAndSkipFormatting() {
        let lines = LineCollector()
        let log = Log(level: .warning, sink: lines.sink)
        let evaluated = Atomic<Int>(0)
        func expensive() -> String {
            evaluated.add(1, ordering: .relaxed)
            return "expensive"
        }
        log.info(expensive())
        log.debug(expensive(), ["x": .string(expensive())])
        #expect(evaluated.load(ordering: .relaxed) == 0)
        #expect(!log.isEnabled(.info))
        log.warning("kept")
        log.error("kept too")
        #expect(lines.all.count == 2)
        log.setLevel(.trace)
        log.trace("now visible")
        #expect(lines.all.count == 3)
        #expect(log.level == .trace)
    }

    @Test func childLoggersAddContextAndShareLevel() throws {
        let lines = LineCollector()
        let root = Log(level: .info, sink: lines.sink)
        let kafka = root.with(["component": "kafka"]).with(["partition": 3])
        kafka.info("assigned", ["msg": "field named like a reserved key"])
        root.setLevel(.error)
        kafka.info("dropped")
        let object = try #require(try lines.objects().first)
        #expect(lines.all.count == 1)
        #expect(object["component"] as? String == "kafka")
        #expect(object["partition"] as? Int == 3)
        #expect(object["msg"] as? String == "assigned")
        #expect(object["field_msg"] as? String == "field named like a reserved key")
    }

    @Test func tokensAndJWTsNeverAppearWhole() throws {
        let lines = LineCollector()
        let log = Log(level: .info, sink: lines.sink)
        let token = String(repeating: "ab12cd34", count: 8)
        let jwt = "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQ0RFMTIzNDUifQ.eyJpc3MiOiJURUFNMTIzNDU2IiwiaWF0IjoxNzcyNzg4MjAwfQ.c2lnbmF0dXJlLWJ5dGVzLWhlcmU"
        log.info("minted \(jwt)", ["token": .token(token), "raw": .string(token), "authorization": .string("bearer \(jwt)"),
                                   "reason": .string("APNs 400 {\"reason\":\"BadDeviceToken\",\"token\":\"\(token)\"}")])
        let line = try #require(lines.all.first)
        #expect(!line.contains(token))
        #expect(!line.contains(jwt))
        #expect(!line.contains("eyJpc3Mi"))
        let object = try #require(try lines.objects().first)
        #expect(object["token"] as? String == "ab12cd34…(64)")
        #expect(object["raw"] as? String == "ab12cd34…(64)")
        // Free text keeps its words: only the secrets inside it are masked.
        #expect(object["authorization"] as? String == "bearer " + Redact.jwtPlaceholder)
        #expect(object["msg"] as? String == "minted " + Redact.jwtPlaceholder)
        #expect(object["reason"] as? String == "APNs 400 {\"reason\":\"BadDeviceToken\",\"token\":\"ab12cd34…(64)\"}")
    }

    @Test func concurrentLinesNeverInterleave() async throws {
        let lines = LineCollector()
        let log = Log(level: .info, sink: lines.sink)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<200 { log.info("line", ["task": .int(task), "index": .int(index)]) }
                }
            }
        }
        let objects = try lines.objects()
        #expect(objects.count == 1600)
        #expect(Set(objects.map { "\($0["task"]!)-\($0["index"]!)" }).count == 1600)
    }

    /// A logger that wrote many lines still writes from a thread with a small stack (the APNs client's
    /// thread has 1 MiB): each line once wrapped the sink in two more thunks, in debug builds, until the
    /// call through them overflowed the stack (the AddressSanitizer worker did so after ≈9 minutes of
    /// load). Fails by crashing the test process when the sink grows again.
    @Test func manyLinesLeaveTheSinkAsCheapToCall() async throws {
        let count = Mutex(0)
        let log = Log(level: .info, sink: { _ in count.withLock { $0 += 1 } })
        for index in 0..<20_000 { log.info("line", ["index": .int(index)]) }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                log.info("from a small stack")
                continuation.resume()
            }
            thread.stackSize = 256 << 10
            thread.start()
        }
        #expect(count.withLock { $0 } == 20_001)
    }

    @Test func rfc3339AcrossDates() {
        #expect(RFC3339.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(RFC3339.format(Date(timeIntervalSince1970: 951_782_400.5)) == "2000-02-29T00:00:00.500Z")
        #expect(RFC3339.format(Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59.000Z")
        #expect(RFC3339.format(Date(timeIntervalSince1970: 4_102_444_799.999)) == "2099-12-31T23:59:59.999Z")
        // Agrees with Foundation's formatter on arbitrary instants.
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        for seconds in stride(from: 0.0, to: 4e9, by: 123_456_789.25) {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(RFC3339.format(date) == formatter.string(from: date))
        }
    }
}
