import Foundation

/// `fanout replay`'s arguments, checked for everything that does not need the cluster.
struct ReplayOptions: Sendable, Equatable {
    var bootstrap: String
    var toBootstrap: String?
    var from: String
    var to: String
    /// nil: every partition of the source topic.
    var partitions: [Int32]?
    var startOffset: Int64?
    var endOffset: Int64?
    /// Milliseconds since the UNIX epoch.
    var startTime: Int64?
    var endTime: Int64?
    var count: Int?
    /// 0: as fast as possible.
    var speed: Double = 1
    var keepPartition = false
    /// For both clients.
    var properties: [String: String] = [:]
    /// For the producer only, on top of `properties`.
    var toProperties: [String: String] = [:]
    var readAhead = 1000
    /// Seconds to wait for the last acknowledgements.
    var timeout: Double = 30
    /// Seconds between progress lines; 0 = none.
    var progressInterval: Double = 5

    /// Whether source and destination are the same cluster (then the topics must differ).
    var sameCluster: Bool { toBootstrap == nil || toBootstrap == bootstrap }

    init(bootstrap: String, from: String, to: String) {
        self.bootstrap = bootstrap
        self.from = from
        self.to = to
    }

    static func parse(_ arguments: [String]) throws -> ReplayOptions {
        var args = Arguments(arguments)
        let bootstrap = try args.option("bootstrap") ?? args.option("brokers")
        let toBootstrap = try args.option("to-bootstrap")
        let from = try args.option("from")
        let to = try args.option("to")
        let partitions = try args.option("partitions").map(parsePartitions)
        let startOffset = try args.int("start-offset")
        let endOffset = try args.int("end-offset")
        let startTime = try args.option("start-time").map { try parseTime($0, option: "start-time") }
        let endTime = try args.option("end-time").map { try parseTime($0, option: "end-time") }
        let count = try args.int("count")
        let speed = try args.double("speed")
        let keepPartition = args.flag("keep-partition")
        let properties = try parseProperties(try args.options("property"), option: "property")
        let toProperties = try parseProperties(try args.options("to-property"), option: "to-property")
        let readAhead = try args.int("read-ahead")
        let timeout = try args.double("timeout")
        let progress = try args.double("progress")
        try args.finish()

        guard let bootstrap, !bootstrap.isEmpty else {
            throw UsageError("--bootstrap <servers> is required (the source cluster, e.g. the address 'fanout broker' prints)")
        }
        if let toBootstrap, toBootstrap.isEmpty { throw UsageError("--to-bootstrap must not be empty") }
        guard let from, !from.isEmpty else { throw UsageError("--from <topic> is required (the topic to copy from)") }
        guard let to, !to.isEmpty else { throw UsageError("--to <topic> is required (the topic to copy to)") }
        var options = ReplayOptions(bootstrap: bootstrap, from: from, to: to)
        options.toBootstrap = toBootstrap
        if options.sameCluster, from == to {
            throw UsageError("--from and --to are both '\(from)' on the same cluster; copy to another topic or give --to-bootstrap")
        }
        if startOffset != nil, startTime != nil { throw UsageError("give --start-offset or --start-time, not both") }
        if endOffset != nil, endTime != nil { throw UsageError("give --end-offset or --end-time, not both") }
        if let startOffset, startOffset < 0 { throw UsageError("--start-offset must be 0 or more, got \(startOffset)") }
        if let endOffset, endOffset < 0 { throw UsageError("--end-offset must be 0 or more, got \(endOffset)") }
        if let startOffset, let endOffset, endOffset <= startOffset {
            throw UsageError("--end-offset (\(endOffset)) must be greater than --start-offset (\(startOffset)): the end is exclusive")
        }
        if let startTime, let endTime, endTime <= startTime {
            throw UsageError("--end-time must be later than --start-time: the end is exclusive")
        }
        if let count, count <= 0 { throw UsageError("--count must be a positive whole number, got \(count)") }
        if let speed, speed < 0 { throw UsageError("--speed must be 0 (as fast as possible) or a positive factor, got \(speed)") }
        if let readAhead, readAhead <= 0 { throw UsageError("--read-ahead must be a positive whole number, got \(readAhead)") }
        if let timeout, timeout <= 0 { throw UsageError("--timeout must be positive, got \(timeout)") }
        if let progress, progress < 0 { throw UsageError("--progress must be 0 (none) or a number of seconds, got \(progress)") }
        options.partitions = partitions
        options.startOffset = startOffset.map(Int64.init)
        options.endOffset = endOffset.map(Int64.init)
        options.startTime = startTime
        options.endTime = endTime
        options.count = count
        options.speed = speed ?? 1
        options.keepPartition = keepPartition
        options.properties = properties
        options.toProperties = toProperties
        options.readAhead = readAhead ?? 1000
        options.timeout = timeout ?? 30
        options.progressInterval = progress ?? 5
        return options
    }

    /// `0,3,7`: distinct partition numbers.
    static func parsePartitions(_ text: String) throws -> [Int32] {
        var seen: [Int32] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let trimmed = part.trimmingCharacters(in: .whitespaces)
            guard let number = Int32(trimmed), number >= 0 else {
                throw UsageError("--partitions expects partition numbers separated by commas (e.g. 0,3), got '\(text)'")
            }
            guard !seen.contains(number) else { throw UsageError("--partitions names partition \(number) twice") }
            seen.append(number)
        }
        return seen
    }

    /// UNIX seconds (fractions allowed) or ISO 8601 with a zone (`2026-03-01T12:00:00Z`,
    /// `2026-03-01T12:00:00.250+01:00`), as milliseconds since the epoch.
    static func parseTime(_ text: String, option: String) throws -> Int64 {
        if let seconds = Double(text), seconds.isFinite {
            guard seconds >= 0 else { throw UsageError("--\(option) must not be before 1970, got '\(text)'") }
            return Int64((seconds * 1000).rounded())
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        var date = formatter.date(from: text)
        if date == nil {
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            date = formatter.date(from: text)
        }
        guard let date else {
            throw UsageError("--\(option) expects UNIX seconds or an ISO 8601 time with a zone (e.g. 2026-03-01T12:00:00Z), got '\(text)'")
        }
        return Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    static func parseProperties(_ values: [String], option: String) throws -> [String: String] {
        var properties: [String: String] = [:]
        for property in values {
            guard let equals = property.firstIndex(of: "="), equals != property.startIndex else {
                throw UsageError("--\(option) expects name=value, got '\(property)'")
            }
            properties[String(property[..<equals])] = String(property[property.index(after: equals)...])
        }
        return properties
    }
}
