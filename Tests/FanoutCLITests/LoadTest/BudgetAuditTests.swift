@testable import APNsSimulator
import Testing
@testable import FanoutCLI

/// The compliance checker on hand-made sequences of accepted pushes: each rule must catch its violation,
/// and a compliant sequence must pass every rule.
@Suite struct BudgetAuditTests {
    static let token = String(repeating: "ab", count: 32)
    static let channel = "Y2hhbm5lbC0x"
    static let budget = BudgetAudit.Budget(minInterval: 1, burst: 2, perHour: 0)
    static let final = LoadMix.Final(timestamp: 110, contentState: Array(#"{"status":"done","progress":1}"#.utf8))

    /// An audit expecting the activity's token, and the channel when `withChannel`.
    static func audit(withChannel: Bool = false) -> BudgetAudit {
        var expectations: [String: BudgetAudit.Expectation] = [token: .init(name: "job-1", budget: budget)]
        if withChannel { expectations[channel] = .init(name: "channel 1", budget: budget) }
        return BudgetAudit(expectations: expectations, origin: 1000, tolerance: 0.1)
    }

    static func push(_ time: Double, timestamp: Double, event: String = "update", priority: Int = 5, token: String? = BudgetAuditTests.token,
                     channel: String? = nil, contentState: String = #"{"status":"uploading","progress":0.5}"#) -> DeliveryRecord {
        DeliveryRecord(time: time, kind: channel == nil ? .device : .broadcast, token: channel == nil ? token : nil, channel: channel,
                       bundleID: "com.example.exports", priority: priority, apnsID: "id", uniqueID: "u", topic: nil, pushType: "liveactivity",
                       expiration: nil, collapseID: nil, event: event, timestamp: timestamp,
                       aps: #"{"event":"\#(event)","timestamp":\#(Int(timestamp)),"content-state":\#(contentState)}"#)
    }

    static let endState = #"{"progress":1,"status":"done"}"#

    /// Runs `pushes` through a fresh audit, checks final states, and returns the violated rules.
    static func violated(_ pushes: [DeliveryRecord], finals: [String: LoadMix.Final]? = nil, withChannel: Bool = false) -> Set<BudgetAudit.Rule> {
        var audit = audit(withChannel: withChannel)
        for push in pushes { audit.observe(push) }
        audit.checkFinalStates(finals ?? [token: final])
        return Set(audit.violations.keys)
    }

    static let compliantEnd = push(1004, timestamp: 110, event: "end", priority: 10, contentState: endState)

    @Test func aCompliantSequencePassesEveryRule() {
        let pushes = [Self.push(1001, timestamp: 100, priority: 10), Self.push(1002.95, timestamp: 101),
                      Self.push(1003, timestamp: 102, channel: Self.channel), Self.compliantEnd]
        #expect(Self.violated(pushes, finals: [Self.token: Self.final, Self.channel: .init(timestamp: 102, contentState: [])],
                              withChannel: true) == [.finalState])
        // The channel's "end" above was an update: with its end delivered too, nothing is violated.
        let channelEnd = Self.push(1003, timestamp: 102, event: "end", channel: Self.channel, contentState: #"{"home":1}"#)
        let all = [Self.push(1001, timestamp: 100, priority: 10), Self.push(1002.95, timestamp: 101), channelEnd, Self.compliantEnd]
        #expect(Self.violated(all, finals: [Self.token: Self.final, Self.channel: .init(timestamp: 102, contentState: Array(#"{"home":1}"#.utf8))],
                              withChannel: true).isEmpty)
    }

    @Test func pushesCloserThanMinIntervalBeyondTheToleranceAreCaught() {
        var audit = Self.audit()
        audit.observe(Self.push(1001, timestamp: 100))
        audit.observe(Self.push(1001.85, timestamp: 101))
        #expect(audit.violations[.minInterval]?.count == 1)
        #expect(audit.violations[.minInterval]?.example?.contains("job-1: pushes 0.850 s apart") == true)
    }

    @Test func priorityTenBeyondTheBucketIsCaught() {
        // Burst 2, no refill: the third priority-10 push has no credit. Priority 5 never counts.
        let pushes = [Self.push(1001, timestamp: 100, priority: 10), Self.push(1002, timestamp: 101, priority: 5),
                      Self.push(1003, timestamp: 102, priority: 10), Self.push(1004, timestamp: 103, priority: 10), Self.compliantEnd]
        var audit = Self.audit()
        for push in pushes.dropLast() { audit.observe(push) }
        #expect(audit.violations[.priorityBudget]?.count == 1)
        #expect(Self.violated(Array(pushes.prefix(3)) + [Self.push(1004, timestamp: 110, event: "end", contentState: Self.endState)]).isEmpty)
    }

    @Test func theBucketRefillsAtItsHourlyRate() {
        var audit = BudgetAudit(expectations: [Self.token: .init(name: "job-1", budget: .init(minInterval: 1, burst: 1, perHour: 3600))],
                                origin: 1000, tolerance: 0)
        audit.observe(Self.push(1001, timestamp: 100, priority: 10))   // the burst
        audit.observe(Self.push(1002, timestamp: 101, priority: 10))   // one credit a second: refilled
        audit.observe(Self.push(1002.5, timestamp: 102, priority: 10)) // half a credit
        #expect(audit.violations[.priorityBudget]?.count == 1)
        #expect(audit.violations[.minInterval]?.count == 1)
    }

    @Test func aTimestampNotNewerThanTheLastIsCaught() {
        #expect(Self.violated([Self.push(1001, timestamp: 100), Self.push(1003, timestamp: 100), Self.compliantEnd]) == [.timestampOrder])
        #expect(Self.violated([Self.push(1001, timestamp: 100), Self.push(1003, timestamp: 99), Self.compliantEnd]) == [.timestampOrder])
    }

    @Test func anythingAfterAnEndIsCaught() {
        let late = Self.push(1006, timestamp: 111)
        #expect(Self.violated([Self.push(1001, timestamp: 100), Self.compliantEnd, late]).contains(.afterEnd))
    }

    @Test func aMissingOrWrongFinalStateIsCaught() {
        // Nothing delivered at all.
        #expect(Self.violated([]) == [.finalState])
        // The last push is an update, not the end.
        #expect(Self.violated([Self.push(1001, timestamp: 110)]) == [.finalState])
        // An end with another timestamp, or another content state, than the one published.
        #expect(Self.violated([Self.push(1001, timestamp: 109, event: "end", contentState: Self.endState)]) == [.finalState])
        #expect(Self.violated([Self.push(1001, timestamp: 110, event: "end", contentState: #"{"status":"done","progress":0.9}"#)]) == [.finalState])
        // A target that never published its end.
        #expect(Self.violated([Self.compliantEnd], finals: [:]) == [.finalState])
    }

    @Test func aPushToAnUnknownTargetIsCaught() {
        let stranger = Self.push(1001, timestamp: 100, token: String(repeating: "cd", count: 32))
        var audit = Self.audit()
        audit.observe(stranger)
        #expect(audit.violations[.unknownTarget]?.count == 1)
        #expect(audit.violations[.unknownTarget]?.example?.contains(String(repeating: "cd", count: 32)) == false)   // never a whole token
    }
}
