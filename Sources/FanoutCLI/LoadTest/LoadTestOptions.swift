import Foundation

/// What `fanout loadtest` was asked to do, validated: every count and share within explicit bounds.
struct LoadTestOptions: Sendable {
    /// Records on activity-updates and broadcast-updates, malformed events and duplicates included
    /// (token registrations on activity-tokens come on top: one per activity).
    var events = 100_000
    var activities = 2_000
    var channels = 20
    var workers = 2
    /// Events per second; 0 produces as fast as the producer (and the flow bound below) allows.
    var rate: Double = 0
    var seed: UInt64 = 1
    /// Share of `events` that are malformed (dead-lettered) and that repeat the previous event (duplicates).
    var malformedShare = 0.01
    var duplicateShare = 0.01
    /// Share of the story events that go to broadcast channels.
    var broadcastShare = 0.2
    /// Partitions of activity-updates (and activity-tokens); broadcast-updates gets a quarter (at least 1).
    var partitions = 16
    /// The whole run, startup included; past it the run stops and fails with what was pending.
    var timeout: Duration = .seconds(600)
    /// Accepted pushes to one target may be this much closer than `min_interval`: the engine spaces its
    /// send decisions, the simulator timestamps arrivals, and the time on the wire between them varies.
    var intervalTolerance: Duration = .milliseconds(250)
    var json = false
    /// Keep the workers' JSON logs here (by default in a temporary directory, removed after a passing run).
    var keepLogDirectory: String?
    var interrupt = DemoInterrupt()

    static let eventLimit = 5_000_000
    static let activityLimit = 200_000
    static let channelLimit = 1_000
    static let workerLimit = 8
    static let partitionLimit = 256

    var broadcastPartitions: Int { max(1, partitions / 4) }

    static func parse(_ arguments: [String]) throws -> LoadTestOptions {
        var args = Arguments(arguments)
        var options = LoadTestOptions()
        options.events = try bounded(args.int("events"), "events", 1...eventLimit) ?? options.events
        options.activities = try bounded(args.int("activities"), "activities", 1...activityLimit) ?? options.activities
        options.channels = try bounded(args.int("channels"), "channels", 0...channelLimit) ?? options.channels
        options.workers = try bounded(args.int("workers"), "workers", 1...workerLimit) ?? options.workers
        options.partitions = try bounded(args.int("partitions"), "partitions", 1...partitionLimit) ?? options.partitions
        if let rate = try args.double("rate") {
            guard (0...1_000_000).contains(rate) else { throw UsageError("--rate must be within 0...1000000 events/s (0 = as fast as possible), got \(rate)") }
            options.rate = rate
        }
        if let seed = try args.option("seed") {
            guard let value = UInt64(seed) else { throw UsageError("--seed expects a whole number ≥ 0, got '\(seed)'") }
            options.seed = value
        }
        options.malformedShare = try share(args.double("malformed"), "malformed", max: 0.5) ?? options.malformedShare
        options.duplicateShare = try share(args.double("duplicates"), "duplicates", max: 0.5) ?? options.duplicateShare
        options.broadcastShare = try share(args.double("broadcast-share"), "broadcast-share", max: 0.9) ?? options.broadcastShare
        if let timeout = try args.double("timeout") {
            guard (1...86_400).contains(timeout) else { throw UsageError("--timeout must be within 1...86400 seconds, got \(timeout)") }
            options.timeout = .milliseconds(Int64(timeout * 1000))
        }
        if let tolerance = try args.int("interval-tolerance-ms") {
            guard (0...5_000).contains(tolerance) else { throw UsageError("--interval-tolerance-ms must be within 0...5000, got \(tolerance)") }
            options.intervalTolerance = .milliseconds(tolerance)
        }
        options.json = args.flag("json")
        options.keepLogDirectory = try args.option("keep-log")
        try args.finish()
        if options.channels == 0 { options.broadcastShare = 0 }
        _ = try LoadPlan(options: options)   // the event counts must leave room for every story
        return options
    }

    private static func bounded(_ value: Int?, _ name: String, _ range: ClosedRange<Int>) throws -> Int? {
        guard let value else { return nil }
        guard range.contains(value) else { throw UsageError("--\(name) must be within \(range.lowerBound)...\(range.upperBound), got \(value)") }
        return value
    }

    private static func share(_ value: Double?, _ name: String, max: Double) throws -> Double? {
        guard let value else { return nil }
        guard (0...max).contains(value) else { throw UsageError("--\(name) is a share of the events within 0...\(max), got \(value)") }
        return value
    }
}

/// How `events` splits into story events per lane, malformed events and duplicates.
struct LoadPlan: Sendable, Equatable {
    var activityStoryEvents: Int
    var channelStoryEvents: Int
    var malformed: Int
    var duplicates: Int

    /// Every story needs at least an update and its end.
    static let minimumStory = 2

    init(options: LoadTestOptions) throws {
        malformed = Int((Double(options.events) * options.malformedShare).rounded())
        duplicates = Int((Double(options.events) * options.duplicateShare).rounded())
        let stories = options.events - malformed - duplicates
        channelStoryEvents = options.channels == 0 ? 0 : Int((Double(stories) * options.broadcastShare).rounded())
        activityStoryEvents = stories - channelStoryEvents
        guard activityStoryEvents >= Self.minimumStory * options.activities else {
            throw UsageError("--events \(options.events) leaves \(activityStoryEvents) events for \(options.activities) activities, "
                             + "and each activity's story needs at least \(Self.minimumStory) (an update and its end): "
                             + "raise --events or lower --activities")
        }
        guard channelStoryEvents >= Self.minimumStory * options.channels else {
            throw UsageError("--events \(options.events) leaves \(channelStoryEvents) events for \(options.channels) channels "
                             + "(--broadcast-share \(options.broadcastShare)), and each channel's story needs at least \(Self.minimumStory): "
                             + "raise --events or --broadcast-share, or lower --channels")
        }
    }
}
