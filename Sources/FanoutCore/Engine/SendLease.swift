/// Whether this worker may still write sends for the partitions it was given, when it cannot know
/// that the group still counts it as a member (docs/design.md §5, "The send lease").
///
/// The group takes a member's partitions away once the coordinator has not heard from it for a
/// session timeout. A process that did not run for that long (stopped, swapped out, starved) has
/// sends it decided before, queued or about to be queued, for partitions another member may own
/// by now; librdkafka says the partitions are lost only after its own threads have run again. So
/// any thread that runs reports it (`ran`), and a gap between two reports longer than
/// `stallThreshold` holds every write until the consumer has let librdkafka have its say: a poll
/// that began at least `settle` after the stall ended has returned (`pollReturned`). librdkafka
/// serves its group at least once a second, and a poll serves the loss it raised before returning,
/// so by then a lost partition is gone from the engine and its queued sends are withdrawn
/// (`WritePermit`); a kept one sends on. A stall shorter than the threshold cannot have cost the
/// session: the threshold is half of it.
public struct SendLease: Sendable, Hashable {
    public let stallThreshold: Nanoseconds
    public let settle: Nanoseconds
    /// The latest time any thread was seen running.
    public private(set) var lastRan: Nanoseconds?
    /// When the latest stall ended, while writes are held for it.
    public private(set) var heldSince: Nanoseconds?

    public static let defaultSettle: Nanoseconds = 1_500_000_000

    /// `sessionTimeout`: the consumer's `session.timeout.ms`. The threshold is half of it, at least 1 s.
    public init(sessionTimeout: Nanoseconds, settle: Nanoseconds = SendLease.defaultSettle) {
        stallThreshold = max(1_000_000_000, sessionTimeout / 2)
        self.settle = settle
    }

    public var isHolding: Bool { heldSince != nil }

    /// What one report of a running thread found.
    public enum Observation: Sendable, Hashable {
        case open
        case held
        /// This report ended a stall of that length: writes are held from now.
        case stalled(Nanoseconds)
    }

    /// A thread ran at `now`. Reports may arrive slightly out of order from several threads.
    public mutating func ran(at now: Nanoseconds) -> Observation {
        let previous = lastRan
        lastRan = max(previous ?? now, now)
        if let previous, now - previous > stallThreshold {
            heldSince = now
            return .stalled(now - previous)
        }
        return heldSince == nil ? .open : .held
    }

    /// A consumer poll that began at `startedAt` returned (report the poll thread's `ran` first: its
    /// return may be what ends a stall). Returns true when it ends a hold.
    public mutating func pollReturned(startedAt: Nanoseconds) -> Bool {
        guard let since = heldSince, startedAt >= since + settle else { return false }
        heldSince = nil
        return true
    }
}
