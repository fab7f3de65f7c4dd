import CRdKafka
import Dispatch
import FanoutCore
import Synchronization

/// Keeps librdkafka 2.0.2's fetcher going while a reader catches up on a backlog.
///
/// librdkafka stops fetching once the reader's local queue holds `queued.min.messages` records or
/// `queued.max.messages.kbytes` (counted over all of the consumer's partitions), and looks again
/// only when its broker thread next wakes: up to a second later (docs/environment.md). A reader
/// that empties the queue sooner then waits idle while the broker holds more: catch-up went in
/// bursts of about `queued.min.messages` records a second. Any request to the broker wakes that
/// thread, which fetches again at once. So after a poll that came back short (the queue is empty),
/// the partitions that librdkafka last saw with records past the reader's position (paused ones
/// aside) are asked for their latest offset — one ListOffsets request per leader, off the polling
/// thread, at most once per `interval` (a drained reader's poll waits that long at most). A reader
/// that keeps up has no lag after a short poll and sends none.
///
/// The lag librdkafka saw is as old as its last fetch: a fetcher that stopped at the prefetch bound
/// while a producer kept writing may have handed over everything up to the high watermark it last
/// saw, so the drained reader shows no lag and waited for the broker thread's own wake-up (workload
/// 2 of `scripts/bench` lost ≈ 0.45 s that way, README "Performance"). So the first short poll after
/// full ones — the reader was busy, the queue may have hit the bound — asks every unpaused assigned
/// partition, lag or not. A reader that never fills a poll never sends that round.
final class FetchNudge: Sendable {
    /// At most one look at the lag, and one round of nudges, per interval.
    static let interval: Duration = .milliseconds(20)
    /// A nudge's answer does not matter (the request woke the broker thread when it was queued):
    /// this only bounds how long a slow broker holds the nudging queue.
    static let timeout: Duration = .milliseconds(500)

    private struct State {
        var lastScheduled: ContinuousClock.Instant?
        var scheduled = false
    }

    private let state = Mutex(State())
    /// Set by a full poll, taken by the next look: the reader has been busy since the last one.
    private let busy = Atomic(false)
    private let queue = DispatchQueue(label: "fanout-kafka-fetch-nudge")
    private let sentCount = Atomic<UInt64>(0)
    private let failedCount = Atomic<UInt64>(0)

    var counts: KafkaFetchNudges {
        KafkaFetchNudges(sent: sentCount.load(ordering: .relaxed), failed: failedCount.load(ordering: .relaxed))
    }

    /// Polling thread, after a poll that returned as many records as asked for.
    func afterFullPoll() {
        busy.store(true, ordering: .relaxed)
    }

    /// Polling thread, after a poll that returned fewer records than asked for: schedules a look
    /// at the lag, `interval` after the last one at the earliest, unless one is pending. Never blocks.
    func afterShortPoll(of client: RDKafkaClient) {
        let now = ContinuousClock.now
        let delay = state.withLock { state -> Duration? in
            if state.scheduled { return nil }
            state.scheduled = true
            let due = max(now, state.lastScheduled.map { $0 + Self.interval } ?? now)
            state.lastScheduled = due
            return due - now
        }
        guard let delay else { return }
        // The client is held, not referenced weakly, for at most `interval` and one query: a weak
        // reference's side table is pointed to only from the object's packed reference count, so
        // LeakSanitizer reports it as leaked whenever the client is still alive at exit.
        queue.asyncAfter(deadline: .now() + .microseconds(Int(delay / .microseconds(1)))) { [client, self] in
            defer { state.withLock { $0.scheduled = false } }
            let afterBusyPolls = busy.exchange(false, ordering: .relaxed)
            guard let partitions = client.partitionsToNudge(lagOrNot: afterBusyPolls), !partitions.isEmpty else { return }
            sentCount.add(1, ordering: .relaxed)
            if !client.askLatestOffsets(of: partitions, timeout: Self.timeout) { failedCount.add(1, ordering: .relaxed) }
        }
    }
}

/// A reader's fetch nudges (`FetchNudge`) so far.
public struct KafkaFetchNudges: Sendable, Equatable {
    /// Rounds of latest-offset requests sent to wake a stopped fetcher.
    public var sent: UInt64
    /// Of those, the ones that failed (the brokers were woken all the same unless a request never
    /// left, e.g. while a broker is unreachable).
    public var failed: UInt64
}

extension RDKafkaClient {
    /// Blocking (a round trip to librdkafka's main thread for the assignment): assigned, unpaused
    /// partitions whose last fetched high watermark is past the reader's position, or with
    /// `lagOrNot` every assigned, unpaused one; nil when the assignment could not be read (e.g. the
    /// consumer is closing). Pauses of partitions no longer assigned are forgotten (a partition
    /// assigned again starts unpaused).
    func partitionsToNudge(lagOrNot: Bool) -> [PartitionID]? {
        var pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        let handle = withHandle { $0 }
        guard rd_kafka_assignment(handle, &pointer) == RD_KAFKA_RESP_ERR_NO_ERROR, let pointer else { return nil }
        let list = RDKafkaTopicPartitionList(adopting: pointer)
        guard list.withPointer({ rd_kafka_position(handle, $0) }) == RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        let entries = list.entries
        let paused = forgetPauses(outside: Set(entries.map(\.partition)))
        return entries.compactMap { entry in
            guard !paused.contains(entry.partition) else { return nil }
            if lagOrNot { return entry.partition }
            guard entry.offset >= 0, let high = lastKnownHighWatermark(of: entry.partition), high > entry.offset else { return nil }
            return entry.partition
        }
    }

    /// Blocking, up to `timeout`: asks each partition's leader for its latest offset (one ListOffsets
    /// request per leader, `rd_kafka_offsets_for_times` with "latest"); true when all answered.
    func askLatestOffsets(of partitions: [PartitionID], timeout: Duration) -> Bool {
        let list = RDKafkaTopicPartitionList(partitions, offset: Int64(RD_KAFKA_OFFSET_END))
        let err = list.withPointer { rd_kafka_offsets_for_times(withHandle { $0 }, $0, timeout.librdkafkaMilliseconds) }
        return err == RD_KAFKA_RESP_ERR_NO_ERROR && list.failures.isEmpty
    }
}
