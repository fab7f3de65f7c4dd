#if canImport(Glibc)
import Glibc
#endif
import APNsSimulator
import FanoutCore
import FanoutKafka
import FanoutTestSupport
import Foundation
import Synchronization

/// A fleet as a user runs it, every part its own process: `fanout broker` (librdkafka's mock cluster,
/// with `--control-stdin` to take the broker down), `fanout apns-sim` with a delivery log, and
/// `fanout run` workers, each signing with a key of its own so the simulator's log says which worker
/// sent each push. Every child is SIGKILLed when the harness goes away, and by a watchdog shell if the
/// test process itself dies, so no run leaves processes behind.
final class FleetHarness: Sendable {
    static let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("fanout").path
    static let updates = "activity-updates"
    static let teamID = "TEAM000001"

    let partitions: Int
    let scratch: String
    let group = "fanout-fleet"
    let bootstrap: String
    let broker: FleetProcess
    let simulator: FleetProcess
    let controlPort: Int
    let deviceURL: String
    let caFile: String
    let deliveries: DeliveryLog
    private let probe: KafkaConsumer
    private let watchdog: ChildProcess
    /// Every worker process started, in order; the current one of worker i is the last named `w<i>…`.
    private let workerProcesses = Mutex<[(index: Int, process: FleetProcess)]>([])
    private let pidFile: String
    private let stateChangelog: Bool

    /// - Parameter workers: how many worker configurations (and signing keys) to prepare.
    /// - Parameter stateChangelog: false sets `kafka.topics.state` to "" (no state handoff), for comparison.
    init(partitions: Int = 12, workers: Int = 3, stateChangelog: Bool = true) async throws {
        self.stateChangelog = stateChangelog
        self.partitions = partitions
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-fleet-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        pidFile = scratch + "/pids"
        _ = FileManager.default.createFile(atPath: pidFile, contents: nil)
        // Kills every child listed in the pid file once this test process is gone (crash, kill -9 of the runner).
        watchdog = try ChildProcess("/bin/sh", ["-c", "while kill -0 \(getpid()) 2>/dev/null; do sleep 0.5; done; "
                                                    + "for p in $(cat '\(pidFile)'); do kill -9 $p 2>/dev/null; done; rm -rf '\(scratch)'"])
        let topics = ["\(Self.updates):\(partitions)", "activity-tokens:\(partitions)", "fanout-state:\(partitions)", "broadcast-updates:2", "activity-updates-dlq:1",
                      "broadcast-updates-dlq:1", "activity-token-feedback:1"]
        broker = try FleetProcess(name: "broker", executable: Self.binary,
                                  arguments: ["broker", "--control-stdin"] + topics.flatMap { ["--topic", $0] }, scratch: scratch, input: .pipe)
        Self.remember(broker.pid, in: pidFile)
        var keys: [String] = []
        for index in 1...workers {
            let credentials = try SimulatorCredentials.generate(teamID: Self.teamID, keyID: Self.keyID(index))
            let path = scratch + "/w\(index).p8"
            try credentials.privateKey.pemPKCS8().write(toFile: path, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
            keys += ["--key", "\(Self.keyID(index))=\(path)"]
        }
        let logPath = scratch + "/deliveries.jsonl"
        simulator = try FleetProcess(name: "apns-sim", executable: Self.binary,
                                     arguments: ["apns-sim", "--app", FleetWorkload.app, "--team-id", Self.teamID, "--threads", "1",
                                                 "--delivery-log", logPath] + keys, scratch: scratch)
        Self.remember(simulator.pid, in: pidFile)
        bootstrap = try await broker.waitForOutput(prefix: "bootstrap: ", timeout: .seconds(30))
        _ = try await simulator.waitForOutput(prefix: "  ca-file: ", timeout: .seconds(30))
        deviceURL = try await simulator.waitForOutput(prefix: "  device-url: ", timeout: .seconds(1))
        caFile = try await simulator.waitForOutput(prefix: "  ca-file: ", timeout: .seconds(1))
        let control = try await simulator.waitForOutput(prefix: "  control-url: ", timeout: .seconds(1))
        guard let port = control.split(separator: ":").last.flatMap({ Int($0) }) else { throw FleetError("control-url '\(control)' has no port") }
        controlPort = port
        deliveries = DeliveryLog(path: logPath, controlPort: port)
        probe = try KafkaConsumer(configuration: KafkaConfiguration(bootstrapServers: bootstrap, [:]), groupID: group)
        for index in 1...workers { try writeConfiguration(index) }
    }

    deinit {
        for (_, process) in workerProcesses.withLock({ $0 }) { process.kill() }
        simulator.kill()
        broker.kill()
        watchdog.signal(SIGKILL)
        _ = watchdog.waitUntilExit()
        if ProcessInfo.processInfo.environment["FLEET_TEST_KEEP"] == nil {
            try? FileManager.default.removeItem(atPath: scratch)
        } else {
            print("fleet files kept in \(scratch)")
        }
    }

    static func keyID(_ worker: Int) -> String { "KEYFLEET\(String(format: "%02d", worker))" }

    /// The worker whose `keyID` this is; nil for another key.
    static func worker(ofKeyID keyID: String) -> Int? {
        keyID.hasPrefix("KEYFLEET") ? Int(keyID.dropFirst("KEYFLEET".count)) : nil
    }

    private static func remember(_ pid: pid_t, in file: String) {
        if let handle = FileHandle(forWritingAtPath: file) {
            handle.seekToEndOfFile()
            handle.write(Data("\(pid)\n".utf8))
            try? handle.close()
        }
    }

    /// The worker's configuration: the fleet's broker and simulator, its own signing key, and a short
    /// session timeout (the mock cluster holds every rebalance for about the session timeout).
    private func writeConfiguration(_ index: Int) throws {
        let config = """
        {"kafka": {"bootstrap_servers": "\(bootstrap)", "group_id": "\(group)", "commit_interval": "500ms",\(stateChangelog ? "" : " \"topics\": {\"state\": \"\"},")
                   "properties": {"session.timeout.ms": "6000", "max.poll.interval.ms": "7000", "heartbeat.interval.ms": "500"}},
         "apps": [{"bundle_id": "\(FleetWorkload.app)", "team_id": "\(Self.teamID)", "key_id": "\(Self.keyID(index))",
                   "key_path": "\(scratch)/w\(index).p8"}],
         "apns": {"base_url": "\(deviceURL)", "ca_file": "\(caFile)"},
         "admin": {"port": 0}, "shutdown_timeout": "5s", "log_level": "info"}
        """
        try config.write(toFile: scratch + "/w\(index).json", atomically: true, encoding: .utf8)
    }

    // MARK: Workers

    /// Starts (or restarts) worker `index` as a new `fanout run` process.
    @discardableResult
    func startWorker(_ index: Int) throws -> FleetProcess {
        let generation = workerProcesses.withLock { $0.filter { $0.index == index }.count } + 1
        let process = try FleetProcess(name: "w\(index)" + (generation > 1 ? "-\(generation)" : ""), executable: Self.binary,
                                       arguments: ["run", "--config", scratch + "/w\(index).json"], scratch: scratch)
        Self.remember(process.pid, in: pidFile)
        workerProcesses.withLock { $0.append((index, process)) }
        return process
    }

    func worker(_ index: Int) -> FleetProcess { workerProcesses.withLock { $0.last { $0.index == index }!.process } }

    var allWorkerProcesses: [(index: Int, process: FleetProcess)] { workerProcesses.withLock { $0 } }

    /// Sends SIGTERM and waits for the exit (bounded); the exit status.
    func terminate(_ index: Int) async throws -> (status: Int32, took: Duration) {
        let process = worker(index)
        let start = ContinuousClock.now
        process.signal(SIGTERM)
        guard let status = try await process.waitForExit(timeout: .seconds(20)) else {
            throw FleetError("w\(index) did not exit within 20 s of SIGTERM\n\(process.tail())")
        }
        return (status, ContinuousClock.now - start)
    }

    /// The admin port worker `index` logged (`admin server listening`).
    func adminPort(_ index: Int) -> Int? {
        worker(index).logEvents().first { $0.message == "admin server listening" }.flatMap { ($0.fields["port"] as? NSNumber)?.intValue }
    }

    /// The activity-updates partitions each running, not stopped worker process owns now, from its log:
    /// `partitions assigned` adds, `partitions revoked` and `partitions lost…` remove.
    func ownership() -> [Int: Set<Int32>] {
        var owned: [Int: Set<Int32>] = [:]
        for (index, process) in allWorkerProcesses where process.isRunning && !process.isStopped {
            owned[index] = Self.owned(by: process, until: .infinity)
        }
        return owned
    }

    static func owned(by process: FleetProcess, until time: Double) -> Set<Int32> {
        var set: Set<Int32> = []
        for event in process.logEvents() where event.time <= time {
            if event.message == "partitions assigned" { set.formUnion(event.partitions(of: updates)) }
            if event.message == "partitions revoked" || event.message.hasPrefix("partitions lost") {
                set.subtract(event.partitions(of: updates))
            }
        }
        return set
    }

    /// True when exactly `workers` own partitions, each at least one, disjoint, covering all.
    func settled(_ workers: Set<Int>) -> Bool {
        let owned = ownership().filter { !$0.value.isEmpty }
        guard Set(owned.keys) == workers else { return false }
        let total = owned.values.reduce(0) { $0 + $1.count }
        return total == partitions && owned.values.reduce(into: Set<Int32>()) { $0.formUnion($1) }.count == partitions
    }

    /// Polls `condition` every 100 ms; after `timeout` (a bound against hangs, not a performance figure)
    /// fails naming what it waited for, with every process's log tail.
    /// `pending`: what is still missing, said when the wait ends without it (read after the last check).
    func eventually(_ what: String, timeout: Duration, pending: () -> String = { "" }, _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            if try condition() { return }
            if let gone = (allWorkerProcesses.map(\.process) + [broker, simulator]).first(where: \.exitedUnasked) {
                throw FleetError("\(gone.name) exited on its own while waiting for: \(what)\n\(tails())")
            }
            guard ContinuousClock.now < deadline else {
                let missing = pending()
                throw FleetError("timed out after \(timeout) waiting for: \(what)\(missing.isEmpty ? "" : "; still missing: " + missing)\n\(tails())")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    func tails() -> String {
        let owned = ownership().sorted { $0.key < $1.key }.map { "w\($0.key): \($0.value.sorted())" }.joined(separator: "; ")
        return "ownership from the logs: \(owned)\n" + commitGauges()
            + (allWorkerProcesses.map { $0.process.tail(25) } + [simulator.tail(10), broker.tail(10)]).joined(separator: "\n")
    }

    /// Each running worker's commit gauges from its /metrics: whether its engine holds commits for a
    /// rebalance, how long its outstanding commit has waited, and its commits by result.
    func commitGauges() -> String {
        var lines: [String] = []
        for (index, process) in allWorkerProcesses where process.isRunning && !process.isStopped {
            guard let port = adminPort(index), let metrics = try? LoopbackHTTP.request(port: port, "GET", "/metrics").text else { continue }
            let wanted = metrics.split(separator: "\n").filter {
                $0.hasPrefix("fanout_commits_held") || $0.hasPrefix("fanout_offset_commit_waiting_seconds") || $0.hasPrefix("fanout_offset_commits_total")
            }
            lines.append("w\(index) commits: " + wanted.joined(separator: "; "))
        }
        return lines.map { $0 + "\n" }.joined()
    }

    // MARK: Broker and simulator controls

    /// A command to `fanout broker --control-stdin`; waits for its `ok:` answer.
    func brokerCommand(_ command: String) async throws {
        let answered = broker.outputLines.filter { $0.hasPrefix("ok: ") || $0.hasPrefix("error: ") }.count
        broker.child.standardInput!.write(Data((command + "\n").utf8))
        try await eventually("the broker's answer to '\(command)'", timeout: .seconds(10)) {
            broker.outputLines.filter { $0.hasPrefix("ok: ") || $0.hasPrefix("error: ") }.count > answered
        }
        let answer = broker.outputLines.filter { $0.hasPrefix("ok: ") || $0.hasPrefix("error: ") }[answered]
        guard answer.hasPrefix("ok: ") else { throw FleetError("broker answered '\(command)' with \(answer)") }
    }

    /// Replaces the simulator's faults (`PUT /faults`), e.g. `{"latencyMillis": 1500}`; `{}` clears them.
    func setFaults(_ json: String) throws {
        let answer = try LoopbackHTTP.request(port: controlPort, "PUT", "/faults", body: Data(json.utf8))
        guard answer.status == 200 else { throw FleetError("PUT /faults \(json): \(answer.status) \(answer.text)") }
    }

    /// What the simulator says the device of `token` shows.
    func deviceView(token: String) throws -> DeviceView? {
        let answer = try LoopbackHTTP.request(port: controlPort, "GET", "/device?token=\(token)")
        guard answer.status == 200 else { return nil }
        return try? JSONDecoder().decode(DeviceView.self, from: answer.body)
    }

    // MARK: Kafka

    /// The group's committed offsets of activity-updates (nil: nothing committed).
    func committed() throws -> [Int32: Int64?] {
        let list = (0..<Int32(partitions)).map { PartitionID(topic: Self.updates, partition: $0) }
        var result: [Int32: Int64?] = [:]
        for (partition, offset) in try probe.committed(list, timeout: .seconds(5)) { result[partition.partition] = offset }
        return result
    }
}

/// The simulator's delivery log file, read incrementally after `POST /flush` (so every push accepted
/// before the call is in it).
final class DeliveryLog: Sendable {
    let path: String
    let controlPort: Int
    private let state = Mutex<(offset: UInt64, records: [DeliveryRecord])>((0, []))

    init(path: String, controlPort: Int) {
        self.path = path
        self.controlPort = controlPort
    }

    /// Every record so far, in the order accepted.
    func refresh() throws -> [DeliveryRecord] {
        let flushed = try LoopbackHTTP.request(port: controlPort, "POST", "/flush")
        guard flushed.status == 200 else { throw FleetError("POST /flush: \(flushed.status) \(flushed.text)") }
        return try state.withLock { state in
            guard let handle = FileHandle(forReadingAtPath: path) else { throw FleetError("cannot open \(path)") }
            defer { try? handle.close() }
            try handle.seek(toOffset: state.offset)
            let data = handle.readDataToEndOfFile()
            guard let lastNewline = data.lastIndex(of: 0x0A) else { return state.records }
            let decoder = JSONDecoder()
            for line in data[data.startIndex...lastNewline].split(separator: 0x0A) {
                state.records.append(try decoder.decode(DeliveryRecord.self, from: Data(line)))
            }
            state.offset += UInt64(lastNewline - data.startIndex + 1)
            return state.records
        }
    }
}
