import APNsModel

/// The number of one dispatch of a request: unique and never reused within a client (unlike HTTP/2
/// stream ids, which every connection numbers 1, 3, 5, … afresh, or pooled objects, which carry one
/// request after another). Every end report carries the ticket of the dispatch it ends, and only the
/// request holding that ticket is completed by it.
struct DispatchTicket: Hashable, Comparable, CustomStringConvertible {
    let number: UInt64

    static func < (lhs: Self, rhs: Self) -> Bool { lhs.number < rhs.number }
    var description: String { "#\(number)" }
}

/// Hands out `DispatchTicket`s in increasing order. Confined to the transport thread.
struct DispatchTicketIssuer {
    private var next: UInt64 = 1

    mutating func issue() -> DispatchTicket {
        defer { next += 1 }
        return DispatchTicket(number: next)
    }
}

/// The request a pooled transport object (an `HTTP2Stream`, a `CurlTransfer`) carries: its ticket and
/// its completion, from dispatch until the one report that matches the ticket takes the completion.
///
/// The completion is not optional while a request is carried, and it can be taken only once and only
/// with the ticket it was given: a late report for an earlier dispatch of the same object finds a
/// different ticket (or none) and takes nothing, so it can neither complete nor replace another request.
struct CarriedRequest {
    typealias Completion = SubmissionCompletion

    private var current: (ticket: DispatchTicket, completion: Completion)?

    /// The ticket of the request carried now; nil when the object is idle (pooled or never used).
    var ticket: DispatchTicket? { current?.ticket }

    /// Starts carrying a dispatched request. The object must be idle: one object, one request at a time.
    mutating func begin(_ ticket: DispatchTicket, completion: Completion) {
        precondition(current == nil, "a transport object was dispatched while it still carried request \(current!.ticket)")
        current = (ticket, completion)
    }

    /// The completion of the request with `ticket`, which this object then no longer carries; nil
    /// when the object carries no request or another one (the report is stale: count it, complete nothing).
    mutating func take(_ ticket: DispatchTicket) -> Completion? {
        guard let carried = current, carried.ticket == ticket else { return nil }
        current = nil
        return carried.completion
    }
}
