import FanoutCore
import Testing
@testable import FanoutWorker

/// Progress coalescing out of the box: the engine as `WorkerSettings` builds it from the defaults.
@Suite struct DefaultCoalescingTests {
    static let key = "export-42"
    static let start: Int64 = 1_772_788_200

    /// An export of 33 events at one a second: a first state, 31 progress ticks of 0.03 (3 % of the
    /// way each), a final state that ends it. Each send is answered at once; returns the sent events' ids.
    static func play(_ configuration: FanoutConfiguration) throws -> (sent: [String], final: SendRequest?) {
        let settings = WorkerSettings(configuration: configuration, options: WorkerOptions(randomSeed: 7))
        let decoder = EventDecoder(policy: settings.policy)
        var engine = FanoutEngine(configuration: settings.engine)
        let second: Nanoseconds = 1_000_000_000
        var now = Nanoseconds(start) * second
        _ = engine.tokenRegistered(key: key, token: String(repeating: "a1", count: 32), environment: .production,
                                   at: 1, partition: 0, now: now)
        var states = [#""content_state": {"phase": "preparing", "progress": 0}"#]
        for tick in 1...31 { states.append(#""content_state": {"phase": "uploading", "progress": \#(Double(tick * 3) / 100)}"#) }
        states.append(#""event": "end", "content_state": {"phase": "ready", "progress": 1}"#)
        var sent: [String] = []
        var final: SendRequest?
        for (index, state) in states.enumerated() {
            let timestamp = start + Int64(index)
            let kind = state.hasPrefix(#""event""#) ? "" : #""event": "update", "#
            let json = #"{"v": 1, "id": "e\#(index)", "activity": "\#(key)", \#(kind)"timestamp": \#(timestamp), \#(state)}"#
            let event = try decoder.decode(Array(json.utf8), key: key, lane: .activity, now: timestamp).get()
            var actions = engine.receive(event, from: EventSource(partition: PartitionID(topic: "activity-updates", partition: 0), offset: Int64(index)), now: now)
            actions += engine.tick(now: now)
            for case let .send(request) in actions {
                sent.append(request.event.id)
                if request.event.kind == .end { final = request }
                _ = engine.complete(request.sendID, outcome: .delivered, now: now)
            }
            now += second
        }
        for _ in 0..<60 {
            for case let .send(request) in engine.tick(now: now) {
                sent.append(request.event.id)
                _ = engine.complete(request.sendID, outcome: .delivered, now: now)
            }
            now += second
        }
        return (sent, final)
    }

    static func configuration() -> FanoutConfiguration {
        FanoutConfiguration.defaults(apps: [.init(bundleID: "com.example.exports", teamID: "TEAM000001", keyID: "KEY0000001", keyPath: "/dev/null")])
    }

    @Test func anExportsProgressTicksAreCoalescedByDefault() throws {
        let (sent, final) = try Self.play(Self.configuration())
        #expect(sent.count * 100 <= 33 * 60, "\(sent.count) pushes for 33 events: \(sent)")
        #expect(sent.first == "e0" && sent.contains("e1"), "the first state and the change of phase go at once")
        #expect(sent.last == "e32" && final?.event.id == "e32", "the final state is delivered")
    }

    /// The same export without progress fields (the old default) is one push per event: the count
    /// above comes from the default profile, not from the budget.
    @Test func withoutProgressFieldsEveryTickIsAPush() throws {
        var configuration = Self.configuration()
        configuration.engine.progressFields = ["*": []]
        #expect(try Self.play(configuration).sent.count == 33)
    }

    @Test func theDefaultProfileIsTheStandardList() {
        let settings = WorkerSettings(configuration: Self.configuration(), options: WorkerOptions(randomSeed: 7))
        #expect(settings.engine.defaultMeaning == MeaningProfile(progressFields: MeaningProfile.standardProgressFields,
                                                                 minProgressDelta: 0.05, maxQuiet: .seconds(30)))
    }
}
