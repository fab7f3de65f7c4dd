import APNsModel

/// One push the worker should send now. Report its result with `FanoutEngine.complete(_:outcome:now:)`.
///
/// A value type whose fields live in one immutable heap box, as `ActivityEvent`'s do: a send is
/// copied into the action list, the APNs completion and its answer, and each copy then costs one
/// reference count, not one per string and array field, and moves 8 bytes instead of ~150. A send is
/// built once, by the engine, and never changed.
public struct SendRequest: Sendable, Hashable {
    /// The stored fields. Immutable, hence `Sendable` without exceptions.
    final class Storage: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    struct Fields: Sendable, Hashable {
        let sendID: UInt64
        let lane: Lane
        let target: String
        let app: String
        let destination: Destination
        let environment: APNsEnvironment?
        let priority: Int
        let event: ActivityEvent
        let staleDate: Int64
        let dismissalDate: Int64?
        let expiration: Int64
        let partition: PartitionID
        let assignment: AssignmentID
        let coveredOffsets: [Int64]
        let isProbe: Bool
        let budgetDowngraded: Bool
    }

    private let storage: Storage

    public init(sendID: UInt64, lane: Lane, target: String, app: String, destination: Destination, environment: APNsEnvironment?,
                priority: Int, event: ActivityEvent, staleDate: Int64, dismissalDate: Int64?, expiration: Int64,
                partition: PartitionID, assignment: AssignmentID, coveredOffsets: [Int64], isProbe: Bool,
                budgetDowngraded: Bool = false) {
        storage = Storage(Fields(sendID: sendID, lane: lane, target: target, app: app, destination: destination,
                                 environment: environment, priority: priority, event: event, staleDate: staleDate,
                                 dismissalDate: dismissalDate, expiration: expiration, partition: partition,
                                 assignment: assignment, coveredOffsets: coveredOffsets, isProbe: isProbe,
                                 budgetDowngraded: budgetDowngraded))
    }

    public static func == (lhs: SendRequest, rhs: SendRequest) -> Bool {
        lhs.storage === rhs.storage || lhs.storage.fields == rhs.storage.fields
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(storage.fields) }

    public var sendID: UInt64 { _read { yield storage.fields.sendID } }
    public var lane: Lane { _read { yield storage.fields.lane } }
    /// Activity key or channel id.
    public var target: String { _read { yield storage.fields.target } }
    public var app: String { _read { yield storage.fields.app } }
    public var destination: Destination { _read { yield storage.fields.destination } }
    /// From the token registration; nil when unknown (inline and push-to-start tokens, channels):
    /// use the app's configured environment.
    public var environment: APNsEnvironment? { _read { yield storage.fields.environment } }
    /// 10 or 5.
    public var priority: Int { _read { yield storage.fields.priority } }
    /// The state to put in the payload: the newest state, with an alert kept from a replaced event.
    /// `event.kind` is the event to send (`start`, `update` or `end`).
    public var event: ActivityEvent { _read { yield storage.fields.event } }
    /// aps.stale-date: the event's, or timestamp + default_stale_after.
    public var staleDate: Int64 { _read { yield storage.fields.staleDate } }
    /// aps.dismissal-date: only on end, when the producer gave one.
    public var dismissalDate: Int64? { _read { yield storage.fields.dismissalDate } }
    /// apns-expiration (UNIX seconds; 0 = do not store).
    public var expiration: Int64 { _read { yield storage.fields.expiration } }
    /// The input offsets this send completes when delivered (all in `partition`).
    public var partition: PartitionID { _read { yield storage.fields.partition } }
    /// The assignment of `partition` this send was decided under: the worker writes it only while
    /// that assignment is still its own (`WritePermit`, docs/design.md §5).
    public var assignment: AssignmentID { _read { yield storage.fields.assignment } }
    public var coveredOffsets: [Int64] { _read { yield storage.fields.coveredOffsets } }
    /// True when this send probes a paused app.
    public var isProbe: Bool { _read { yield storage.fields.isProbe } }
    /// True when the update was major but went at priority 5 because the target's priority-10
    /// budget was empty (metrics: `fanout_budget_downgrades_total`).
    public var budgetDowngraded: Bool { _read { yield storage.fields.budgetDowngraded } }
}
