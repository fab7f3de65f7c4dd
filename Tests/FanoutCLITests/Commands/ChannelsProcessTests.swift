import FanoutTestSupport
import Foundation
import Synchronization
import Testing

/// `fanout apns-sim` and `fanout channels` as processes, as a user runs them from a shell.
@Suite struct ChannelsProcessTests {
    /// The `fanout` binary built beside the test bundle (`swift build --build-tests` builds both).
    static let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("fanout").path

    /// `--no-broadcast` takes the capability from one app: `fanout channels` for it exits 1 with the
    /// hint, for the other app it creates a channel, deletes it, and a second delete exits 0 as
    /// already gone.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: binary)))
    func anAppStartedWithoutBroadcastGetsTheHintAndTheOtherManagesChannels() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-sim-cli-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let simulator = try ChildProcess(Self.binary, ["apns-sim", "--app", "com.example.exports", "--app", "com.example.sports",
                                                       "--no-broadcast", "com.example.exports", "--generate-test-key", directory,
                                                       "--threads", "1"], output: .pipe)
        defer {
            simulator.signal(SIGTERM)
            _ = simulator.waitUntilExit()
        }
        let printed = Mutex("")
        let ready = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var signalled = false
            while true {
                let chunk = simulator.standardOutput!.availableData
                if chunk.isEmpty { break }
                let text = printed.withLock { $0 += String(decoding: chunk, as: UTF8.self); return $0 }
                if !signalled, text.contains("provider-token-file:") { signalled = true; ready.signal() }
            }
            if !signalled { ready.signal() }
        }
        #expect(ready.wait(timeout: .now() + 20) == .success)
        let lines = printed.withLock { $0 }
        func value(_ name: String) throws -> String {
            let line = try #require(lines.split(separator: "\n").first { $0.hasPrefix("  \(name): ") }, "no \(name) in: \(lines)")
            return String(line.dropFirst(name.count + 4))
        }
        let common = ["--key-file", try value("private-key-file"), "--key-id", try value("key-id"), "--team-id", try value("team-id"),
                      "--base-url", try value("management-url"), "--ca-file", try value("ca-file")]

        let refused = try await ChildProcess.run(Self.binary, ["channels", "create", "--app", "com.example.exports", "--storage", "none"] + common)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("fanout channels create: APNs rejected the request: 400 BroadcastFeatureNotEnabled\n"), "\(refused.stderr)")
        #expect(refused.stderr.contains("The App ID com.example.exports does not have the broadcast capability."), "\(refused.stderr)")

        let created = try await ChildProcess.run(Self.binary, ["channels", "create", "--app", "com.example.sports", "--storage", "none"] + common)
        #expect(created.status == 0, "\(created.stderr)")
        let id = try #require(created.stdout.split(separator: " ").dropFirst(2).first.map(String.init), "\(created.stdout)")
        let delete = ["channels", "delete", "--app", "com.example.sports", "--channel", id] + common
        let deleted = try await ChildProcess.run(Self.binary, delete)
        #expect(deleted.status == 0)
        #expect(deleted.stdout == "deleted channel \(id) (app com.example.sports)\n")
        let again = try await ChildProcess.run(Self.binary, delete)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.hasPrefix("channel \(id) is already gone (app com.example.sports): APNs answered 404 BadPath"))
        let read = try await ChildProcess.run(Self.binary, ["channels", "read", "--app", "com.example.sports", "--channel", id] + common)
        #expect(read.status == 2)
        #expect(read.stderr.contains("channel \(id) does not exist (or was deleted)"))

        let stranger = try await ChildProcess.run(Self.binary, ["apns-sim", "--app", "com.example.a", "--no-broadcast", "com.example.b",
                                                                "--generate-test-key", directory])
        #expect(stranger.status == 64)
        #expect(stranger.stderr.contains("--no-broadcast com.example.b is not one of the --app bundle ids"))
    }
}
