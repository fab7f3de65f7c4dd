import CRdKafka
import Foundation
import Synchronization

extension KafkaConsumer {
    /// Blocking, bounded by `timeout`: takes the member out of service, in any state (before the
    /// first assignment, while joining, during a rebalance, after a lost assignment). The rebalance
    /// handler's `revoking` runs for the current assignment (commit there or before). Outstanding
    /// `commitAsync` calls are answered (by librdkafka, or `.closed`): see `drainCommitAnswers`.
    /// Throws the first revoke-commit failure, a close failure, or `.closed` when librdkafka did
    /// not finish in time. Later calls do nothing.
    ///
    /// A dynamic member leaves the group: unsubscribe first and keep serving the group on this
    /// thread until the assignment is empty and no rebalance callback has run for `quietPeriod`, so
    /// revoke (and any assignment still in flight, e.g. a rejoin after a lost assignment) is handled
    /// here and not inside librdkafka's close — librdkafka 2.0.2 can hang forever when an assignment
    /// reaches a cooperative consumer that is closing (confluentinc/librdkafka#4527). Records fetched
    /// meanwhile are dropped unseen, so nothing is committed past them.
    ///
    /// A static member (`groupInstanceID`) does not leave: its group keeps its partitions for it
    /// until it rejoins with the same id or its `session.timeout.ms` ends. librdkafka's unsubscribe
    /// sends a LeaveGroup even for a static member; only `rd_kafka_consumer_close` skips it. So it
    /// is not unsubscribed; instead, once it has had an assignment, the group is served until this
    /// member is settled (no rebalance under way, none for `quietPeriod`), for at most half of
    /// `timeout`, so that close is unlikely to meet an assignment in flight; `revoking` then runs
    /// inside `rd_kafka_consumer_close`, on its helper thread, for the whole assignment.
    ///
    /// Either way `rd_kafka_consumer_close` then runs on a helper thread; if it has not returned by
    /// the deadline this throws and leaves that thread (and the handle it holds) behind instead of
    /// blocking the caller: the group reassigns the partitions after `session.timeout.ms`, from the
    /// last commit.
    ///
    /// A member whose JoinGroup was answered but that never completed a SyncGroup (closed while
    /// joining or rejoining, before its first assignment) is out of service when this returns, but
    /// its librdkafka handle is never destroyed: librdkafka 2.0.2 aborts the process destroying a
    /// cooperative-sticky consumer in that state (`rd_kafka_sticky_assignor_state_destroy:
    /// Assertion 'assignor_state' failed`, confluentinc/librdkafka#4312, fixed in 2.3.0). A static
    /// member may still take a JoinGroup answer while closing, so it is never destroyed unless it
    /// synced once. The handle's memory and idle threads stay until the process exits.
    public func close(timeout: Duration = .seconds(30), quietPeriod: Duration = .milliseconds(500)) throws {
        let wasClosed = closed.withLock { closed in
            defer { closed = true }
            return closed
        }
        guard !wasClosed else { return }
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var unsubscribed = RD_KAFKA_RESP_ERR_NO_ERROR
        if groupInstanceID == nil {
            unsubscribed = client.withHandle { rd_kafka_unsubscribe($0) }
            if unsubscribed == RD_KAFKA_RESP_ERR_NO_ERROR {
                serveGroup(until: deadline, quietPeriod: quietPeriod) { (try? self.client.assignment())?.isEmpty ?? true }
            }
        } else if subscribed.load(ordering: .relaxed), context.synced.load(ordering: .relaxed) {
            // A member that never had an assignment has nothing to hand back: settling would only
            // take one that it then abandons to its session timeout.
            serveGroup(until: clock.now + timeout / 2, quietPeriod: quietPeriod) { self.groupJoin.isSteady }
        }
        // Unsubscribed, a dynamic member accepts no further JoinGroup response, so the assignor
        // librdkafka chose (if any) is final here; its state exists once a SyncGroup succeeded.
        if context.cooperative, !context.synced.load(ordering: .relaxed),
           groupInstanceID != nil || client.rebalanceProtocol != "NONE" {
            client.neverDestroy()
        }
        let finished = DispatchSemaphore(value: 0)
        let result = Mutex<rd_kafka_resp_err_t?>(nil)
        let client = client
        let closer = Thread.named("fanout-close") {
            let err = client.withHandle { rd_kafka_consumer_close($0) }
            result.withLock { $0 = err }
            finished.signal()
        }
        closer.start()
        let remaining = max(deadline - clock.now, .milliseconds(100))
        let timedOut = finished.wait(timeout: .now() + .milliseconds(Int(remaining.milliseconds))) == .timedOut
        commits.close(groupID: groupID)
        if let failure = context.drainErrors().first(where: { $0.code == .commit }) { throw failure }
        if timedOut {
            throw KafkaError(.closed, reason: "closing the member of group '\(groupID)' did not finish within \(timeout); the group reassigns its partitions after the session timeout, from the last commit")
        }
        if unsubscribed != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(.closed, unsubscribed, "unsubscribing before leaving the group failed: \(KafkaResponseCode(unsubscribed).message)")
        }
        if let err = result.withLock({ $0 }), err != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(.closed, err, "closing the group member failed: \(KafkaResponseCode(err).message)")
        }
    }

    /// Serves the group on this thread (rebalance callbacks, commit answers; records dropped unseen)
    /// until `done` holds and no rebalance callback ran for `quietPeriod`, or `deadline`, or a fatal error.
    private func serveGroup(until deadline: ContinuousClock.Instant, quietPeriod: Duration, done: () -> Bool) {
        let clock = ContinuousClock()
        var seen = context.callbacks.load(ordering: .relaxed)
        var quietSince = clock.now
        while clock.now < deadline {
            do {
                _ = try client.pollBatch(timeout: .milliseconds(50), maxMessages: 1000)
            } catch {
                return   // fatal: nothing more to serve; close reports the state
            }
            commits.collect()
            let served = context.callbacks.load(ordering: .relaxed)
            if served != seen {
                seen = served
                quietSince = clock.now
            } else if clock.now - quietSince >= quietPeriod, done() {
                return
            }
        }
    }
}
