import APNsModel
import FanoutCore

/// The seeded, realistic mix `fanout loadtest` publishes, generated one record at a time (memory is
/// per target, never per event): activities on the per-activity lane (progress in small and large
/// steps, status changes, some alerts, an end with a final state) and broadcast channels with
/// score-like updates, interleaved in proportion to what each story still has to publish, plus a
/// share of malformed events (each with the rejection reason Fanout must give) and producer duplicates.
///
/// Per target, events are published in order with strictly increasing whole-second timestamps:
/// `max(previous + 1, now)`, so a busy target's timestamps run ahead of the wall clock by at most its
/// event count in seconds (bounded below Fanout's 8-hour limit by `maxAheadSeconds`).
struct LoadMix: Sendable {
    static let exportsApp = "com.example.exports"
    static let ridesApp = "com.example.rides"
    static let sportsApp = "com.example.sports"
    /// Every fourth activity belongs to the rides app, which declares frequent updates (a larger budget).
    static let ridesEvery = 4
    /// Timestamps may run this far ahead of the wall clock (Fanout rejects dates more than 8 h ahead).
    static let maxAheadSeconds: Int64 = 6 * 3600
    static let statuses = ["queued", "preparing", "uploading", "rendering", "finalizing"]

    enum Topic: String, Sendable { case activityUpdates = "activity-updates", broadcastUpdates = "broadcast-updates" }

    struct Target: Sendable {
        /// Kafka key: the activity key, or the channel id.
        var key: String
        /// Where APNs delivers: the activity's update token, or the channel id.
        var destination: String
        var app: String
        var broadcast: Bool
        var timestamp: Int64 = 0
        var progress = 0.0
        var status = 0
        var home = 0, away = 0, minute = 0
    }

    struct Record: Sendable {
        enum Kind: Sendable, Equatable {
            /// The next state of `target`; `final` for its end.
            case story(target: Int, timestamp: Int64, final: Bool)
            case malformed(RejectionReason)
            case duplicate
        }
        var topic: Topic
        var key: String
        var value: [UInt8]
        var kind: Kind
    }

    struct Final: Sendable, Equatable {
        var timestamp: Int64
        var contentState: [UInt8]
    }

    enum Failure: Error, CustomStringConvertible {
        case timestampsTooFarAhead(key: String, seconds: Int64)
        var description: String {
            switch self {
            case let .timestampsTooFarAhead(key, seconds):
                "\(key) has published so many events that its 1-second-apart timestamps would run \(seconds) s ahead of the clock "
                    + "(limit \(LoadMix.maxAheadSeconds) s): use more --activities or --channels, or a lower --rate"
            }
        }
    }

    let seed: UInt64
    private(set) var targets: [Target]
    /// The end each target published (nil until it did).
    private(set) var finals: [Final?]
    let activityCount: Int
    private var random: SeededRandom
    private var remaining: [Int]
    private var weights: RemainingWeights
    private var malformedLeft: Int
    private var duplicatesLeft: Int
    private var previous: Record?
    private(set) var produced = 0

    /// - Parameter channelIDs: one broadcast channel id per channel, created beforehand with the sports app.
    init(plan: LoadPlan, activities: Int, channelIDs: [String], seed: UInt64) {
        self.seed = seed
        random = SeededRandom(seed: seed &* 0x9e37_79b9_7f4a_7c15 &+ 1)
        activityCount = activities
        targets = (0..<activities).map { index in
            Target(key: "job-\(index)", destination: Self.token(seed: seed, index: index),
                   app: index % Self.ridesEvery == 0 ? Self.ridesApp : Self.exportsApp, broadcast: false)
        } + channelIDs.enumerated().map { index, channel in
            Target(key: channel, destination: channel, app: Self.sportsApp, broadcast: true)
        }
        finals = [Final?](repeating: nil, count: targets.count)
        remaining = Self.split(plan.activityStoryEvents, over: activities, random: &random)
            + Self.split(plan.channelStoryEvents, over: channelIDs.count, random: &random)
        weights = RemainingWeights(remaining)
        malformedLeft = plan.malformed
        duplicatesLeft = plan.duplicates
    }

    /// Story events per target: `LoadPlan.minimumStory` each, the rest spread with weights between 0.25 and 1.75.
    private static func split(_ total: Int, over count: Int, random: inout SeededRandom) -> [Int] {
        guard count > 0 else { return [] }
        var counts = [Int](repeating: LoadPlan.minimumStory, count: count)
        let rest = total - LoadPlan.minimumStory * count
        let shares = (0..<count).map { _ in 0.25 + 1.5 * Double(random.next() % 1000) / 1000 }
        let sum = shares.reduce(0, +)
        var given = 0
        for index in 0..<count {
            let extra = Int(Double(rest) * shares[index] / sum)
            counts[index] += extra
            given += extra
        }
        for index in 0..<(rest - given) { counts[index % count] += 1 }
        return counts
    }

    /// A 64-hex-digit device token, the same for the same seed and activity.
    static func token(seed: UInt64, index: Int) -> String {
        var generator = SeededRandom(seed: seed ^ (UInt64(index) &* 0xbf58_476d_1ce4_e5b9) ^ 0x746f_6b65_6e00)
        var text = ""
        for _ in 0..<4 {
            let word = String(generator.next(), radix: 16)
            text += String(repeating: "0", count: 16 - word.count) + word
        }
        return text
    }

    /// activity-tokens records: each activity's update token, published before its first event.
    func registration(_ index: Int, at now: Int64) -> (key: String, value: [UInt8]) {
        let target = targets[index]
        return (target.key, Array(#"{"token":"\#(target.destination)","app":"\#(target.app)","environment":"production","at":\#(now)}"#.utf8))
    }

    var isFinished: Bool { weights.total == 0 && malformedLeft == 0 && duplicatesLeft == 0 }

    /// The next record, or nil when the mix is done. `now` is the wall clock in UNIX seconds.
    mutating func next(now: Int64) throws -> Record? {
        let stories = weights.total
        let duplicates = previous == nil ? 0 : duplicatesLeft
        let pool = stories + malformedLeft + duplicates
        guard pool > 0 else { return nil }
        let draw = Int(random.next() % UInt64(pool))
        produced += 1
        if draw < stories { return try story(weights.index(containing: draw), now: now) }
        if draw < stories + malformedLeft {
            malformedLeft -= 1
            return malformed(now: now)
        }
        duplicatesLeft -= 1
        var copy = previous!
        copy.kind = .duplicate
        return copy
    }

    private mutating func story(_ index: Int, now: Int64) throws -> Record {
        remaining[index] -= 1
        weights.add(index, -1)
        let final = remaining[index] == 0
        var target = targets[index]
        target.timestamp = max(target.timestamp + 1, now)
        guard target.timestamp - now <= Self.maxAheadSeconds else {
            throw Failure.timestampsTooFarAhead(key: target.key, seconds: target.timestamp - now)
        }
        var alert: (String, String)?
        let content: String
        if target.broadcast {
            target.minute += 1
            if random.next() % 100 < 4 {
                if random.next() % 2 == 0 { target.home += 1 } else { target.away += 1 }
                alert = ("Goal", "\(target.home)–\(target.away), \(target.minute)'")
            }
            let period = final ? "FT" : (target.minute <= 45 ? "1H" : "2H")
            content = #"{"home":\#(target.home),"away":\#(target.away),"minute":\#(target.minute),"period":"\#(period)"}"#
        } else if final {
            target.progress = 1
            content = #"{"status":"done","progress":1}"#
            alert = ("Done", "\(target.key) is ready")
        } else {
            let step = random.next() % 10 == 0 ? 0.05 + Double(random.next() % 150) / 1000 : 0.001 + Double(random.next() % 9) / 1000
            target.progress = min(0.99, ((target.progress + step) * 1000).rounded() / 1000)
            if random.next() % 20 == 0 && target.status + 1 < Self.statuses.count { target.status += 1 }
            if random.next() % 50 == 0 { alert = ("Update", "\(target.key) is \(Self.statuses[target.status])") }
            content = #"{"status":"\#(Self.statuses[target.status])","progress":\#(target.progress)}"#
        }
        targets[index] = target
        var json = #"{"v":1,"id":"lt-\#(seed)-\#(produced)","app":"\#(target.app)","#
        json += target.broadcast ? #""channel":"\#(target.key)","# : #""activity":"\#(target.key)","#
        json += #""event":"\#(final ? "end" : "update")","timestamp":\#(target.timestamp),"content_state":\#(content)"#
        if let alert { json += #","alert":{"title":"\#(alert.0)","body":"\#(alert.1)"}"# }
        if final {
            json += #","dismissal_date":\#(target.timestamp + 900)"#
            finals[index] = Final(timestamp: target.timestamp, contentState: Array(content.utf8))
        }
        json += "}"
        let record = Record(topic: target.broadcast ? .broadcastUpdates : .activityUpdates, key: target.key, value: Array(json.utf8),
                            kind: .story(target: index, timestamp: target.timestamp, final: final))
        previous = record
        return record
    }

    /// A producer bug on a random activity's key; each kind has the reason Fanout must dead-letter it with.
    private mutating func malformed(now: Int64) -> Record {
        let target = targets[Int(random.next() % UInt64(activityCount))]
        let id = "lt-\(seed)-\(produced)-bad"
        let reason: RejectionReason
        let json: String
        switch random.next() % 3 {
        case 0:
            reason = .timestampInMilliseconds
            json = #"{"v":1,"id":"\#(id)","app":"\#(target.app)","activity":"\#(target.key)","event":"update","timestamp":\#(now * 1000),"content_state":{"status":"queued","progress":0}}"#
        case 1:
            reason = .missingContentState
            json = #"{"v":1,"id":"\#(id)","app":"\#(target.app)","activity":"\#(target.key)","event":"update","timestamp":\#(now)}"#
        default:
            reason = .malformedJSON
            json = #"{"v":1,"id":"\#(id)","app":"\#(target.app)","activity":"#
        }
        return Record(topic: .activityUpdates, key: target.key, value: Array(json.utf8), kind: .malformed(reason))
    }
}
