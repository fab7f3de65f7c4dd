/// What a request was decided under, checked again just before it is written: the worker's
/// ownership of the Kafka partition the send belongs to (one assignment of it, never reused).
public struct WritePermit: Sendable, Hashable {
    public var assignment: UInt64
    public init(assignment: UInt64) { self.assignment = assignment }
}

/// Asked by the transport thread at the last moment before requests go on the wire
/// (docs/design.md §5, "The send lease"). Both calls must be cheap and thread-safe.
public protocol WriteGate: Sendable {
    /// False while nothing may be written: queued requests stay queued (none is failed), and the
    /// gate wakes the client (`APNsClient.wake`) when it opens again.
    func isOpen() -> Bool
    /// False when the ownership a request was decided under is gone: it is not written, and
    /// completes as withdrawn (`APNsClientError.withdrawn`).
    func admits(_ permit: WritePermit) -> Bool
}
