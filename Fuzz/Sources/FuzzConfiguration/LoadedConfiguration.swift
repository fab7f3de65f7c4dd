@testable import FanoutWorker
import Foundation
import FuzzSupport

/// What a loaded configuration promises: the README's "Configuration" table, and `--print-config`
/// listing every key the loader read.
enum LoadedConfiguration {
    static func check(_ c: FanoutConfiguration, asked: [String]) {
        let printed = Set(c.describe().split(separator: "\n").map { String($0.prefix { $0 != " " }) })
        for key in asked {
            Property.require(printed.contains(key) || printed.contains { $0.hasPrefix(key + ".") || $0.hasPrefix(key + "[") },
                             "\(key) is read but not printed by --print-config")
        }

        Property.require(!c.apps.isEmpty, "at least one app")
        Property.require(Set(c.apps.map(\.bundleID)).count == c.apps.count, "no app configured twice")
        for app in c.apps {
            Property.require(Contract.isBundleID(app.bundleID), "bundle id \(app.bundleID) is letters, digits, '.', '-'")
            Property.require(isAppleID(app.teamID) && isAppleID(app.keyID), "team and key ids are 10 of A–Z, 0–9")
            Property.require(FileManager.default.isReadableFile(atPath: app.keyPath), "the key file \(app.keyPath) is readable")
            for channel in app.broadcastChannels.keys {
                Property.require(Contract.isBase64(channel), "a configured channel id is base64 (the schema's pattern)")
            }
        }

        let topics = [c.kafka.topics.activityUpdates, c.kafka.topics.broadcastUpdates, c.kafka.topics.activityTokens, c.kafka.topics.activityTokenFeedback]
        Property.require(Set(topics).count == topics.count, "topic names are distinct")
        for owned in FanoutConfiguration.ownedKafkaProperties.keys {
            Property.require(c.kafka.properties[owned] == nil, "\(owned) is Fanout's, never passed through")
        }
        Property.require(c.kafka.properties["isolation.level"].map { $0.trimmingCharacters(in: .whitespaces).lowercased() == "read_committed" } ?? true,
                         "only read_committed")
        if let instance = c.kafka.groupInstanceID {
            Property.require(FanoutConfiguration.groupInstanceIDProblem(instance) == nil, "group instance id \(instance) is one Kafka accepts")
        }

        within(c.kafka.commitInterval, .milliseconds(100), .seconds(60), "kafka.commit_interval")
        Property.require(c.apns.port == 443 || c.apns.port == 2197, "apns.port is 443 or 2197")
        within(c.apns.requestTimeout, .seconds(1), .seconds(120), "apns.request_timeout")
        within(c.apns.laneFailingAfter, .seconds(1), .seconds(3600), "apns.lane_failing_after")
        within(c.apns.jwtRefreshInterval, .seconds(20 * 60), .seconds(60 * 60), "apns.jwt_refresh_interval")
        for lane in [c.apns.activity, c.apns.broadcast] {
            Property.require((1...64).contains(lane.connections) && lane.maxInFlight >= 1 && lane.maxQueued >= 0, "lane sizes in range")
        }
        if c.apns.caFile != nil {
            Property.require(c.apns.baseURL != nil || c.apns.managementBaseURL != nil, "a CA file only with a custom endpoint")
        }
        for budget in [c.engine.standard, c.engine.frequent, c.engine.broadcast] {
            within(budget.minInterval, .milliseconds(100), .seconds(3600), "min_interval")
        }
        within(c.engine.maxQuiet, .seconds(1), .seconds(3600), "engine.max_quiet")
        within(c.engine.defaultStaleAfter, .seconds(1), .seconds(8 * 3600), "engine.default_stale_after")
        within(c.engine.tokenWait, .zero, .seconds(3600), "engine.token_wait")
        within(c.engine.backoffCap, .seconds(1), .seconds(3600), "engine.backoff_cap")
        within(c.engine.recoveryRamp, .zero, .seconds(600), "engine.recovery_ramp")
        within(c.engine.endedRetention, .zero, .seconds(24 * 3600), "engine.ended_retention")
        Property.require(c.engine.minProgressDelta.isFinite && c.engine.minProgressDelta >= 0, "engine.min_progress_delta is a non-negative number")
        Property.require((1024...(16 * 1024 * 1024)).contains(c.engine.maxEventBytes), "engine.max_event_bytes in range")
        Property.require((1_000...100_000_000).contains(c.engine.maxTrackedTargets), "engine.max_tracked_targets in range")
        for (type, fields) in c.engine.progressFields {
            Property.require(fields.count <= 32 && Set(fields).count == fields.count, "progress fields of \(type): at most 32, distinct")
        }
        Property.require((0.05...0.95).contains(c.backpressure.resumeRatio), "backpressure.resume_ratio in range")
        within(c.shutdownTimeout, .seconds(1), .seconds(600), "shutdown_timeout")
    }

    static func within(_ value: Duration, _ low: Duration, _ high: Duration, _ key: String) {
        Property.require(value >= low && value <= high, "\(key) \(value) is within \(low)…\(high)")
    }

    static func isAppleID(_ text: String) -> Bool {
        text.utf8.count == 10 && text.utf8.allSatisfy { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }
}
