/// Request deadlines in dispatch order, for a transport's own timeout scan.
///
/// Every request gets the same timeout, so deadlines arrive in increasing order and the earliest is
/// always at the front: a scan pops expired entries from the front and stops at the first that is not
/// (or after `limit` entries, so one scan's work is bounded whatever is queued). A request that
/// completed is not looked for: its entry is dropped when it reaches the front (its ticket no longer
/// matches what its object carries), so entries stay only behind a still-unanswered older request,
/// at most one request timeout's worth of dispatches. Pure; confined to the transport thread.
struct DeadlineQueue<Element: AnyObject> {
    struct Entry {
        let element: Element
        let ticket: DispatchTicket
        let deadline: ContinuousClock.Instant
    }

    private var entries: [Entry?] = []
    private var head = 0

    var count: Int { entries.count - head }

    mutating func append(_ element: Element, ticket: DispatchTicket, deadline: ContinuousClock.Instant) {
        entries.append(Entry(element: element, ticket: ticket, deadline: deadline))
    }

    /// Pops at most `limit` entries from the front: those whose request is no longer carried (`isCarried`
    /// false) are dropped, those past `now` are appended to `expired`. Stops at the first carried entry
    /// that has not expired. Returns whether it stopped at `limit` (more may be due: scan again soon).
    mutating func popExpired(now: ContinuousClock.Instant, limit: Int, isCarried: (Element, DispatchTicket) -> Bool,
                             into expired: inout [Entry]) -> Bool {
        var visited = 0
        while head < entries.count {
            if visited == limit { return true }
            let entry = entries[head]!
            let carried = isCarried(entry.element, entry.ticket)
            if carried && entry.deadline > now { break }
            entries[head] = nil
            head += 1
            visited += 1
            if carried { expired.append(entry) }
        }
        compact()
        return false
    }

    /// Forgets every entry (the transport has nothing in flight, so none is still carried).
    mutating func removeAll() {
        guard !entries.isEmpty else { return }
        entries.removeAll(keepingCapacity: true)
        head = 0
    }

    /// The deadline at the front (for the loop's wait); the scan may find it already answered.
    var earliestDeadline: ContinuousClock.Instant? { head < entries.count ? entries[head]!.deadline : nil }

    /// Drops the popped prefix once it is most of the storage, so memory follows what is queued.
    private mutating func compact() {
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}
