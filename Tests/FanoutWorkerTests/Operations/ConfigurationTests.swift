import FanoutCore
import Foundation
import Testing
@testable import FanoutWorker

/// A temporary directory with a fake key file and helpers to write a config file into it.
final class ConfigFixture {
    let directory: URL
    let keyPath: String

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        keyPath = directory.appendingPathComponent("AuthKey_ABCDE12345.p8").path
        try Data("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n".utf8).write(to: URL(fileURLWithPath: keyPath))
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    var appJSON: String {
        #"{"bundle_id": "com.example.exports", "team_id": "TEAM123456", "key_id": "ABCDE12345", "key_path": "\#(keyPath)"}"#
    }

    func write(_ json: String) throws -> String {
        let path = directory.appendingPathComponent("fanout-\(UUID().uuidString).json").path
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A file with one valid app plus `extra` top-level members (JSON text without braces).
    func file(_ extra: String = "") throws -> String {
        try write("{\"apps\": [\(appJSON)]" + (extra.isEmpty ? "" : ", " + extra) + "}")
    }
}

func loadError(_ path: String?, _ environment: [String: String] = [:]) -> ConfigurationError? {
    do {
        _ = try FanoutConfiguration.load(path: path, environment: environment)
        return nil
    } catch let error as ConfigurationError {
        return error
    } catch {
        Issue.record("unexpected error type: \(error)")
        return nil
    }
}

@Suite struct ConfigurationTests {
    @Test func defaultsMatchDesign() throws {
        let fixture = try ConfigFixture()
        let config = try FanoutConfiguration.load(path: try fixture.file(), environment: [:])
        #expect(config.kafka.groupID == "fanout")
        #expect(config.kafka.topics.activityUpdates == "activity-updates")
        #expect(config.kafka.topics.broadcastUpdates == "broadcast-updates")
        #expect(config.kafka.topics.activityTokens == "activity-tokens")
        #expect(config.kafka.topics.activityTokenFeedback == "activity-token-feedback")
        #expect(config.kafka.topics.deadLetterTopic(for: "activity-updates") == "activity-updates-dlq")
        #expect(config.engine.standard.minInterval == .seconds(1))
        #expect(config.engine.standard.priority10PerHour == 12)
        #expect(config.engine.standard.priority10Burst == 4)
        #expect(config.engine.maxQuiet == .seconds(30))
        #expect(config.engine.defaultStaleAfter == .seconds(15 * 60))
        #expect(config.engine.tokenWait == .seconds(30))
        #expect(config.engine.maxEventBytes == 65_536)
        #expect(config.engine.endedRetention == .seconds(600) && config.engine.maxTrackedTargets == 1_000_000)
        #expect(config.apns.jwtRefreshInterval == .seconds(50 * 60))
        #expect(config.apns.port == 443)
        #expect(config.apns.baseURL == nil)
        #expect(config.shutdownTimeout == .seconds(20))
        #expect(config.logLevel == .info)
        #expect(config.apps.count == 1)
        #expect(config.apps[0].environment == .production)
        #expect(config.apps[0].frequentUpdates == false)
        #expect(config.kafka.properties == ["fetch.wait.max.ms": "10", "isolation.level": "read_committed", "reconnect.backoff.max.ms": "1000",
                                            "queued.max.messages.kbytes": "16384", "linger.ms": "50"])
        #expect(config.backpressure.maxInFlight == 20_000)
        #expect(config.apns.activity.maxQueued >= config.backpressure.maxInFlight - config.apns.activity.maxInFlight)
    }

    @Test func defaultsInCodeEqualLoadedDefaults() throws {
        let fixture = try ConfigFixture()
        var loaded = try FanoutConfiguration.load(path: try fixture.file(), environment: [:])
        let app = FanoutConfiguration.App(bundleID: "com.example.exports", teamID: "TEAM123456", keyID: "ABCDE12345", keyPath: fixture.keyPath)
        var inCode = FanoutConfiguration.defaults(apps: [app])
        #expect(loaded.apps == [app])
        loaded.knobs = []
        inCode.knobs = []
        #expect(inCode == loaded)
    }

    @Test func environmentOverridesFile() throws {
        let fixture = try ConfigFixture()
        let path = try fixture.file(#""apns": {"activity": {"connections": 3}, "port": 2197}, "log_level": "warning""#)
        let config = try FanoutConfiguration.load(path: path, environment: [
            "FANOUT_APNS__ACTIVITY__CONNECTIONS": "5",
            "FANOUT_LOG_LEVEL": "debug",
            "FANOUT_APPS__0__ENVIRONMENT": "sandbox",
            "FANOUT_ENGINE__MIN_INTERVAL": "2s",
            "FANOUT_CONFIG": "/ignored/not/a/knob.json",
            "HOME": "/root",
        ])
        #expect(config.apns.activity.connections == 5)
        #expect(config.apns.port == 2197)  // from the file, no env override
        #expect(config.logLevel == .debug)
        #expect(config.apps[0].environment == .sandbox)
        #expect(config.engine.standard.minInterval == .seconds(2))
        let knob = try #require(config.knobs.first { $0.key == "apns.activity.connections" })
        #expect(knob.source == .environment(variable: "FANOUT_APNS__ACTIVITY__CONNECTIONS"))
        #expect(config.knobs.first { $0.key == "apns.port" }?.source == .file(path: path))
        #expect(config.knobs.first { $0.key == "apns.request_timeout" }?.source == .defaultValue)
    }

    @Test func appsFromEnvironmentOnly() throws {
        let fixture = try ConfigFixture()
        let config = try FanoutConfiguration.load(path: nil, environment: [
            "FANOUT_APPS__0__BUNDLE_ID": "com.example.a",
            "FANOUT_APPS__0__TEAM_ID": "TEAM123456",
            "FANOUT_APPS__0__KEY_ID": "ABCDE12345",
            "FANOUT_APPS__0__KEY_PATH": fixture.keyPath,
            "FANOUT_APPS__1": #"{"bundle_id":"com.example.b","team_id":"TEAM123456","key_id":"ABCDE12345","key_path":"\#(fixture.keyPath)","frequent_updates":true}"#,
        ])
        #expect(config.apps.map(\.bundleID) == ["com.example.a", "com.example.b"])
        #expect(config.apps[1].frequentUpdates)
        #expect(config.budget(for: config.apps[1], broadcast: false) == config.engine.frequent)
        #expect(config.budget(for: config.apps[0], broadcast: false) == config.engine.standard)
        #expect(config.budget(for: config.apps[0], broadcast: true) == config.engine.broadcast)
    }

    @Test func kafkaPropertiesPassThrough() throws {
        let fixture = try ConfigFixture()
        let path = try fixture.file(#""kafka": {"bootstrap_servers": "b1:9093", "properties": {"security.protocol": "SASL_SSL", "fetch.wait.max.ms": 50, "sasl.password": "from-file"}}"#)
        let config = try FanoutConfiguration.load(path: path, environment: [
            "FANOUT_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
            "FANOUT_KAFKA__SASL_PASSWORD": "s3cr3t-env",
            "FANOUT_KAFKA__PROPERTIES__SSL_CA_LOCATION": "/etc/ssl/ca.pem",
            "FANOUT_KAFKA__PROPERTIES": #"{"client.id": "fanout-7"}"#,
            "FANOUT_KAFKA__GROUP_ID": "fanout-blue",
        ])
        #expect(config.kafka.bootstrapServers == "b1:9093")
        #expect(config.kafka.groupID == "fanout-blue")
        #expect(config.kafka.properties == [
            "security.protocol": "SASL_SSL",
            "fetch.wait.max.ms": "50",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.password": "s3cr3t-env",
            "ssl.ca.location": "/etc/ssl/ca.pem",
            "client.id": "fanout-7",
            "isolation.level": "read_committed",   // defaults the file did not restate
            "reconnect.backoff.max.ms": "1000",
            "queued.max.messages.kbytes": "16384",
            "linger.ms": "50",
        ])
        let described = config.describe()
        #expect(!described.contains("s3cr3t-env"))
        #expect(!described.contains("from-file"))
        #expect(described.contains("kafka.properties.sasl.password"))
        #expect(described.contains("<redacted>"))
        #expect(described.contains("SCRAM-SHA-512"))
        #expect(described.contains("env FANOUT_KAFKA__SASL_MECHANISM"))
    }

    @Test func fanoutOwnedKafkaPropertiesAreRejected() throws {
        let fixture = try ConfigFixture()
        let error = try #require(loadError(try fixture.file(), ["FANOUT_KAFKA__ENABLE_AUTO_COMMIT": "true"]))
        #expect(error.issues.map(\.key) == ["kafka.properties.enable.auto.commit"])
        #expect(error.description.contains("FANOUT_KAFKA__ENABLE_AUTO_COMMIT"))
    }

    @Test func describeListsEveryKnobWithSource() throws {
        let fixture = try ConfigFixture()
        let config = try FanoutConfiguration.load(path: try fixture.file(), environment: ["FANOUT_ADMIN__PORT": "0"])
        let lines = config.describe().split(separator: "\n")
        #expect(lines.count == config.knobs.count)
        for key in ["kafka.bootstrap_servers", "apps[0].key_path", "apns.jwt_refresh_interval", "engine.push_to_start.burst",
                    "backpressure.max_in_flight", "shutdown_timeout", "admin.port", "log_level", "engine.frequent.priority10_per_hour"] {
            #expect(lines.contains { $0.hasPrefix(key + " ") }, "missing \(key)")
        }
        #expect(lines.contains { $0.hasPrefix("admin.port ") && $0.hasSuffix("# env FANOUT_ADMIN__PORT") })
        #expect(lines.contains { $0.hasPrefix("apns.jwt_refresh_interval ") && $0.contains("50m") && $0.hasSuffix("# default") })
    }

    @Test func perAppAttributeOverrides() throws {
        let fixture = try ConfigFixture()
        let app = #"{"bundle_id": "com.example.a", "team_id": "TEAM123456", "key_id": "ABCDE12345", "key_path": "\#(fixture.keyPath)", "attributes": {"ExportAttributes": {"progress_fields": ["done"], "stale_after": "5m"}}}"#
        let path = try fixture.write(#"{"apps": [\#(app)], "engine": {"progress_fields": {"ExportAttributes": ["percent"], "RideAttributes": ["eta"], "*": ["progress"]}}}"#)
        let config = try FanoutConfiguration.load(path: path, environment: [:])
        let a = config.apps[0]
        #expect(config.progressFields(app: a, attributesType: "ExportAttributes") == ["done"])
        #expect(config.progressFields(app: a, attributesType: "RideAttributes") == ["eta"])
        #expect(config.progressFields(app: a, attributesType: "Other") == ["progress"])
        #expect(config.staleAfter(app: a, attributesType: "ExportAttributes") == .seconds(300))
        #expect(config.staleAfter(app: a, attributesType: "RideAttributes") == .seconds(900))
    }
}

extension ConfigurationTests {
    @Test func broadcastChannelPoliciesPerApp() throws {
        let fixture = try ConfigFixture()
        let app = #"{"bundle_id": "com.example.a", "team_id": "TEAM123456", "key_id": "ABCDE12345", "key_path": "\#(fixture.keyPath)", "broadcast_channels": {"AAAAAAAAAAAAAAAAAAAAAA==": "most-recent", "AAAAAAAAAAAAAAAAAAAAAQ==": "none"}}"#
        let config = try FanoutConfiguration.load(path: try fixture.write(#"{"apps": [\#(app)]}"#), environment: [:])
        #expect(config.apps[0].broadcastChannels == ["AAAAAAAAAAAAAAAAAAAAAA==": .mostRecent, "AAAAAAAAAAAAAAAAAAAAAQ==": .none])
        let settings = WorkerSettings(configuration: config, options: WorkerOptions())
        #expect(settings.configuredChannelPolicies == [.init(app: "com.example.a", channel: "AAAAAAAAAAAAAAAAAAAAAA=="): .mostRecent,
                                                       .init(app: "com.example.a", channel: "AAAAAAAAAAAAAAAAAAAAAQ=="): .noStorage])

        let bad = #"{"bundle_id": "com.example.a", "team_id": "TEAM123456", "key_id": "ABCDE12345", "key_path": "\#(fixture.keyPath)", "broadcast_channels": {"not base64!": "none", "AAAAAAAAAAAAAAAAAAAAAA==": "stored"}}"#
        let error = try #require(loadError(try fixture.write(#"{"apps": [\#(bad)]}"#)))
        #expect(error.issues.map(\.key).sorted() == ["apps[0].broadcast_channels.AAAAAAAAAAAAAAAAAAAAAA==", "apps[0].broadcast_channels.not base64!"])
        #expect(error.description.contains("\"most-recent\""))
    }

    @Test func perAppStaleAfterIsAppliedToEventsWithoutStaleDate() throws {
        let fixture = try ConfigFixture()
        let single = #"{"bundle_id": "com.example.a", "team_id": "TEAM123456", "key_id": "ABCDE12345", "key_path": "\#(fixture.keyPath)", "attributes": {"ExportAttributes": {"stale_after": "5m"}}}"#
        let multi = #"{"bundle_id": "com.example.b", "team_id": "TEAM123456", "key_id": "ABCDE12345", "key_path": "\#(fixture.keyPath)", "attributes": {"RideAttributes": {"stale_after": "2m"}, "FoodAttributes": {"progress_fields": ["eta"]}}}"#
        let config = try FanoutConfiguration.load(path: try fixture.write(#"{"apps": [\#(single), \#(multi)]}"#), environment: [:])
        let settings = WorkerSettings(configuration: config, options: WorkerOptions())
        func event(app: String, kind: EventKind = .update, type: String? = nil, stale: Int64? = nil) -> ActivityEvent {
            var event = ActivityEvent(id: "e", app: app, lane: .activity, target: "k", kind: kind, timestamp: 1_800_000_000,
                                      contentState: RawJSON(bytes: Array("{}".utf8)), staleDate: stale)
            event.attributesType = type
            settings.applyStaleAfter(to: &event)
            return event
        }
        // The app's only type applies to its updates; the producer's own stale date wins.
        #expect(event(app: "com.example.a").staleDate == 1_800_000_300)
        #expect(event(app: "com.example.a", stale: 1_800_000_050).staleDate == 1_800_000_050)
        // Several types: a start names its type; an update cannot, so the engine default applies.
        #expect(event(app: "com.example.b", kind: .start, type: "RideAttributes").staleDate == 1_800_000_120)
        #expect(event(app: "com.example.b").staleDate == nil)
        #expect(event(app: "com.example.b", kind: .start, type: "FoodAttributes").staleDate == nil)
    }

    @Test func backoffCapReachesTheEngine() throws {
        let fixture = try ConfigFixture()
        let defaults = try FanoutConfiguration.load(path: try fixture.file(), environment: [:])
        #expect(defaults.engine.backoffCap == .seconds(300))
        #expect(WorkerSettings(configuration: defaults, options: WorkerOptions()).engine.backoffCap == EngineConfiguration().backoffCap)
        let config = try FanoutConfiguration.load(path: try fixture.file(), environment: ["FANOUT_ENGINE__BACKOFF_CAP": "30s"])
        #expect(WorkerSettings(configuration: config, options: WorkerOptions()).engine.backoffCap == Nanoseconds.seconds(30))
        let error = try #require(loadError(try fixture.file(#""engine": {"backoff_cap": "0s"}"#)))
        #expect(error.issues.map(\.key) == ["engine.backoff_cap"])
    }

    @Test func recoveryRampReachesTheEngine() throws {
        let fixture = try ConfigFixture()
        let defaults = try FanoutConfiguration.load(path: try fixture.file(), environment: [:])
        #expect(WorkerSettings(configuration: defaults, options: WorkerOptions()).engine.recoveryRamp == Nanoseconds.seconds(10))
        let config = try FanoutConfiguration.load(path: try fixture.file(#""engine": {"recovery_ramp": "2s"}"#), environment: [:])
        #expect(WorkerSettings(configuration: config, options: WorkerOptions()).engine.recoveryRamp == Nanoseconds.seconds(2))
        let zero = try FanoutConfiguration.load(path: try fixture.file(), environment: ["FANOUT_ENGINE__RECOVERY_RAMP": "0s"])
        #expect(WorkerSettings(configuration: zero, options: WorkerOptions()).engine.recoveryRamp == 0)
        let error = try #require(loadError(try fixture.file(#""engine": {"recovery_ramp": "1h"}"#)))
        #expect(error.issues.map(\.key) == ["engine.recovery_ramp"])
    }
}

@Suite struct ConfigurationValidationTests {
    /// Loads and returns the keys of the issues, expecting failure.
    func keys(_ fixture: ConfigFixture, _ extra: String, _ env: [String: String] = [:]) throws -> [String] {
        guard let error = loadError(try fixture.file(extra), env) else { return ["<loaded without error>"] }
        return error.issues.map(\.key)
    }

    @Test func unknownKeyIsNamedWithSuggestion() throws {
        let fixture = try ConfigFixture()
        let error = try #require(loadError(try fixture.file(#""apns": {"conections": 4}"#)))
        // "conections" is not a key of apns; its lanes have "connections" but apns itself does not.
        #expect(error.issues.map(\.key) == ["apns.conections"])
        let typo = try #require(loadError(try fixture.file(#""engine": {"max_quite": "10s"}"#)))
        #expect(typo.issues.map(\.key) == ["engine.max_quite"])
        #expect(typo.description.contains("did you mean \"engine.max_quiet\""))
    }

    /// Found by the configuration fuzzer: an empty key was reported with an empty name (": unknown key").
    @Test func anEmptyOrDottedUnknownKeyIsNamedQuoted() throws {
        let fixture = try ConfigFixture()
        let empty = try #require(loadError(try fixture.file(#""": [1]"#)))
        #expect(empty.issues.map(\.key) == [#""""#])
        #expect(empty.description.contains(#""": unknown key"#))
        let dotted = try #require(loadError(try fixture.file(#""engine": {"a.b": 1, "new\nline": 2}"#)))
        #expect(dotted.issues.map(\.key).sorted() == [#"engine."a.b""#, #"engine."new\u{a}line""#])
    }

    @Test func unknownEnvironmentVariableIsNamed() throws {
        let fixture = try ConfigFixture()
        let error = try #require(loadError(try fixture.file(), ["FANOUT_APNS__ACTIVITY__CONECTIONS": "4"]))
        #expect(error.issues.map(\.key) == ["apns.activity.conections"])
        #expect(error.description.contains("FANOUT_APNS__ACTIVITY__CONECTIONS"))
        #expect(error.description.contains("did you mean \"apns.activity.connections\""))
    }

    @Test func jwtRefreshOutOfRange() throws {
        let fixture = try ConfigFixture()
        let error = try #require(loadError(try fixture.file(#""apns": {"jwt_refresh_interval": "70m"}"#)))
        #expect(error.issues.map(\.key) == ["apns.jwt_refresh_interval"])
        #expect(error.description.contains("1h10m"))
        #expect(error.description.contains("20m…1h"))
        #expect(try keys(fixture, "", ["FANOUT_APNS__JWT_REFRESH_INTERVAL": "10m"]) == ["apns.jwt_refresh_interval"])
        #expect(try FanoutConfiguration.load(path: try fixture.file(), environment: ["FANOUT_APNS__JWT_REFRESH_INTERVAL": "20m"]).apns.jwtRefreshInterval == .seconds(1200))
    }

    /// `/livez` must not take a worker waiting on a backed-off retry for a stuck one.
    @Test func aLivenessWindowShorterThanTheLongestLegitimateWaitIsRefused() throws {
        let fixture = try ConfigFixture()
        let error = try #require(loadError(try fixture.file(#""admin": {"liveness_window": "5m"}"#)))
        #expect(error.issues.map(\.key) == ["admin.liveness_window"])
        #expect(error.description.contains("engine.backoff_cap"), "\(error)")
        #expect(error.description.contains("5m30s"), "\(error)")  // backoff_cap 5m + token_wait 30s
        #expect(try keys(fixture, #""engine": {"backoff_cap": "1m"}"#, ["FANOUT_ADMIN__LIVENESS_WINDOW": "1m"]) == ["admin.liveness_window"])
        let loaded = try FanoutConfiguration.load(path: try fixture.file(#""engine": {"backoff_cap": "1m"}"#),
                                                  environment: ["FANOUT_ADMIN__LIVENESS_WINDOW": "2m"])
        #expect(loaded.admin.livenessWindow == .seconds(120))
        #expect(try FanoutConfiguration.load(path: try fixture.file()).admin.livenessWindow == .seconds(600))
    }

    @Test func missingKeyFileNamesThePath() throws {
        let fixture = try ConfigFixture()
        let error = try #require(loadError(try fixture.file(), ["FANOUT_APPS__0__KEY_PATH": "/nonexistent/AuthKey.p8"]))
        #expect(error.issues.map(\.key) == ["apps[0].key_path"])
        #expect(error.description.contains("/nonexistent/AuthKey.p8"))
        #expect(error.issues.first?.source == .environment(variable: "FANOUT_APPS__0__KEY_PATH"))
    }

    @Test func missingConfigFileNamesThePath() throws {
        let error = try #require(loadError("/nonexistent/fanout.json"))
        #expect(error.description.contains("/nonexistent/fanout.json"))
        let fixture = try ConfigFixture()
        let broken = try #require(loadError(try fixture.write("{\"apps\": [")))
        #expect(broken.issues.map(\.key) == ["config file"])
        #expect(broken.description.contains("not valid JSON"))
    }

    @Test func eachBadValueNamesItsKey() throws {
        let fixture = try ConfigFixture()
        let cases: [(String, [String: String], String)] = [
            (#""apns": {"port": 8443}"#, [:], "apns.port"),
            ("", ["FANOUT_APPS__0__ENVIRONMENT": "staging"], "apps[0].environment"),
            ("", ["FANOUT_APPS__0__TEAM_ID": "short"], "apps[0].team_id"),
            ("", ["FANOUT_APPS__0__KEY_ID": "abcde12345"], "apps[0].key_id"),
            ("", ["FANOUT_APPS__0__FREQUENT_UPDATES": "maybe"], "apps[0].frequent_updates"),
            ("", ["FANOUT_ENGINE__MIN_INTERVAL": "soon"], "engine.min_interval"),
            ("", ["FANOUT_ENGINE__PRIORITY10_PER_HOUR": "-1"], "engine.priority10_per_hour"),
            ("", ["FANOUT_ENGINE__MAX_EVENT_BYTES": "12.5"], "engine.max_event_bytes"),
            ("", ["FANOUT_ENGINE__MIN_PROGRESS_DELTA": "x"], "engine.min_progress_delta"),
            ("", ["FANOUT_BACKPRESSURE__RESUME_RATIO": "1.5"], "backpressure.resume_ratio"),
            ("", ["FANOUT_SHUTDOWN_TIMEOUT": "0s"], "shutdown_timeout"),
            ("", ["FANOUT_ADMIN__PORT": "70000"], "admin.port"),
            ("", ["FANOUT_LOG_LEVEL": "verbose"], "log_level"),
            ("", ["FANOUT_APNS__BASE_URL": "http://127.0.0.1:8443"], "apns.base_url"),
            ("", ["FANOUT_APNS__CA_FILE": "/nonexistent/ca.pem", "FANOUT_APNS__BASE_URL": "https://127.0.0.1:8443"], "apns.ca_file"),
            (#""kafka": {"topics": {"activity_tokens": "activity-updates"}}"#, [:], "kafka.topics"),
            (#""kafka": {"group_id": 7}"#, [:], "kafka.group_id"),
            (#""engine": {"progress_fields": {"ExportAttributes": "percent"}}"#, [:], "engine.progress_fields.ExportAttributes"),
        ]
        for (extra, env, key) in cases {
            let found = try keys(fixture, extra, env)
            #expect(found == [key], "expected exactly \(key) for \(extra) \(env), got \(found)")
        }
    }

    /// TLS to Apple is verified against the system's CAs, always: a CA file is only for a custom endpoint
    /// (a simulator), is refused for any of Apple's hosts, and is not silently ignored without one.
    @Test func aCustomCAIsOnlyForCustomEndpoints() throws {
        let fixture = try ConfigFixture()
        let ca = fixture.keyPath   // any readable file: only its use is checked here
        let cases: [([String: String], [String])] = [
            (["FANOUT_APNS__CA_FILE": ca], ["apns.ca_file"]),
            (["FANOUT_APNS__CA_FILE": ca, "FANOUT_APNS__BASE_URL": "https://api.push.apple.com"], ["apns.base_url"]),
            (["FANOUT_APNS__CA_FILE": ca, "FANOUT_APNS__BASE_URL": "https://API.Sandbox.Push.Apple.com:2197"], ["apns.base_url"]),
            (["FANOUT_APNS__CA_FILE": ca, "FANOUT_APNS__BASE_URL": "https://127.0.0.1:8443",
              "FANOUT_APNS__MANAGEMENT_BASE_URL": "https://api-manage-broadcast.sandbox.push.apple.com.:2195"], ["apns.management_base_url"]),
            (["FANOUT_APNS__CA_FILE": ca, "FANOUT_APNS__BASE_URL": "https://127.0.0.1:8443"], ["<loaded without error>"]),
            (["FANOUT_APNS__BASE_URL": "https://api.push.apple.com"], ["<loaded without error>"]),
        ]
        for (env, expected) in cases {
            #expect(try keys(fixture, "", env) == expected, "\(env)")
        }
    }

    @Test func appsAreRequiredAndValidatedTogether() throws {
        let fixture = try ConfigFixture()
        let none = try #require(loadError(nil))
        #expect(none.issues.map(\.key) == ["apps"])
        let path = try fixture.write(#"{"apps": [{"bundle_id": "com.example.a"}, \#(fixture.appJSON), \#(fixture.appJSON)]}"#)
        let error = try #require(loadError(path))
        #expect(Set(error.issues.map(\.key)) == ["apps[0].team_id", "apps[0].key_id", "apps[0].key_path", "apps[2].bundle_id"])
    }

    @Test func listIndicesMustBeContiguous() throws {
        let fixture = try ConfigFixture()
        let error = try #require(loadError(try fixture.file(), ["FANOUT_APPS__3__BUNDLE_ID": "com.example.z"]))
        #expect(error.issues.map(\.key) == ["apps.3.bundle_id"])
        #expect(error.description.contains("skips index 1"))
    }

    @Test func collectsEveryProblemAtOnce() throws {
        let fixture = try ConfigFixture()
        let error = try #require(loadError(try fixture.file(#""apns": {"port": 1}, "engine": {"token_wait": "forever"}"#),
                                           ["FANOUT_ADMIN__PORT": "-3"]))
        #expect(Set(error.issues.map(\.key)) == ["apns.port", "engine.token_wait", "admin.port"])
        #expect(error.description.hasPrefix("invalid configuration (3 problems):"))
    }
}

@Suite struct DurationTextTests {
    @Test func parsesNumbersAndUnits() {
        #expect(DurationText.parse("30") == .seconds(30))
        #expect(DurationText.parse("1.5") == .milliseconds(1500))
        #expect(DurationText.parse("250ms") == .milliseconds(250))
        #expect(DurationText.parse("30s") == .seconds(30))
        #expect(DurationText.parse("50m") == .seconds(3000))
        #expect(DurationText.parse("1h") == .seconds(3600))
        #expect(DurationText.parse("1h30m") == .seconds(5400))
        #expect(DurationText.parse("1m30s500ms") == .milliseconds(90_500))
        #expect(DurationText.parse(" 2s ") == .seconds(2))
    }

    @Test func rejectsGarbage() {
        for text in ["", "s", "-1", "-5s", "10x", "1.2.3s", "1 h", "ms", "5m3", "inf", "nan"] {
            #expect(DurationText.parse(text) == nil, "\(text) should not parse")
        }
    }

    @Test func formatsCanonically() {
        #expect(DurationText.format(.seconds(3000)) == "50m")
        #expect(DurationText.format(.seconds(5400)) == "1h30m")
        #expect(DurationText.format(.milliseconds(1500)) == "1s500ms")
        #expect(DurationText.format(.zero) == "0s")
        for text in ["50m", "1h30m", "1s500ms", "250ms", "2h"] {
            #expect(DurationText.format(DurationText.parse(text)!) == text)
        }
    }

    @Test func jsonNumbersAreSeconds() throws {
        let fixture = try ConfigFixture()
        let config = try FanoutConfiguration.load(path: try fixture.file(#""engine": {"max_quiet": 45, "token_wait": 0.5}"#), environment: [:])
        #expect(config.engine.maxQuiet == .seconds(45))
        #expect(config.engine.tokenWait == .milliseconds(500))
    }
}

@Suite struct ConfigurationEnvironmentFormsTests {
    @Test func jsonValuedVariablesForMapsKeyedByTypeName() throws {
        let fixture = try ConfigFixture()
        // Type names are case-sensitive, and variable names are read in lower case: use the JSON form.
        let config = try FanoutConfiguration.load(path: try fixture.file(), environment: [
            "FANOUT_ENGINE__PROGRESS_FIELDS": #"{"ExportAttributes": ["percent", "done"]}"#,
        ])
        #expect(config.engine.progressFields == ["*": MeaningProfile.standardProgressFields, "ExportAttributes": ["percent", "done"]])
    }

    @Test func commaSeparatedListsOnlyFromEnvironment() throws {
        let fixture = try ConfigFixture()
        let config = try FanoutConfiguration.load(path: try fixture.file(), environment: [
            "FANOUT_ENGINE__PROGRESS_FIELDS": #"{"*": "ignored"}"#,
        ])
        // The JSON value came from the environment but the list inside is a JSON string, still env-sourced:
        #expect(config.engine.progressFields["*"] == ["ignored"])
        let invalid = try #require(loadError(try fixture.write(#"{"apps": [\#(fixture.appJSON)], "engine": {"progress_fields": {"*": "a,b"}}}"#)))
        #expect(invalid.issues.map(\.key) == ["engine.progress_fields.*"])
    }

    @Test func badJSONInVariableIsNamed() throws {
        let fixture = try ConfigFixture()
        let error = try #require(loadError(try fixture.file(), ["FANOUT_APPS": "[{oops"]))
        #expect(error.description.contains("FANOUT_APPS"))
        #expect(error.issues.map(\.key) == ["apps"])
    }

    @Test func emptySegmentIsRejected() throws {
        let fixture = try ConfigFixture()
        let error = try #require(loadError(try fixture.file(), ["FANOUT_APNS____PORT": "443"]))
        #expect(error.issues.map(\.key) == ["FANOUT_APNS____PORT"])
    }
}

@Suite struct ExampleConfigTests {
    /// `config/fanout.example.json`, found by walking up from this source file.
    static func examplePath() throws -> String {
        var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        for _ in 0..<6 {
            let candidate = directory.appendingPathComponent("config/fanout.example.json").path
            if FileManager.default.fileExists(atPath: candidate) { return candidate }
            directory.deleteLastPathComponent()
        }
        throw ConfigurationError(issues: [.init(key: "config/fanout.example.json", message: "not found above \(#filePath)", source: nil)])
    }

    @Test func exampleLoadsAndSetsEveryKnob() throws {
        let fixture = try ConfigFixture()
        let config = try FanoutConfiguration.load(path: try Self.examplePath(), environment: ["FANOUT_APPS__0__KEY_PATH": fixture.keyPath])
        // Every knob is written out in the example (optional ones as null, which reads as "none").
        let notFromFile = config.knobs.filter { $0.source == .defaultValue && $0.value != "(none)" }
        #expect(notFromFile.map(\.key) == [])
    }

    /// The example claims to show every default: each knob but the app entries (which have none) has
    /// the value `defaults()` gives it, and the example sets nothing `defaults()` does not know.
    @Test func exampleValuesAreTheDefaults() throws {
        let fixture = try ConfigFixture()
        let example = try FanoutConfiguration.load(path: try Self.examplePath(), environment: ["FANOUT_APPS__0__KEY_PATH": fixture.keyPath])
        let defaults = FanoutConfiguration.defaults()
        func values(_ configuration: FanoutConfiguration) -> [String: String] {
            Dictionary(configuration.knobs.filter { !$0.key.hasPrefix("apps[") }.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
        }
        let expected = values(defaults), actual = values(example)
        for key in Set(expected.keys).union(actual.keys).sorted() {
            #expect(actual[key] == expected[key], "\(key): example \(actual[key] ?? "absent"), default \(expected[key] ?? "absent")")
        }
        #expect(!expected.isEmpty)
        var withoutApps = example
        withoutApps.apps = []
        withoutApps.knobs = defaults.knobs
        #expect(withoutApps == defaults)
    }
}

@Suite struct PrintConfigTests {
    /// The printed keys, the first column of `describe()`.
    static func printedKeys(_ configuration: FanoutConfiguration) -> Set<String> {
        Set(configuration.describe().split(separator: "\n").map { String($0.prefix { $0 != " " }) })
    }

    /// Every key the loader asks for is printed, or is a section or list whose knobs are printed;
    /// the loader's own reads are the list, so a new knob cannot be left out of `--print-config`.
    @Test func everyKeyTheLoaderReadsIsPrinted() throws {
        let fixture = try ConfigFixture()
        let files = [try fixture.file(), try ExampleConfigTests.examplePath()]
        for path in files {
            let (configuration, asked) = try FanoutConfiguration.loadReadingKeys(path: path, environment: ["FANOUT_APPS__0__KEY_PATH": fixture.keyPath])
            let printed = Self.printedKeys(configuration)
            #expect(asked.count > 60)
            for key in asked {
                let covered = printed.contains(key) || printed.contains { $0.hasPrefix(key + ".") || $0.hasPrefix(key + "[") }
                #expect(covered, "\(key) is read from \(path) but not printed")
            }
        }
    }

    @Test func defaultProgressFieldsArePrintedWithTheirSource() throws {
        let fixture = try ConfigFixture()
        let lines = try FanoutConfiguration.load(path: try fixture.file(), environment: [:]).describe().split(separator: "\n")
        let line = try #require(lines.first { $0.hasPrefix("engine.progress_fields.* ") })
        #expect(line.contains("[" + MeaningProfile.standardProgressFields.joined(separator: ", ") + "]"))
        #expect(line.hasSuffix("# default"))
        let fetchWait = try #require(lines.first { $0.hasPrefix("kafka.properties.fetch.wait.max.ms ") })
        #expect(fetchWait.contains("10") && fetchWait.hasSuffix("# default"))
    }
}

@Suite struct DefaultProgressFieldsTests {
    @Test func aTypeListedReplacesTheDefaultForThatTypeOnly() throws {
        let fixture = try ConfigFixture()
        let config = try FanoutConfiguration.load(path: try fixture.file(#""engine": {"progress_fields": {"RideAttributes": ["eta"]}}"#), environment: [:])
        #expect(config.engine.progressFields == ["*": MeaningProfile.standardProgressFields, "RideAttributes": ["eta"]])
        #expect(config.progressFields(app: config.apps.first, attributesType: "RideAttributes") == ["eta"])
        #expect(config.progressFields(app: config.apps.first, attributesType: "Other") == MeaningProfile.standardProgressFields)
    }

    @Test func starReplacesTheDefaultProfile() throws {
        let fixture = try ConfigFixture()
        let none = try FanoutConfiguration.load(path: try fixture.file(#""engine": {"progress_fields": {"*": []}}"#), environment: [:])
        #expect(none.engine.progressFields == ["*": []])
        let settings = WorkerSettings(configuration: none, options: WorkerOptions(randomSeed: 1))
        #expect(settings.engine.defaultMeaning.progressFields == [])
    }

    @Test func tooManyOrRepeatedFieldsAreRejected() throws {
        let fixture = try ConfigFixture()
        let many = (0...MeaningProfile.maxProgressFields).map { "\"f\($0)\"" }.joined(separator: ", ")
        let tooMany = try #require(loadError(try fixture.file(#""engine": {"progress_fields": {"*": [\#(many)]}}"#)))
        #expect(tooMany.issues.map(\.key) == ["engine.progress_fields.*"])
        let twice = try #require(loadError(try fixture.file(#""engine": {"progress_fields": {"ExportAttributes": ["done", "done"]}}"#)))
        #expect(twice.issues.map(\.key) == ["engine.progress_fields.ExportAttributes"])
    }
}
