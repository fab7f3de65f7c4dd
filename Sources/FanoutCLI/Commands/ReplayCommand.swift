import Dispatch
import Foundation

/// `fanout replay`: copies a range of a recorded topic to another topic at N× the recorded pace.
struct ReplayCommand: Command {
    static let name = "replay"
    static let summary = "Copy a topic range to another topic at N× the recorded pace (load tests)"
    static let help = """
    Usage: fanout replay --bootstrap <servers> --from <topic> --to <topic> [options]

    Copies records of --from to --to: key, value and headers byte for byte, each source partition in
    offset order. The destination partition is chosen by key (librdkafka's 'partitioner', by default
    consistent_random: CRC32 of the key, so one key always lands on one partition whatever the
    partition counts; records without a key go to a random partition; set
    '--to-property partitioner=murmur2_random' to match Java clients), or with --keep-partition is the
    source partition number. Destination records get the time they are produced as their timestamp.

    Pacing: record timestamps define the schedule. The first record is produced at once; a record
    recorded t seconds after it is produced t/speed seconds later, partitions merged by timestamp.
    Within a partition order wins: a record stamped earlier than its predecessor follows it at once.

    The range: every selected partition from --start-offset (default: its first record) up to
    --end-offset (exclusive; default and at most: its end when the replay starts), narrowed by times
    like Kafka's offsetsForTimes: copying starts at the first record stamped at or after --start-time
    and stops at the first one stamped at or after --end-time. --start-time reads from --start-offset
    and skips what comes before: on a long topic give both to avoid reading from the beginning.

    Progress lines go to stderr; the summary (records and bytes per source partition, elapsed time,
    achieved vs recorded rate) to stdout. Produces with acks=all and an idempotent producer, and
    stops at the first record the destination does not acknowledge.
    Exit codes: 0 every record in range was acknowledged; 1 something failed (unknown topic, partition
    out of range, records deleted by retention before they were read, a record not acknowledged);
    64 bad arguments; 130 stopped by SIGINT/SIGTERM (what was produced is flushed, then the summary).

    Bounds: at most --read-ahead records per source partition are held (plus one poll batch of 500);
    librdkafka prefetches up to 'queued.max.messages.kbytes' (16384 KiB unless given; the reader also
    defaults 'fetch.wait.max.ms' to 100 so a paused partition resumes quickly) and the
    producer queues up to 'queue.buffering.max.messages' (100000) unacknowledged records.

    Options:
      --bootstrap <servers>       source cluster (alias: --brokers); also the destination unless
                                  --to-bootstrap is given
      --from <topic>              topic to copy from
      --to <topic>                topic to copy to (must exist)
      --to-bootstrap <servers>    destination cluster
      --partitions <n,n,...>      source partitions to copy (default: all)
      --start-offset <n>          first offset to copy in each partition
      --start-time <time>         UNIX seconds or ISO 8601 (2026-03-01T12:00:00Z)
      --end-offset <n>            stop before this offset in each partition
      --end-time <time>           stop at the first record stamped at or after this time
      --count <n>                 copy at most n records in all (the first n of the schedule)
      --speed <factor>            multiple of the recorded pace (default: 1; 0 = as fast as possible)
      --keep-partition            produce to the source partition number (the destination needs at
                                  least as many partitions)
      --read-ahead <n>            records buffered per source partition (default: 1000)
      --timeout <seconds>         how long to wait for the last acknowledgements (default: 30)
      --progress <seconds>        seconds between progress lines, 0 for none (default: 5)
      --property <name>=<value>   any librdkafka property, for both clients; repeat for several
      --to-property <name>=<value>
                                  a librdkafka property for the destination producer only
    """

    static func run(_ arguments: [String]) async throws -> Int32 {
        let options = try ReplayOptions.parse(arguments)
        let stop = ReplayStop()
        // Signals are ignored by default handling and delivered through dispatch sources instead.
        let signals = SignalWaiter(signals: [SIGINT, SIGTERM])
        let watcher = Task {
            let number = await signals.next()
            if number != 0 {
                Output.err("fanout replay: received signal \(number); flushing what was produced")
                stop.request(number)
            }
        }
        defer { watcher.cancel() }
        let run = ReplayRun(options: options, stop: stop) { line in Output.err(line) }
        let summary: ReplaySummary
        do {
            summary = try await runOnThread { try run.run() }
        } catch let error as ReplayError {
            Output.err("fanout replay: \(error.description)")
            return 1
        }
        Output.out(summary.text)
        return summary.exitCode
    }

    /// The replay's Kafka calls block: run them on a thread of their own.
    static func runOnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread.named("fanout-replay") { continuation.resume(with: Result { try body() }) }
            thread.start()
        }
    }
}
