import APNsModel
import FanoutAPNs
import FanoutCrypto
import Foundation

/// `fanout channels create|read|delete|list`: manage iOS 18 broadcast channels on APNs.
struct ChannelsCommand: Command {
    static let name = "channels"
    static let summary = "Create, read, delete and list broadcast channels (iOS 18) on APNs"
    static let help = """
    Usage: fanout channels <create|read|delete|list> --app BUNDLE_ID --key-file AuthKey_XXXX.p8 --key-id KID --team-id TEAM
                           [--environment production|sandbox | --base-url https://HOST:PORT [--ca-file CA.pem]]
                           [--channel CHANNEL_ID] [--storage none|most-recent]

      create   --storage none|most-recent   Create a channel (none = no message stored, allows a higher publishing
                                            budget, sends must use apns-expiration 0; most-recent = keep the latest
                                            message up to 8 h). Prints the new channel id.
      read     --channel ID                 Show a channel's storage policy and push type.
      delete   --channel ID                 Delete a channel (irreversible: the id can never be reused).
      list                                  List every channel id of the app.

    Options:
      --app            Bundle id of the app (without .push-type.liveactivity).
      --key-file       The .p8 token-auth key from developer.apple.com.
      --key-id         Its 10-character Key ID.   --team-id   Your 10-character Team ID.
      --environment    production (api-manage-broadcast.push.apple.com:2196) or sandbox (…sandbox…:2195); default sandbox.
      --base-url       Another management endpoint, e.g. the simulator's management port; --ca-file trusts its CA.
      --timeout        Seconds per request (default 30).

    A delete of a channel that is already gone (deleted before, or never created) succeeds, so a script
    that deletes can be run again. Exit status: 0 done; 1 APNs refused the request or could not be
    reached; 2 read: the channel does not exist (or was deleted); 64 bad arguments; 78 unusable key file.
    """

    /// Exit status of a read of a channel that does not exist.
    static let noSuchChannelStatus: Int32 = 2

    static func run(_ arguments: [String]) async throws -> Int32 {
        try await run(arguments, console: .standard)
    }

    /// Where the command writes: the process's stdout and stderr, or a test's capture.
    struct Console: Sendable {
        var out: @Sendable (String) -> Void
        var err: @Sendable (String) -> Void

        static let standard = Console(out: { Output.out($0) }, err: { Output.err($0) })
    }

    static func run(_ arguments: [String], console: Console) async throws -> Int32 {
        var args = Arguments(arguments)
        guard let action = args.positional() else { throw UsageError("say what to do: create, read, delete or list") }
        guard ["create", "read", "delete", "list"].contains(action) else {
            throw UsageError("unknown action '\(action)'; use create, read, delete or list")
        }
        guard let app = try args.option("app") else { throw UsageError("--app BUNDLE_ID is required") }
        guard let keyFile = try args.option("key-file") else { throw UsageError("--key-file is required (the .p8 key)") }
        guard let keyID = try args.option("key-id") else { throw UsageError("--key-id is required") }
        guard let teamID = try args.option("team-id") else { throw UsageError("--team-id is required") }
        let environmentName = try args.option("environment")
        let baseURL = try args.option("base-url")
        let caFile = try args.option("ca-file")
        let channel = try args.option("channel")
        let storage = try args.option("storage")
        let timeout = try args.int("timeout") ?? 30
        try args.finish()

        guard APNsRequestValidation.isBundleID(app) else {
            throw UsageError("--app '\(app)' is not a bundle id (no .push-type.liveactivity suffix)")
        }
        guard timeout > 0 else { throw UsageError("--timeout must be positive") }
        let endpoint: APNsClientConfiguration.Endpoint
        if let baseURL {
            guard environmentName == nil else { throw UsageError("use either --environment or --base-url, not both") }
            endpoint = .custom(baseURL: baseURL, caFile: caFile)
        } else {
            guard caFile == nil else { throw UsageError("--ca-file only goes with --base-url") }
            guard let environment = APNsEnvironment(rawValue: environmentName ?? "sandbox") else {
                throw UsageError("--environment must be production or sandbox, got '\(environmentName ?? "")'")
            }
            endpoint = .appleChannelManagement(environment)
        }
        let credentials: APNsCredentials
        do {
            credentials = try APNsCredentials(teamID: teamID, keyID: keyID, keyFile: keyFile)
        } catch {
            console.err("fanout channels: \(error)")
            return 78 // EX_CONFIG
        }
        let client = try APNsChannelClient(configuration: APNsClientConfiguration(
            endpoint: endpoint, credentials: [app: credentials], connections: 1, maxConcurrentStreamsPerConnection: 1,
            maxInFlight: 1, maxQueued: 1, requestTimeout: .seconds(timeout)))

        let status = await perform(action, app: app, channel: channel, storage: storage, client: client, console: console)
        await client.shutdown(deadline: .now + .seconds(5))
        return try status.get()
    }

    /// One channel request and what the user reads about it; usage errors come back as failures.
    private static func perform(_ action: String, app: String, channel: String?, storage: String?,
                                client: APNsChannelClient, console: Console) async -> Result<Int32, UsageError> {
        do {
            switch action {
            case "create":
                guard channel == nil else { throw UsageError("create takes no --channel (APNs chooses the id)") }
                let policy: APNsChannelClient.StoragePolicy
                switch storage {
                case "none": policy = .noMessageStored
                case "most-recent": policy = .mostRecentMessageStored
                default: throw UsageError("create needs --storage none or --storage most-recent")
                }
                let id = try await client.create(bundleID: app, storagePolicy: policy)
                console.out("created channel \(id) (app \(app), storage \(storage!))")
            case "read":
                guard let channel else { throw UsageError("read needs --channel ID") }
                let info = try await client.read(bundleID: app, channelID: channel)
                let policy = switch info.storagePolicy {
                case .noMessageStored: "none (no message stored; send with apns-expiration 0)"
                case .mostRecentMessageStored: "most-recent (latest message kept up to 8 h)"
                case nil: "unknown"
                }
                console.out("channel \(channel)\n  app:      \(app)\n  storage:  \(policy)\n  push type: \(info.pushType ?? "unknown")")
            case "delete":
                guard let channel else { throw UsageError("delete needs --channel ID") }
                switch try await client.delete(bundleID: app, channelID: channel) {
                case .deleted:
                    console.out("deleted channel \(channel) (app \(app))")
                case .alreadyGone(let result):
                    console.out("channel \(channel) is already gone (app \(app)): APNs answered \(answer(result)), "
                                + "so it was deleted before or never created; nothing to delete")
                }
            default:
                let channels = try await client.list(bundleID: app)
                console.out(channels.isEmpty ? "no channels for \(app)" : "\(channels.count) channel(s) for \(app):")
                for id in channels { console.out("  \(id)") }
            }
        } catch let error as UsageError {
            return .failure(error)
        } catch let error as APNsChannelError {
            return .success(report(error, action: action, app: app, console: console))
        } catch {
            console.err("fanout channels \(action): \(error)")
            return .success(1)
        }
        return .success(0)
    }

    /// What a failed request means for the user, and the exit status. Every reason reaches the user.
    private static func report(_ error: APNsChannelError, action: String, app: String, console: Console) -> Int32 {
        switch error {
        case .noSuchChannel(let channelID, let result):
            console.err("fanout channels \(action): channel \(channelID) does not exist (or was deleted) for app \(app): "
                        + "APNs answered \(answer(result))")
            return noSuchChannelStatus
        case .rejected(let result):
            console.err("fanout channels \(action): \(error)")
            if ChannelManagementAnswer(result, namesChannel: false) == .broadcastCapabilityMissing {
                console.err("The App ID \(app) does not have the broadcast capability. Enable it in your Apple Developer account: "
                            + "Certificates, Identifiers & Profiles → Identifiers → \(app) → Push Notifications → Broadcast "
                            + "(it cannot be enabled from Xcode), then retry.")
                return 1
            }
            if case .unknown(let reason)? = result.reason {
                console.err("'\(reason)' is a reason this version of Fanout does not know: treat the request as failed.")
                return 1
            }
            switch result.outcome {
            case .configError: console.err("This is a configuration problem (key, team, app or environment): fix it before retrying.")
            case .retry: console.err("APNs is temporarily unavailable: try again later.")
            default: break
            }
            return 1
        case .transport, .malformedResponse, .badArgument:
            console.err("fanout channels \(action): \(error)")
            return 1
        }
    }

    /// "404 BadPath", as APNs answered.
    private static func answer(_ result: APNsResult) -> String {
        "\(result.status.map(String.init) ?? "-") \(result.reason?.rawValue ?? "(no reason)")"
    }
}
