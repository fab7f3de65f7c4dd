import APNsSimulator
import FanoutCrypto
import Foundation
import Synchronization
import Testing
@testable import FanoutCLI

/// `fanout channels` against the in-process APNs simulator (HTTP/2+TLS on loopback), which answers
/// channel management as live APNs does: what the user reads on stdout and stderr, and the exit status.
@Suite struct ChannelsCommandTests {
    static let app = "com.example.sports"
    static let neverCreated = "AAAAAAAAAAAAAAAAAAAAAA=="

    /// A simulator with a throwaway key written as a `.p8`, and the arguments that point the command at it.
    final class Setup: Sendable {
        let simulator: APNsSimulator
        let directory: String
        let common: [String]

        init(broadcastApps: [String]? = nil) throws {
            // A key id of its own: the command signs through the process-wide provider-token cache,
            // which knows a key by team and key id, as Apple does.
            let keyID = "CLI" + String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(7))
            let credentials = try SimulatorCredentials.generate(keyID: keyID)
            var configuration = APNsSimulatorConfiguration(teamID: credentials.teamID, keys: [credentials.keyID: try credentials.publicKeyPEM()],
                                                           apps: [ChannelsCommandTests.app])
            configuration.threads = 1
            configuration.broadcastApps = broadcastApps
            simulator = try APNsSimulator(configuration: configuration)
            try simulator.start()
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("channels-cli-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let keyFile = directory + "/AuthKey_\(credentials.keyID).p8"
            try credentials.privateKey.pemPKCS8().write(toFile: keyFile, atomically: true, encoding: .utf8)
            common = ["--app", ChannelsCommandTests.app, "--key-file", keyFile, "--key-id", credentials.keyID, "--team-id", credentials.teamID,
                      "--base-url", simulator.managementURL, "--ca-file", simulator.caCertificatePath, "--timeout", "10"]
        }

        deinit {
            simulator.stop()
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// `fanout channels <action> …` as a user runs it: exit status, stdout and stderr.
        func channels(_ action: String, _ extra: String...) async throws -> (status: Int32, out: String, err: String) {
            try await channels(action, extra)
        }

        func channels(_ action: String, _ extra: [String]) async throws -> (status: Int32, out: String, err: String) {
            let out = Mutex(""), err = Mutex("")
            let console = ChannelsCommand.Console(out: { line in out.withLock { $0 += line + "\n" } },
                                                  err: { line in err.withLock { $0 += line + "\n" } })
            let status = try await ChannelsCommand.run([action] + common + extra, console: console)
            return (status, out.withLock { $0 }, err.withLock { $0 })
        }

        func create() async throws -> String {
            let created = try await channels("create", "--storage", "none")
            #expect(created.status == 0, "\(created.err)")
            let id = created.out.split(separator: " ").dropFirst(2).first.map(String.init)
            return try #require(id, "no channel id in '\(created.out)'")
        }
    }

    @Test func readOfADeletedOrNeverCreatedChannelSaysItDoesNotExist() async throws {
        let setup = try Setup()
        let id = try await setup.create()
        let read = try await setup.channels("read", "--channel", id)
        #expect(read.status == 0, "\(read.err)")
        #expect(read.out.contains("storage:  none"))
        #expect(try await setup.channels("delete", "--channel", id).status == 0)

        for channel in [id, Self.neverCreated] {
            let missing = try await setup.channels("read", "--channel", channel)
            #expect(missing.status == 2)
            #expect(missing.out.isEmpty)
            #expect(missing.err == "fanout channels read: channel \(channel) does not exist (or was deleted) for app \(Self.app): APNs answered 404 BadPath\n")
            #expect(!missing.err.contains("configuration"))
        }
        #expect(setup.simulator.stats().count(status: 404, reason: .badPath) == 2, "both answers came from the simulator")
    }

    @Test func aSecondDeleteOfTheSameChannelIsAlreadyGone() async throws {
        let setup = try Setup()
        let id = try await setup.create()
        let first = try await setup.channels("delete", "--channel", id)
        #expect(first.status == 0)
        #expect(first.out == "deleted channel \(id) (app \(Self.app))\n")

        for channel in [id, Self.neverCreated] {
            let again = try await setup.channels("delete", "--channel", channel)
            #expect(again.status == 0, "\(again.err)")
            #expect(again.err.isEmpty)
            #expect(again.out == "channel \(channel) is already gone (app \(Self.app)): APNs answered 404 BadPath, "
                    + "so it was deleted before or never created; nothing to delete\n")
        }
        #expect(setup.simulator.stats().count(status: 404, reason: .badPath) == 2)
        #expect(try await setup.channels("list").out == "no channels for \(Self.app)\n")
    }

    /// Live APNs's BroadcastFeatureNotEnabled (the simulator's answer for an app configured without the
    /// capability) and Apple's table's FeatureNotEnabled both get the hint that names the capability.
    @Test func anAppWithoutTheBroadcastCapabilityIsToldHowToEnableIt() async throws {
        let setup = try Setup(broadcastApps: [])
        let hint = "The App ID \(Self.app) does not have the broadcast capability. Enable it in your Apple Developer account: "
            + "Certificates, Identifiers & Profiles → Identifiers → \(Self.app) → Push Notifications → Broadcast "
            + "(it cannot be enabled from Xcode), then retry.\n"
        for (action, extra) in [("create", ["--storage", "none"]), ("list", []), ("delete", ["--channel", Self.neverCreated])] {
            let refused = try await setup.channels(action, extra)
            #expect(refused.status == 1, "\(action)")
            #expect(refused.out.isEmpty, "\(action)")
            #expect(refused.err == "fanout channels \(action): APNs rejected the request: 400 BroadcastFeatureNotEnabled\n" + hint, "\(action)")
        }
        #expect(setup.simulator.stats().count(status: 400, reason: .broadcastFeatureNotEnabled) == 3)

        let apple = try Setup()
        try apple.simulator.setFaults(APNsSimulatorFaults(injectedAnswer: .init(status: 400, reason: "FeatureNotEnabled"), scope: .channelManagement))
        let refused = try await apple.channels("list")
        #expect(refused.status == 1)
        #expect(refused.err == "fanout channels list: APNs rejected the request: 400 FeatureNotEnabled\n" + hint)
    }

    /// A reason no table lists halts the command and reaches the user word for word, on a delete too
    /// (never taken for "already gone"); a 404 BadPath on a request naming no channel is not a missing channel.
    @Test func anUnknownReasonHaltsAndIsReported() async throws {
        let setup = try Setup()
        try setup.simulator.setFaults(APNsSimulatorFaults(injectedAnswer: .init(status: 400, reason: "ChannelQuotaFrozen"), scope: .channelManagement))
        for (action, extra) in [("delete", ["--channel", Self.neverCreated]), ("create", ["--storage", "most-recent"])] {
            let refused = try await setup.channels(action, extra)
            #expect(refused.status == 1, "\(action)")
            #expect(refused.out.isEmpty, "\(action): \(refused.out)")
            #expect(refused.err == "fanout channels \(action): APNs rejected the request: 400 ChannelQuotaFrozen\n"
                    + "'ChannelQuotaFrozen' is a reason this version of Fanout does not know: treat the request as failed.\n", "\(action)")
        }
        try setup.simulator.setFaults(APNsSimulatorFaults(injectedAnswer: .init(status: 404, reason: "BadPath"), scope: .channelManagement))
        let list = try await setup.channels("list")
        #expect(list.status == 1)
        #expect(list.err.hasPrefix("fanout channels list: APNs rejected the request: 404 BadPath\n"))
        #expect(!list.err.contains("does not exist"))
    }
}
