import APNsModel
import FanoutAPNs
import FanoutCore
import Foundation
import Synchronization

/// The two delivery lanes (docs/design.md §7): separate `APNsClient`s for per-activity pushes and
/// broadcasts, so a flood or an outage in one never delays the other. The activity lane has a client
/// for each APNs environment, since any token registration may name either (a development build's
/// token is sandbox even when the app is configured for production, and Apple answers BadDeviceToken
/// to a token sent to the other environment); the broadcast lane one per environment its apps use.
/// One environment per lane when a custom base URL such as the simulator is set. And each of those
/// per signing key (team + key id): APNs refuses a second key on a connection (403
/// UnrelatedKeyIdInToken), so apps signed by different keys never share connections. Clients connect
/// on first use. All clients share one `ProviderTokenCache`: one JWT per key in the process.
final class APNsLanes: Sendable {
    private let clients: [ClientKey: APNsClient]
    private let custom: Bool
    /// Channel-management clients per environment and signing key, for storage-policy lookups (none without an endpoint).
    private let management: [ManagementKey: APNsChannelClient]

    struct ManagementKey: Hashable, Sendable {
        var environment: APNsModel.APNsEnvironment
        var signer: String
    }
    /// The broadcast lane's storage policy per channel (configured, else looked up and cached).
    let channelPolicies: ChannelPolicies
    private let credentials: [String: APNsCredentials]
    private let tokenCache: ProviderTokenCache
    /// Last JWT generation seen per app (for `fanout_jwt_refreshes_total`).
    private let jwtGenerations = Mutex<[String: Int]>([:])
    /// Per lane and counter: the clients' running totals as `sinceLastCall` last saw them.
    private let clientCountersSeen = Mutex<[ClientCounterKey: Int]>([:])

    /// The clients' running totals the worker turns into metric increments.
    enum ClientCounter: Hashable, Sendable {
        /// End reports that matched no request (`APNsClient.Stats.unmatchedEnds`).
        case unmatchedEnds
        /// Connection failures that backed a connection off (`APNsClient.Stats.connectionBackoffs`).
        case connectionBackoffs
    }

    private struct ClientCounterKey: Hashable, Sendable {
        var lane: Lane
        var counter: ClientCounter
    }

    struct ClientKey: Hashable, Sendable {
        var lane: Lane
        var environment: APNsModel.APNsEnvironment
        /// "team/keyID" of the apps the client signs for.
        var signer: String
    }

    /// Per app, the clients `client(lane:app:environment:)` chooses from: one lookup per send.
    private let clientsOfApp: [String: AppClients]

    private struct AppClients: Sendable {
        /// By `index(lane:environment:)`; nil where no client serves that lane and environment.
        var clients: [APNsClient?]
        var environment: APNsModel.APNsEnvironment

        static func index(lane: Lane, environment: APNsModel.APNsEnvironment) -> Int {
            (lane == .activity ? 0 : 2) + (environment == .production ? 0 : 1)
        }
    }

    /// `gate` guards every push client (not channel management): the send lease (`SendGate`).
    init(settings: WorkerSettings, credentials: [String: APNsCredentials], tokenCache: ProviderTokenCache,
         options: WorkerOptions, gate: (any WriteGate)? = nil) throws {
        custom = settings.usesCustomEndpoint(options: options)
        self.credentials = credentials
        self.tokenCache = tokenCache
        var environments: [String: APNsModel.APNsEnvironment] = [:]
        for app in settings.configuration.apps {
            environments[app.bundleID] = app.environment == .sandbox ? .sandbox : .production
        }
        let used: Set<APNsModel.APNsEnvironment> = custom ? [.production] : Set(environments.values)
        var signerOfApp: [String: String] = [:]
        var bySigner: [String: [String: APNsCredentials]] = [:]
        for (app, credential) in credentials {
            let signer = "\(credential.teamID)/\(credential.keyID)"
            signerOfApp[app] = signer
            bySigner[signer, default: [:]][app] = credential
        }
        var clients: [ClientKey: APNsClient] = [:]
        for lane in Lane.allCases {
            for environment in lane == .activity && !custom ? [.production, .sandbox] : used {
                for (signer, group) in bySigner {
                    var configuration = settings.apnsClientConfiguration(lane: lane, environment: environment, credentials: group,
                                                                         tokenCache: tokenCache, options: options)
                    configuration.writeGate = gate
                    clients[ClientKey(lane: lane, environment: environment, signer: signer)] = try APNsClient(configuration: configuration)
                }
            }
        }
        self.clients = clients
        var clientsOfApp: [String: AppClients] = [:]
        for (app, signer) in signerOfApp {
            var table = AppClients(clients: Array(repeating: nil, count: 4), environment: environments[app] ?? .production)
            for lane in Lane.allCases {
                for environment in APNsModel.APNsEnvironment.allCases {
                    table.clients[AppClients.index(lane: lane, environment: environment)] =
                        clients[ClientKey(lane: lane, environment: environment, signer: signer)]
                }
            }
            clientsOfApp[app] = table
        }
        self.clientsOfApp = clientsOfApp
        var management: [ManagementKey: APNsChannelClient] = [:]
        for environment in used {
            for (signer, group) in bySigner {
                if let configuration = settings.channelManagementConfiguration(environment: environment, credentials: group,
                                                                               tokenCache: tokenCache, options: options) {
                    management[ManagementKey(environment: environment, signer: signer)] = try APNsChannelClient(configuration: configuration)
                }
            }
        }
        self.management = management
        let reader: ChannelPolicies.Reader?
        if management.isEmpty {
            reader = nil
        } else {
            let isCustom = custom
            reader = { [management, environments, signerOfApp] app, channel in
                let environment: APNsModel.APNsEnvironment = isCustom ? .production : environments[app] ?? .production
                guard let signer = signerOfApp[app], let client = management[ManagementKey(environment: environment, signer: signer)] else { return nil }
                return try await Self.readPolicy(client: client, app: app, channel: channel)
            }
        }
        channelPolicies = ChannelPolicies(configured: settings.configuredChannelPolicies, reader: reader, clock: options.clock)
    }

    /// One read-channel call: the policy, nil when the channel does not exist (or APNs named none).
    private static func readPolicy(client: APNsChannelClient, app: String, channel: String) async throws -> ChannelPolicies.Policy? {
        do {
            let info = try await client.read(bundleID: app, channelID: channel)
            switch info.storagePolicy {
            case .noMessageStored?: return .noStorage
            case .mostRecentMessageStored?: return .mostRecent
            case nil: return nil
            }
        } catch APNsChannelError.noSuchChannel {
            return nil
        }
    }

    /// Every push client (the ones `gate` guards).
    var pushClients: [APNsClient] { Array(clients.values) }

    /// The client for a send: the token registration's environment when known (never another one:
    /// Apple rejects a token sent to the wrong environment as BadDeviceToken, which would drop a good
    /// token), else the app's.
    func client(lane: Lane, app: String, environment: APNsModel.APNsEnvironment?) -> APNsClient? {
        guard let table = clientsOfApp[app] else { return nil }
        let chosen: APNsModel.APNsEnvironment = custom ? .production : environment ?? table.environment
        return table.clients[AppClients.index(lane: lane, environment: chosen)]
    }

    /// How much the lane's clients' `counter` grew since the last call (`current` is its total now).
    func sinceLastCall(_ counter: ClientCounter, lane: Lane, current: Int) -> Int {
        let key = ClientCounterKey(lane: lane, counter: counter)
        return clientCountersSeen.withLock { seen in
            defer { seen[key] = max(seen[key] ?? 0, current) }
            return max(0, current - (seen[key] ?? 0))
        }
    }

    /// JWTs minted per app since the last call, from the shared cache's generation counter (each
    /// mint increases it). Reading the current token mints one only when it is due anyway. An app
    /// whose key cannot sign is skipped here: its sends report that error.
    func jwtMintsSinceLastCall() -> [String: Int] {
        var current: [String: Int] = [:]
        for (app, credentials) in credentials {
            guard let token = try? tokenCache.token(for: credentials) else { continue }
            current[app] = token.generation
        }
        return jwtGenerations.withLock { seen in
            var minted: [String: Int] = [:]
            for (app, generation) in current {
                minted[app] = max(0, generation - (seen[app] ?? 0))
                seen[app] = generation
            }
            return minted
        }
    }

    /// Sums over the lane's clients.
    func stats(lane: Lane) -> (inFlight: Int, queued: Int, connections: Int, completed: Int, unmatchedEnds: Int, connectionBackoffs: Int) {
        var total = (inFlight: 0, queued: 0, connections: 0, completed: 0, unmatchedEnds: 0, connectionBackoffs: 0)
        for (key, client) in clients where key.lane == lane {
            let s = client.stats
            total.inFlight += s.inFlight
            total.queued += s.queued
            total.connections += s.connections
            total.completed += s.completed
            total.unmatchedEnds += s.unmatchedEnds
            total.connectionBackoffs += s.connectionBackoffs
        }
        return total
    }

    /// Stops every client: queued and in-flight requests complete (or fail as retryable) by `deadline`.
    func shutdown(deadline: ContinuousClock.Instant) async {
        await withTaskGroup(of: Void.self) { group in
            for client in clients.values {
                group.addTask { await client.shutdown(deadline: deadline) }
            }
            for client in management.values {
                group.addTask { await client.shutdown(deadline: deadline) }
            }
        }
    }

    /// The APNs request for an engine send. Throws when the request cannot be built (the payload is
    /// too large, the token is not hex): the engine dead-letters it as rejected. `apns-expiration` is
    /// the engine's: a device push's stale date, a broadcast's from the channel's storage policy.
    static func request(for send: SendRequest) throws(APNsRequestError) -> APNsRequest {
        var payload = send.event.livePayload(defaultStaleAfter: nil)
        payload.staleDate = send.staleDate
        payload.dismissalDate = send.dismissalDate
        let bytes = payload.encoded()
        let priority: APNsPriority = send.priority >= 10 ? .immediate : .conserve
        switch send.destination {
        case .activityToken(let token), .pushToStartToken(let token):
            // The hex is made here, written into the path; the engine holds the token's bytes.
            return try .liveActivity(token: token, bundleID: send.app, payload: bytes, priority: priority,
                                     expiration: send.expiration)
        case .channel(let channel):
            return try .broadcast(channelID: channel, bundleID: send.app, payload: bytes, priority: priority,
                                  expiration: send.expiration)
        }
    }
}
