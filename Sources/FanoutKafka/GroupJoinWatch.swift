import CRdKafka
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Sees the moment this member stops being a settled member of its group, on librdkafka's own
/// thread, before anything else in the process can act on the old generation.
///
/// librdkafka 2.0.2 exposes its consumer-group join state only in its `cgrp` debug log (facility
/// `CGRPJOINSTATE`, "changed join state steady -> init") and, late and coarse, in its statistics.
/// A rebalance started by another member (a join, a leave, a session timeout) is noticed by a
/// heartbeat long before any rebalance callback; a commit sent in that window is answered with
/// ILLEGAL_GENERATION after this member's JoinGroup, and 2.0.2 then drops every partition, kept
/// ones too (librdkafka issue #4059, README "Operating it"). So the consumer turns on the `cgrp`
/// debug context, this watch reads the one facility it needs, and lines the user did not ask for
/// are not forwarded (`ClientContext.forwardedLevel`).
///
/// It also sees each heartbeat leave (facility `HEARTBEAT`, "GroupCoordinator/1: Heartbeat for group
/// "fanout" generation id 3"; 2.0.2 logs no line for a successful answer): an answer saying the group
/// is rebalancing changes the join state before a commit handed over after it arrived is sent, so that
/// commit goes out behind the JoinGroup (docs/design.md §4).
final class GroupJoinWatch: Sendable {
    static let facility = "CGRPJOINSTATE"
    static let heartbeatFacility = "HEARTBEAT"
    private let rejoining: @Sendable () -> Void
    private let heartbeatSent: @Sendable () -> Void
    /// Whether the member is in librdkafka's `steady` join state (its assignment applied).
    private let steady = Atomic(false)

    /// Settled: the last join state librdkafka reported is `steady` (no JoinGroup/SyncGroup round under way).
    var isSteady: Bool { steady.load(ordering: .acquiring) }

    init(rejoining: @escaping @Sendable () -> Void, heartbeatSent: @escaping @Sendable () -> Void = {}) {
        self.rejoining = rejoining
        self.heartbeatSent = heartbeatSent
    }

    /// One line of librdkafka's log, on its own thread: the facilities this watch reads are acted on,
    /// every other line is left alone (two `strcmp`s, no copy).
    func observe(facility: UnsafePointer<CChar>, message: UnsafePointer<CChar>) {
        if strcmp(facility, Self.facility) == 0 {
            observe(message)
        } else if strcmp(facility, Self.heartbeatFacility) == 0, Self.isHeartbeatSent(message) {
            heartbeatSent()
        }
    }

    /// `GroupCoordinator/1: Heartbeat for group "fanout" generation id 3` (the request leaving), not
    /// `Group "fanout" heartbeat error response in state up …` (an answer).
    static func isHeartbeatSent(_ message: UnsafePointer<CChar>) -> Bool {
        strstr(message, ": Heartbeat for group ") != nil
    }

    /// One `CGRPJOINSTATE` line, e.g. `Group "fanout" changed join state steady -> init (state up)`.
    /// Any state but `steady` means a JoinGroup/SyncGroup round is under way.
    func observe(_ message: UnsafePointer<CChar>) {
        guard let state = Self.newState(in: message) else { return }
        let isSteady = state == "steady"
        let wasSteady = steady.exchange(isSteady, ordering: .acquiringAndReleasing)
        if wasSteady && !isSteady { rejoining() }
    }

    /// The word after " -> ", or nil when the line does not have that shape.
    static func newState(in message: UnsafePointer<CChar>) -> Substring? {
        let text = String(cString: message)
        guard let arrow = text.range(of: " -> ") else { return nil }
        let rest = text[arrow.upperBound...]
        let state = rest.prefix { $0 != " " && $0 != "(" }
        return state.isEmpty ? nil : state
    }
}
