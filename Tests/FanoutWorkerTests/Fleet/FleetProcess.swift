#if canImport(Glibc)
import Glibc
#endif
import FanoutTestSupport
import Foundation
import Synchronization

/// One `fanout` child process of a fleet test: its standard output and error captured line by line
/// (each with the time it arrived) and copied to `<scratch>/<name>.out` / `.err` for after the test.
final class FleetProcess: Sendable {
    let name: String
    let child: ChildProcess
    private let output = Mutex<[String]>([])
    private let errors = Mutex<[(time: Double, text: String)]>([])
    /// Set while the test holds the process with SIGSTOP.
    private let stopped = Atomic(false)
    /// Set once the test sent SIGTERM or SIGKILL: an exit after that is expected.
    private let signalledToEnd = Atomic(false)
    private let readersDone = DispatchGroup()

    init(name: String, executable: String, arguments: [String], scratch: String, input: ChildProcess.Stream = .null) throws {
        self.name = name
        // Without the runner's FANOUT_* variables: `fanout run` reads every one as configuration (and
        // refuses unknown keys), so a CI that exports, say, FANOUT_SIM_SEEDS must not reach the workers.
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("FANOUT_") }
        child = try ChildProcess(executable, arguments, input: input, output: .pipe, error: .pipe, environment: environment)
        Self.drain(child.standardOutput!, to: scratch + "/\(name).out", group: readersDone) { [weak self] line, _ in
            self?.output.withLock { $0.append(line) }
        }
        Self.drain(child.standardError!, to: scratch + "/\(name).err", group: readersDone) { [weak self] line, time in
            self?.errors.withLock { $0.append((time, line)) }
        }
    }

    deinit { kill() }

    /// Reads `handle` to its end on a thread of its own, one line at a time.
    private static func drain(_ handle: FileHandle, to path: String, group: DispatchGroup,
                              _ each: @escaping @Sendable (String, Double) -> Void) {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let copy = FileHandle(forWritingAtPath: path)
        group.enter()
        Thread.detachNewThread {
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                try? copy?.write(contentsOf: chunk)
                pending.append(chunk)
                let now = Date().timeIntervalSince1970
                while let newline = pending.firstIndex(of: 0x0A) {
                    each(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self), now)
                    pending.removeSubrange(pending.startIndex...newline)
                }
            }
            if !pending.isEmpty { each(String(decoding: pending, as: UTF8.self), Date().timeIntervalSince1970) }
            try? copy?.close()
            group.leave()
        }
    }

    var pid: pid_t { child.pid }
    /// True when it exited without the test asking it to.
    var exitedUnasked: Bool { !signalledToEnd.load(ordering: .relaxed) && !child.isRunning }
    var isRunning: Bool { child.isRunning }
    var isStopped: Bool { stopped.load(ordering: .relaxed) }
    var outputLines: [String] { output.withLock { $0 } }
    var logLines: [String] { errors.withLock { $0.map(\.text) } }

    func signal(_ number: Int32) {
        if number == SIGSTOP { stopped.store(true, ordering: .relaxed) }
        if number == SIGCONT || number == SIGKILL { stopped.store(false, ordering: .relaxed) }
        if number == SIGTERM || number == SIGKILL { signalledToEnd.store(true, ordering: .relaxed) }
        child.signal(number)
    }

    /// SIGKILL (and SIGCONT, in case it was stopped) unless it has exited; reaps it.
    func kill() {
        signalledToEnd.store(true, ordering: .relaxed)
        if child.isRunning {
            child.signal(SIGKILL)
            child.signal(SIGCONT)
        }
        _ = child.waitUntilExit()
    }

    /// Waits for the exit (bounded); its status, nil when it is still running after `timeout`.
    func waitForExit(timeout: Duration) async throws -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while child.isRunning {
            guard ContinuousClock.now < deadline else { return nil }
            try await Task.sleep(for: .milliseconds(20))
        }
        return child.waitUntilExit()
    }

    /// The last `count` lines of its standard error (and output), for failure messages.
    func tail(_ count: Int = 30) -> String {
        let lines = errors.withLock { $0.suffix(count).map(\.text) }
        return "--- \(name) (pid \(pid)\(isRunning ? "" : ", exited \(child.waitUntilExit())")) stderr tail:\n" + lines.joined(separator: "\n")
    }

    /// The first line of standard output starting with `prefix` (without it), waiting up to `timeout`.
    func waitForOutput(prefix: String, timeout: Duration) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let line = output.withLock({ $0.first { $0.hasPrefix(prefix) } }) { return String(line.dropFirst(prefix.count)) }
            guard ContinuousClock.now < deadline, child.isRunning else {
                throw FleetError("\(name) printed no line starting '\(prefix)' within \(timeout)\(child.isRunning ? "" : " (it exited)"); "
                                 + "stdout: \(outputLines.joined(separator: "\n"))\n\(tail())")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Worker log lines (JSON objects) with their message, parsed; `time` is the worker's own timestamp.
    func logEvents() -> [WorkerLogEvent] {
        errors.withLock { $0 }.compactMap { entry in
            guard entry.text.hasPrefix("{"),
                  let object = try? JSONSerialization.jsonObject(with: Data(entry.text.utf8)) as? [String: Any],
                  let message = object["msg"] as? String else { return nil }
            let time = (object["time"] as? String).flatMap(WorkerLogEvent.parseTime) ?? entry.time
            return WorkerLogEvent(time: time, message: message, fields: object)
        }
    }
}

/// One JSON log line of a worker.
struct WorkerLogEvent: @unchecked Sendable {  // `fields` holds JSONSerialization values only, never mutated
    var time: Double
    var message: String
    var fields: [String: Any]

    /// `activity-updates/3,activity-updates/5` → [3, 5] for `topic`.
    func partitions(of topic: String) -> [Int32] {
        guard let list = fields["partitions"] as? String else { return [] }
        return list.split(separator: ",").compactMap { item in
            guard item.hasPrefix(topic + "/") else { return nil }
            return Int32(item.dropFirst(topic.count + 1))
        }
    }

    static func parseTime(_ text: String) -> Double? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date.timeIntervalSince1970 }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)?.timeIntervalSince1970
    }
}

struct FleetError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
