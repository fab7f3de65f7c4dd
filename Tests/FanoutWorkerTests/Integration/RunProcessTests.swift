import FanoutTestSupport
import FanoutWorker
import Foundation
import Synchronization
import Testing

extension WorkerIntegration {
    /// `fanout run` as a process, the way an orchestrator stops it: SIGTERM.
    @Suite struct RunProcess {
        /// The `fanout` binary built beside the test bundle (`swift build --build-tests` builds both).
        static let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("fanout").path

        /// SIGTERM while the worker is still joining its group (before any assignment): exit 0,
        /// promptly, having left the group. librdkafka 2.0.2 aborted here (exit 134) before the close fix.
        @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: binary)))
        func sigtermWhileJoiningExitsZero() async throws {
            let harness = try IntegrationHarness(partitions: 2)
            let configuration = harness.configuration()
            let app = configuration.apps[0]
            let config = """
            {"kafka": {"bootstrap_servers": "\(configuration.kafka.bootstrapServers)", "group_id": "\(configuration.kafka.groupID)",
                       "properties": {"session.timeout.ms": "6000", "max.poll.interval.ms": "7000", "heartbeat.interval.ms": "500"}},
             "apps": [{"bundle_id": "\(app.bundleID)", "team_id": "\(app.teamID)", "key_id": "\(app.keyID)", "key_path": "\(app.keyPath)"}],
             "apns": {"base_url": "\(configuration.apns.baseURL!)", "ca_file": "\(configuration.apns.caFile!)"},
             "admin": {"port": 0}, "shutdown_timeout": "5s", "log_level": "debug"}
            """
            let path = harness.scratch + "/run.json"
            try config.write(toFile: path, atomically: true, encoding: .utf8)
            let child = try ChildProcess(Self.binary, ["run", "--config", path], error: .pipe)
            let log = Mutex("")
            Thread.detachNewThread {
                while true {
                    let chunk = child.standardError!.availableData
                    if chunk.isEmpty { break }
                    log.withLock { $0 += String(decoding: chunk, as: UTF8.self) }
                }
            }
            try await harness.eventually("the worker started and is joining its group", timeout: .seconds(20)) {
                log.withLock { $0.contains("worker started") }
            }
            child.signal(SIGTERM)
            let signalled = ContinuousClock.now
            // The mock cluster completes a first join only after a delay: the signal lands before it.
            let joining = !log.withLock { $0.contains("partitions assigned") }
            let status = try await blocking { child.waitUntilExit() }
            let took = ContinuousClock.now - signalled
            print("measured: SIGTERM \(joining ? "while joining" : "just after the first assignment") → exit \(status) after \(took)")
            #expect(status == 0, "exit status \(status); log tail: \(log.withLock { String($0.suffix(2000)) })")
            #expect(log.withLock { $0.contains("worker stopped") })
        }
    }
}
