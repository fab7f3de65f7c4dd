@testable import FanoutWorker
import FanoutCore
import Synchronization
import Testing

/// Storage policy per broadcast channel: configured, else looked up once and cached, with bounds.
struct ChannelPoliciesTests {
    typealias Policy = ChannelPolicies.Policy

    /// A reader whose answers the test releases one at a time, counting calls per channel.
    final class ScriptedReader: Sendable {
        struct Pending: Sendable {
            var channel: String
            var continuation: CheckedContinuation<Policy?, any Error>
        }
        let calls = Mutex<[String]>([])
        let pending = Mutex<[Pending]>([])

        var reader: ChannelPolicies.Reader {
            { [self] _, channel in
                calls.withLock { $0.append(channel) }
                return try await withCheckedThrowingContinuation { continuation in
                    pending.withLock { $0.append(Pending(channel: channel, continuation: continuation)) }
                }
            }
        }

        /// Waits (bounded) until `count` lookups are parked.
        func waitForPending(_ count: Int) async throws {
            for _ in 0..<2000 {
                if pending.withLock({ $0.count }) >= count { return }
                try await Task.sleep(for: .milliseconds(1))
            }
            Issue.record("only \(pending.withLock { $0.count }) lookups started, expected \(count)")
        }

        func answer(_ channel: String, with result: Result<Policy?, any Error>) {
            let parked = pending.withLock { list -> Pending? in
                guard let index = list.firstIndex(where: { $0.channel == channel }) else { return nil }
                return list.remove(at: index)
            }
            parked?.continuation.resume(with: result)
        }
    }

    struct LookupFailed: Error {}

    /// Collects completions and lets the test await them.
    final class Answers: Sendable {
        let values = Mutex<[String: Policy?]>([:])
        func completion(_ name: String) -> @Sendable (Policy?) -> Void { { policy in self.values.withLock { $0[name] = .some(policy) } } }
        func wait(for name: String) async throws -> Policy? {
            for _ in 0..<2000 {
                if let value = values.withLock({ $0[name] }) { return value }
                try await Task.sleep(for: .milliseconds(1))
            }
            Issue.record("no answer for \(name)")
            return nil
        }
    }

    static let clockValue = Atomic<Int64>(1_000_000_000_000)
    static let clock = WorkerClock { clockValue.load(ordering: .relaxed) }

    @Test func expirationFollowsPolicyAndStaleDate() {
        let now: Int64 = 1_800_000_000
        #expect(ChannelStoragePolicy.expiration(policy: .noStorage, staleDate: now + 600, now: now) == 0)
        #expect(ChannelStoragePolicy.expiration(policy: nil, staleDate: now + 600, now: now) == 0)
        #expect(ChannelStoragePolicy.expiration(policy: .mostRecent, staleDate: now + 600, now: now) == now + 600)
        // Already stale: nothing worth storing.
        #expect(ChannelStoragePolicy.expiration(policy: .mostRecent, staleDate: now, now: now) == 0)
        // APNs stores at most 8 hours.
        #expect(ChannelStoragePolicy.expiration(policy: .mostRecent, staleDate: now + 9 * 3600, now: now) == now + 8 * 3600)
    }

    @Test func configuredPolicyNeedsNoLookup() {
        let scripted = ScriptedReader()
        let policies = ChannelPolicies(configured: [.init(app: "a", channel: "c1"): .mostRecent], reader: scripted.reader, clock: Self.clock)
        #expect(policies.resolve(app: "a", channel: "c1") { _ in Issue.record("no callback for a ready answer") } == .ready(.mostRecent))
        #expect(scripted.calls.withLock { $0 }.isEmpty)
    }

    @Test func withoutReaderUnknownChannelsAreSentImmediately() {
        let policies = ChannelPolicies(configured: [:], reader: nil, clock: Self.clock)
        #expect(policies.resolve(app: "a", channel: "c1") { _ in Issue.record("no callback") } == .ready(nil))
        #expect(!policies.lookupsEnabled)
    }

    @Test func oneLookupPerChannelIsSharedAndCached() async throws {
        let scripted = ScriptedReader()
        let answers = Answers()
        let policies = ChannelPolicies(configured: [:], reader: scripted.reader, clock: Self.clock)
        #expect(policies.resolve(app: "a", channel: "c1", completion: answers.completion("first")) == .deferred)
        #expect(policies.resolve(app: "a", channel: "c1", completion: answers.completion("second")) == .deferred)
        try await scripted.waitForPending(1)
        scripted.answer("c1", with: .success(.mostRecent))
        #expect(try await answers.wait(for: "first") == .mostRecent)
        #expect(try await answers.wait(for: "second") == .mostRecent)
        #expect(policies.resolve(app: "a", channel: "c1") { _ in Issue.record("cached: no callback") } == .ready(.mostRecent))
        #expect(scripted.calls.withLock { $0 } == ["c1"])
        #expect(policies.lookupsCompleted == 1)
    }

    @Test func concurrentLookupsAreBoundedAndOverflowGoesOutUnknown() async throws {
        let scripted = ScriptedReader()
        let answers = Answers()
        let policies = ChannelPolicies(configured: [:], reader: scripted.reader, clock: Self.clock, maxConcurrentLookups: 2)
        #expect(policies.resolve(app: "a", channel: "c1", completion: answers.completion("c1")) == .deferred)
        #expect(policies.resolve(app: "a", channel: "c2", completion: answers.completion("c2")) == .deferred)
        // A third channel while two lookups run: sent now with an unknown policy, never waits.
        #expect(policies.resolve(app: "a", channel: "c3") { _ in Issue.record("no callback") } == .ready(nil))
        try await scripted.waitForPending(2)
        scripted.answer("c1", with: .success(.noStorage))
        scripted.answer("c2", with: .success(.noStorage))
        _ = try await answers.wait(for: "c1")
        _ = try await answers.wait(for: "c2")
        // Room again: c3 is looked up now.
        #expect(policies.resolve(app: "a", channel: "c3", completion: answers.completion("c3")) == .deferred)
        try await scripted.waitForPending(1)
        scripted.answer("c3", with: .success(.mostRecent))
        #expect(try await answers.wait(for: "c3") == .mostRecent)
    }

    @Test func failedLookupIsRetriedOnlyAfterTheRetryDelay() async throws {
        let scripted = ScriptedReader()
        let answers = Answers()
        let policies = ChannelPolicies(configured: [:], reader: scripted.reader, clock: Self.clock, retryAfter: .seconds(60))
        #expect(policies.resolve(app: "a", channel: "c1", completion: answers.completion("try1")) == .deferred)
        try await scripted.waitForPending(1)
        scripted.answer("c1", with: .failure(LookupFailed()))
        #expect(try await answers.wait(for: "try1") == nil)
        #expect(policies.resolve(app: "a", channel: "c1") { _ in Issue.record("no callback") } == .ready(nil))
        Self.clockValue.add(61_000_000_000, ordering: .relaxed)
        #expect(policies.resolve(app: "a", channel: "c1", completion: answers.completion("try2")) == .deferred)
        try await scripted.waitForPending(1)
        scripted.answer("c1", with: .success(.mostRecent))
        #expect(try await answers.wait(for: "try2") == .mostRecent)
        #expect(scripted.calls.withLock { $0 } == ["c1", "c1"])
    }

    @Test func forgetAndCapacityDropCachedAnswers() async throws {
        let scripted = ScriptedReader()
        let answers = Answers()
        let policies = ChannelPolicies(configured: [:], reader: scripted.reader, clock: Self.clock, capacity: 2)
        for channel in ["c1", "c2", "c3"] {
            #expect(policies.resolve(app: "a", channel: channel, completion: answers.completion(channel)) == .deferred)
            try await scripted.waitForPending(1)
            scripted.answer(channel, with: .success(.mostRecent))
            _ = try await answers.wait(for: channel)
        }
        // c1 was the oldest of three in a cache of two.
        #expect(policies.resolve(app: "a", channel: "c1", completion: answers.completion("c1-again")) == .deferred)
        try await scripted.waitForPending(1)
        scripted.answer("c1", with: .success(.noStorage))
        #expect(try await answers.wait(for: "c1-again") == .noStorage)
        #expect(policies.resolve(app: "a", channel: "c3") { _ in } == .ready(.mostRecent))
        policies.forget(app: "a", channel: "c3")
        #expect(policies.resolve(app: "a", channel: "c3", completion: answers.completion("c3-again")) == .deferred)
        try await scripted.waitForPending(1)
        scripted.answer("c3", with: .success(nil))
        #expect(try await answers.wait(for: "c3-again") == nil)
    }
}
