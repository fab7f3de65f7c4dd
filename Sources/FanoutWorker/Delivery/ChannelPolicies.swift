import FanoutCore
import Synchronization

/// The message-storage policy of each broadcast channel, which decides `apns-expiration` on the
/// broadcast lane (`ChannelStoragePolicy.expiration`): a No-Storage channel accepts only 0, a
/// Most-Recent channel stores the message until the expiration (at most 8 hours). The engine asks
/// (`.lookUpChannelPolicy`) before a channel's first send and waits for the answer.
///
/// Where the policy comes from, in order: the app's configured `broadcast_channels` map; a cached
/// answer of the channel-management API (read channel); else unknown, which sends expiration 0 —
/// valid on every channel, it only means nothing is stored for offline devices.
///
/// Threading: thread-safe; every state change is behind one `Mutex`. A lookup never blocks the
/// caller: `resolve` answers at once from configuration or cache, or starts (or joins) a lookup
/// and calls back when it finishes (on the management client's completion, never under the lock).
///
/// Bounds: at most `capacity` cached channels (oldest forgotten first), at most
/// `maxConcurrentLookups` lookups at once (beyond it the send goes out with expiration 0 and a
/// later send looks up), a failed lookup is not repeated for `retryAfter`, and each lookup is
/// bounded by the management client's request timeout.
final class ChannelPolicies: Sendable {
    typealias Policy = ChannelStoragePolicy

    /// What `resolve` could tell at once.
    enum Resolution: Sendable, Equatable {
        /// Known (or known to be unknown, nil): send now.
        case ready(Policy?)
        /// A lookup runs; the completion gets the answer (nil when the lookup failed).
        case deferred
    }

    /// Reads one channel's policy from APNs: nil when the channel does not exist or APNs gave no
    /// policy; throws when the lookup failed (transport, configuration).
    typealias Reader = @Sendable (_ app: String, _ channel: String) async throws -> Policy?

    struct Key: Hashable, Sendable {
        var app: String
        var channel: String
    }

    private enum Entry: Sendable {
        case known(Policy)
        /// The lookup failed or found nothing; ask again after `until` (UNIX ns).
        case unknown(until: Nanoseconds)
    }

    private struct State: Sendable {
        var cache: [Key: Entry] = [:]
        /// Insertion order of `cache`, for eviction.
        var order: [Key] = []
        var orderStart = 0
        var waiters: [Key: [@Sendable (Policy?) -> Void]] = [:]
        var lookups = 0
        var lookupsDone = 0
    }

    static let defaultCapacity = 20_000
    static let defaultMaxConcurrentLookups = 4
    static let defaultRetryAfter: Nanoseconds = .seconds(60)

    private let configured: [Key: Policy]
    private let reader: Reader?
    private let clock: WorkerClock
    private let capacity: Int
    private let maxConcurrentLookups: Int
    private let retryAfter: Nanoseconds
    private let state = Mutex(State())

    /// `reader` nil: no lookups (no management endpoint); unconfigured channels are sent with expiration 0.
    init(configured: [Key: Policy], reader: Reader?, clock: WorkerClock, capacity: Int = ChannelPolicies.defaultCapacity,
         maxConcurrentLookups: Int = ChannelPolicies.defaultMaxConcurrentLookups, retryAfter: Nanoseconds = ChannelPolicies.defaultRetryAfter) {
        self.configured = configured
        self.reader = reader
        self.clock = clock
        self.capacity = max(1, capacity)
        self.maxConcurrentLookups = max(1, maxConcurrentLookups)
        self.retryAfter = retryAfter
    }

    var lookupsEnabled: Bool { reader != nil }

    /// Lookups finished so far (for tests and metrics).
    var lookupsCompleted: Int { state.withLock { $0.lookupsDone } }

    /// The channel's policy now, or `.deferred` and `completion` later. `completion` is called only
    /// when `.deferred` is returned.
    func resolve(app: String, channel: String, completion: @escaping @Sendable (Policy?) -> Void) -> Resolution {
        let key = Key(app: app, channel: channel)
        if let policy = configured[key] { return .ready(policy) }
        guard let reader else { return .ready(nil) }
        let now = clock.now()
        enum Step { case answer(Policy?), wait, lookUp }
        let step: Step = state.withLock { state in
            switch state.cache[key] {
            case .known(let policy)?: return .answer(policy)
            case .unknown(let until)? where now < until: return .answer(nil)
            default: break
            }
            if state.waiters[key] != nil {
                state.waiters[key]!.append(completion)
                return .wait
            }
            guard state.lookups < maxConcurrentLookups else { return .answer(nil) }
            state.lookups += 1
            state.waiters[key] = [completion]
            return .lookUp
        }
        switch step {
        case .answer(let policy): return .ready(policy)
        case .wait: return .deferred
        case .lookUp:
            Task { await self.lookUp(key, reader: reader) }
            return .deferred
        }
    }

    /// Forgets what is known about a channel (APNs said it is not registered).
    func forget(app: String, channel: String) {
        let key = Key(app: app, channel: channel)
        // Kept as an expired entry, so the eviction order holds each key once.
        state.withLock { state in
            if state.cache[key] != nil { state.cache[key] = .unknown(until: 0) }
        }
    }

    private func lookUp(_ key: Key, reader: Reader) async {
        let policy: Policy?
        let entry: Entry
        do {
            policy = try await reader(key.app, key.channel)
            entry = policy.map { .known($0) } ?? .unknown(until: clock.now() + retryAfter)
        } catch {
            policy = nil
            entry = .unknown(until: clock.now() + retryAfter)
        }
        let waiters = state.withLock { state -> [@Sendable (Policy?) -> Void] in
            state.lookups -= 1
            state.lookupsDone += 1
            insert(key, entry, into: &state)
            return state.waiters.removeValue(forKey: key) ?? []
        }
        for waiter in waiters { waiter(policy) }
    }

    private func insert(_ key: Key, _ entry: Entry, into state: inout State) {
        if state.cache.updateValue(entry, forKey: key) == nil { state.order.append(key) }
        while state.cache.count > capacity, state.orderStart < state.order.count {
            let oldest = state.order[state.orderStart]
            state.orderStart += 1
            state.cache[oldest] = nil
        }
        if state.orderStart > 1024, state.orderStart * 2 > state.order.count {
            state.order.removeFirst(state.orderStart)
            state.orderStart = 0
        }
    }
}
