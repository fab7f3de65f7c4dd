import APNsSimulator
import Foundation

/// Checks what the APNs simulator accepted, push by push, against Fanout's promises per target
/// (docs/design.md §3): at most one push per `min_interval`, priority 10 only with credit in the target's
/// bucket, strictly increasing `aps.timestamp`, nothing after an end, and finally every target's
/// end (its last published state) delivered. Pure and streaming: memory is per target, not per push.
///
/// Times are the simulator's arrival times. The engine spaces its send *decisions*; the time on the
/// wire between decision and arrival varies, so two arrivals may be up to `tolerance` closer than
/// `min_interval`, and the bucket refills for `tolerance` longer per send, without a violation.
struct BudgetAudit: Sendable {
    enum Rule: String, Sendable, CaseIterable, Codable {
        case minInterval = "min-interval"
        case priorityBudget = "priority-10-budget"
        case timestampOrder = "timestamps-increasing"
        case afterEnd = "nothing-after-end"
        case finalState = "final-state-delivered"
        case unknownTarget = "known-targets-only"

        var summary: String {
            switch self {
            case .minInterval: "no two pushes to a target closer than min_interval"
            case .priorityBudget: "priority-10 pushes within the target's bucket"
            case .timestampOrder: "aps.timestamp strictly increasing per target"
            case .afterEnd: "nothing after a target's end"
            case .finalState: "every target's final state (its end) delivered"
            case .unknownTarget: "pushes only to tokens and channels the run registered"
            }
        }
    }

    /// One target's budget: spacing and its priority-10 bucket (starts full).
    struct Budget: Sendable, Equatable {
        var minInterval: Double
        var burst: Double
        var perHour: Double
    }

    /// What a target must receive: its name for messages and its budget.
    struct Expectation: Sendable {
        var name: String
        var budget: Budget
    }

    struct Violations: Sendable, Codable, Equatable {
        var count = 0
        var example: String?
    }

    private struct TargetState: Sendable {
        var lastArrival: Double?
        var lastTimestamp: Double?
        var ended = false
        var credits: Double
        var creditsAt: Double
        var lastEvent = ""
        var lastAps = ""
    }

    private let expectations: [String: Expectation]
    private let tolerance: Double
    private var states: [String: TargetState] = [:]
    private(set) var violations: [Rule: Violations] = [:]
    private(set) var observed = 0
    private(set) var byPriority: [Int: Int] = [:]

    /// - Parameters:
    ///   - expectations: by destination (device token or channel id).
    ///   - origin: UNIX seconds no later than any target's first event (every bucket is full then).
    ///   - tolerance: seconds; see the type's documentation.
    init(expectations: [String: Expectation], origin: Double, tolerance: Double) {
        self.expectations = expectations
        self.tolerance = tolerance
        for (destination, expectation) in expectations {
            states[destination] = TargetState(credits: expectation.budget.burst, creditsAt: origin)
        }
    }

    mutating func observe(_ record: DeliveryRecord) {
        observed += 1
        byPriority[record.priority, default: 0] += 1
        guard let destination = record.token ?? record.channel, let expectation = expectations[destination],
              var state = states[destination] else {
            note(.unknownTarget, "a \(record.event) push at \(record.time) to \(Self.short(record.token ?? record.channel ?? "(none)")), which the run never registered")
            return
        }
        let name = expectation.name
        if state.ended {
            note(.afterEnd, "\(name): a \(record.event) push (timestamp \(Int64(record.timestamp))) arrived after its end")
        }
        if let last = state.lastTimestamp, record.timestamp <= last {
            note(.timestampOrder, "\(name): timestamp \(Int64(record.timestamp)) arrived after \(Int64(last))")
        }
        if let last = state.lastArrival, record.time - last < expectation.budget.minInterval - tolerance {
            note(.minInterval, "\(name): pushes \(String(format: "%.3f", record.time - last)) s apart "
                 + "(min_interval \(expectation.budget.minInterval) s, tolerance \(tolerance) s)")
        }
        if record.priority == 10 {
            let refill = expectation.budget.perHour / 3600 * max(0, record.time - state.creditsAt + tolerance)
            state.credits = min(expectation.budget.burst, state.credits + refill)
            state.creditsAt = record.time
            if state.credits < 1 - 1e-9 {
                note(.priorityBudget, "\(name): a priority-10 push at \(String(format: "%.3f", record.time)) with \(String(format: "%.2f", state.credits)) "
                     + "credits left (burst \(Int(expectation.budget.burst)), \(Int(expectation.budget.perHour))/h)")
            } else {
                state.credits -= 1
            }
        }
        state.lastArrival = record.time
        state.lastTimestamp = max(state.lastTimestamp ?? record.timestamp, record.timestamp)
        if record.event == "end" { state.ended = true }
        state.lastEvent = record.event
        state.lastAps = record.aps
        states[destination] = state
    }

    /// Whether `destination`'s last accepted push is its expected end.
    func finalDelivered(_ destination: String, expected: LoadMix.Final) -> Bool {
        guard let state = states[destination], state.lastEvent == "end", state.lastTimestamp == Double(expected.timestamp) else { return false }
        return Self.contentState(of: state.lastAps, equals: expected.contentState)
    }

    /// The final-state check over every expected target, against the end each published (by
    /// destination; absent when it never published one): call once every push has been observed.
    mutating func checkFinalStates(_ finals: [String: LoadMix.Final]) {
        for (destination, expectation) in expectations.sorted(by: { $0.value.name < $1.value.name }) {
            guard let expected = finals[destination] else {
                note(.finalState, "\(expectation.name): the run never published its end")
                continue
            }
            if finalDelivered(destination, expected: expected) { continue }
            let state = states[destination]
            let shown = state?.lastEvent.isEmpty != false ? "nothing was delivered"
                : "the last push is \(state!.lastEvent) at timestamp \(Int64(state!.lastTimestamp ?? 0)): \(state!.lastAps)"
            note(.finalState, "\(expectation.name): expected end at timestamp \(expected.timestamp) with "
                 + "\(String(decoding: expected.contentState, as: UTF8.self)); \(shown)")
        }
    }

    private mutating func note(_ rule: Rule, _ example: String) {
        var entry = violations[rule] ?? Violations()
        entry.count += 1
        if entry.example == nil { entry.example = example }
        violations[rule] = entry
    }

    static func contentState(of aps: String, equals expected: [UInt8]) -> Bool {
        guard let object = try? JSONSerialization.jsonObject(with: Data(aps.utf8)) as? NSDictionary,
              let shown = object["content-state"] as? NSDictionary,
              let wanted = try? JSONSerialization.jsonObject(with: Data(expected)) as? NSDictionary else { return false }
        return shown.isEqual(wanted)
    }

    /// Push tokens are never printed whole.
    static func short(_ destination: String) -> String { destination.count > 12 ? String(destination.prefix(8)) + "…" : destination }
}
