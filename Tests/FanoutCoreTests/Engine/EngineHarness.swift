import APNsModel
@testable import FanoutCore

let activityPartition = PartitionID(topic: "activity-updates", partition: 0)
let broadcastPartition = PartitionID(topic: "broadcast-updates", partition: 0)
let sec: Nanoseconds = 1_000_000_000
let tokenA = PushToken(hex: String(repeating: "a1", count: 32))!
let tokenB = PushToken(hex: String(repeating: "b2", count: 32))!

/// A push token from hex known to be valid.
func pushToken(_ hex: String) -> PushToken { PushToken(hex: hex)! }

/// Builds an event whose content_state fields are given as (name, value) with numbers as progress candidates.
func makeEvent(_ id: String, target: String = "export-42", kind: EventKind = .update, timestamp: Int64,
               fields: [(String, Double)] = [], status: String = "rendering", importance: Importance? = nil,
               alert: Bool = false, token: PushToken? = nil, lane: Lane = .activity, staleDate: Int64? = nil,
               dismissalDate: Int64? = nil, attributesType: String? = nil) -> ActivityEvent {
    var content = [ContentField(name: "status", digest: DedupeWindow.digest(target: "", id: status), number: nil)]
    for (name, value) in fields {
        content.append(ContentField(name: name, digest: UInt64(bitPattern: Int64(value * 1000)), number: value))
    }
    return ActivityEvent(id: id, app: "com.example.exports", lane: lane, target: target, kind: kind, timestamp: timestamp,
                         contentState: RawJSON(bytes: Array("{}".utf8)), contentFields: content, importance: importance,
                         alert: alert ? RawJSON(bytes: Array("{\"title\":\"t\"}".utf8)) : nil, staleDate: staleDate,
                         dismissalDate: dismissalDate, token: token,
                         attributesType: kind == .start ? (attributesType ?? "ExportAttributes") : attributesType,
                         attributes: kind == .start ? RawJSON(bytes: Array("{}".utf8)) : nil)
}

/// Drives one engine in virtual time and keeps every action it returned.
struct Harness {
    var engine: FanoutEngine
    var now: Nanoseconds = 1_772_788_200 * sec
    var nextOffset: [PartitionID: Int64] = [:]
    var actions: [EngineAction] = []

    init(configuration: EngineConfiguration = EngineConfiguration(), registerToken: Bool = true) {
        engine = FanoutEngine(configuration: configuration)
        if registerToken {
            _ = engine.tokenRegistered(key: "export-42", token: tokenA, environment: .sandbox,
                                       at: 1, partition: 0, now: now)
        }
    }

    /// A harness whose engine has `configure` applied and whose timers have started (one tick at its start).
    static func started(_ configure: (inout EngineConfiguration) -> Void) -> Harness {
        var configuration = EngineConfiguration()
        configure(&configuration)
        var h = Harness(configuration: configuration)
        h.advance(0)
        return h
    }

    @discardableResult
    mutating func feed(_ event: ActivityEvent, partition: PartitionID = activityPartition) -> [EngineAction] {
        let offset = nextOffset[partition, default: 0]
        nextOffset[partition] = offset + 1
        let new = engine.receive(event, from: EventSource(partition: partition, offset: offset), now: now)
        actions += new
        return new
    }

    @discardableResult
    mutating func advance(_ by: Nanoseconds) -> [EngineAction] {
        now += by
        let new = engine.tick(now: now)
        actions += new
        return new
    }

    @discardableResult
    mutating func complete(_ send: SendRequest, _ outcome: SendOutcome = .delivered) -> [EngineAction] {
        let new = engine.complete(send.sendID, outcome: outcome, now: now)
        actions += new
        return new
    }

    /// Assigns `partition` as the group would at `at` (default now); an activity partition's tokens
    /// are reported caught up at once unless `tokensRead` is false.
    @discardableResult
    mutating func assign(_ partition: PartitionID, lane: Lane = .activity, at: Nanoseconds? = nil, tokensRead: Bool = true) -> [EngineAction] {
        var new: [EngineAction] = []
        engine.assign(partition, lane: lane, now: at ?? now, into: &new)
        let follow = new.first { if case .followTokens = $0 { true } else { false } }
        if tokensRead, case let .followTokens(number, assignment)? = follow {
            engine.tokensCaughtUp(partition: number, assignment: assignment, now: now, into: &new)
        }
        actions += new
        return new
    }

    @discardableResult
    mutating func revoke(_ partitions: [PartitionID]) -> [EngineAction] {
        var new: [EngineAction] = []
        engine.revoke(partitions, now: now, into: &new)
        actions += new
        return new
    }

    /// `register` with the token as hex.
    @discardableResult
    mutating func register(_ hex: String, key: String = "export-42", at: Int64) -> [EngineAction] {
        register(pushToken(hex), key: key, at: at)
    }

    @discardableResult
    mutating func register(_ token: PushToken, key: String = "export-42", at: Int64) -> [EngineAction] {
        let new = engine.tokenRegistered(key: key, token: token, environment: .production,
                                         at: at, partition: 0, now: now)
        actions += new
        return new
    }
}

extension Array where Element == EngineAction {
    var sends: [SendRequest] { compactMap { if case let .send(request) = $0 { request } else { nil } } }
    var deadLetters: [DeadLetter] { compactMap { if case let .deadLetter(letter) = $0 { letter } else { nil } } }
    var feedback: [TokenFeedback] { compactMap { if case let .feedback(record) = $0 { record } else { nil } } }
    var drops: [DropReason] { compactMap { if case let .dropped(_, reason) = $0 { reason } else { nil } } }
    /// Revokes the engine drained, with their final commit points.
    var drained: [PartitionID: CommitPoint?] {
        var result: [PartitionID: CommitPoint?] = [:]
        for case let .revokeDrained(partition, point) in self { result[partition] = .some(point) }
        return result
    }
}
