import APNsModel
import FanoutAPNs
import FanoutCore
import FanoutKafka
import Foundation

extension FanoutConfiguration {
    /// Loads the JSON file at `path` (nil = no file, defaults only), lays the `FANOUT_*` variables of
    /// `environment` over it (env wins), and validates every knob.
    ///
    /// Environment scheme: `FANOUT_` + key path in upper case with `__` between levels
    /// (`FANOUT_APNS__ACTIVITY__CONNECTIONS=4`, `FANOUT_LOG_LEVEL=debug`); list elements by index
    /// (`FANOUT_APPS__0__KEY_PATH=/keys/a.p8`); a value starting with `{` or `[` is JSON
    /// (`FANOUT_APPS='[{…}]'`). `FANOUT_KAFKA__<NAME>` where NAME is not one of Fanout's kafka keys
    /// is the librdkafka property with `_` read as `.` (`FANOUT_KAFKA__SASL_MECHANISM` → `sasl.mechanism`);
    /// `FANOUT_KAFKA__PROPERTIES='{"name":"value"}'` sets properties verbatim. `FANOUT_CONFIG` is not a knob.
    ///
    /// - Throws: `ConfigurationError` listing every problem with its key, value and source.
    public static func load(path: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> FanoutConfiguration {
        try loadReadingKeys(path: path, environment: environment).configuration
    }

    /// `load`, and every key the loader asked for (sections included): what `describe()` must cover.
    static func loadReadingKeys(path: String?, environment: [String: String],
                                librdkafka: LibrdkafkaVersion = .linked) throws -> (configuration: FanoutConfiguration, asked: [String]) {
        var root: ConfigNode = .object([:], .defaultValue)
        var issues: [ConfigurationError.Issue] = []
        if let path {
            guard FileManager.default.fileExists(atPath: path) else {
                throw ConfigurationError(issues: [.init(key: "config file", message: "\(path) does not exist", source: nil)])
            }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError(issues: [.init(key: "config file", message: "\(path) is not readable", source: nil)])
            }
            do {
                root = try ConfigJSON.parse(data, source: .file(path: path))
            } catch {
                throw ConfigurationError(issues: [.init(key: "config file", message: "\(path) is not valid JSON: \(Self.describeJSONError(error))", source: nil)])
            }
            guard case .object = root else {
                throw ConfigurationError(issues: [.init(key: "config file", message: "\(path) must hold a JSON object at the top level", source: nil)])
            }
        }
        EnvironmentOverlay.apply(environment, to: &root, issues: &issues)

        let context = ConfigReadContext(librdkafka: librdkafka)
        context.issues = issues
        let reader = ConfigReader(path: "", node: root, context: context)
        let configuration = read(reader)
        reader.finish()
        guard context.issues.isEmpty else { throw ConfigurationError(issues: context.issues) }
        var result = configuration
        result.knobs = context.knobs
        return (result, context.asked)
    }

    /// Every knob at its default, with `apps` as given and not checked (no file access): for
    /// `fanout demo` and tests that build a configuration in code. Mutate the result as needed.
    public static func defaults(apps: [App] = []) -> FanoutConfiguration {
        let context = ConfigReadContext()
        var configuration = read(ConfigReader(path: "", node: nil, context: context))
        configuration.apps = apps
        configuration.knobs = context.knobs
        return configuration
    }

    private static func describeJSONError(_ error: any Error) -> String {
        if case DecodingError.dataCorrupted(let context) = error {
            if let underlying = context.underlyingError { return "\(underlying)" }
            return context.debugDescription
        }
        return "\(error)"
    }

    // MARK: Sections

    private static func read(_ root: ConfigReader) -> FanoutConfiguration {
        let kafka = readKafka(root.child("kafka"))
        let apps = readApps(root)
        let apns = readAPNs(root.child("apns"))
        let engine = readEngine(root.child("engine"))
        let backpressure = readBackpressure(root.child("backpressure"))
        let shutdownTimeout = root.duration("shutdown_timeout", default: .seconds(20), range: .seconds(1)...(.seconds(600)))
        let admin = readAdmin(root.child("admin"), engine: engine)
        let logLevel = root.choice("log_level", default: LogLevel.info)
        return FanoutConfiguration(kafka: kafka, apps: apps, apns: apns, engine: engine, backpressure: backpressure,
                                   shutdownTimeout: shutdownTimeout, admin: admin, logLevel: logLevel, knobs: [])
    }

    private static func readApps(_ root: ConfigReader) -> [App] {
        guard let readers = root.objectList("apps"), !readers.isEmpty else {
            root.context.issue("apps", "at least one app is required: [{\"bundle_id\", \"team_id\", \"key_id\", \"key_path\"}] (or FANOUT_APPS__0__BUNDLE_ID=… etc.)", nil)
            return []
        }
        var apps: [App] = []
        var seen: Set<String> = []
        for r in readers {
            let bundle = r.requiredString("bundle_id", what: "the app's bundle id, e.g. com.example.exports") ?? ""
            if !bundle.isEmpty && !bundle.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }) {
                r.context.issue(r.key("bundle_id"), "\"\(bundle)\" is not a bundle id (letters, digits, '.', '-')", r.source(of: "bundle_id"))
            }
            if !bundle.isEmpty && !seen.insert(bundle).inserted {
                r.context.issue(r.key("bundle_id"), "\"\(bundle)\" is configured twice", r.source(of: "bundle_id"))
            }
            let team = r.requiredString("team_id", what: "10-character Apple Team ID") ?? ""
            if !team.isEmpty && !isAppleID(team) { r.context.issue(r.key("team_id"), "\"\(team)\" is not a 10-character Team ID (A–Z, 0–9)", r.source(of: "team_id")) }
            let keyID = r.requiredString("key_id", what: "10-character Key ID of the .p8 key") ?? ""
            if !keyID.isEmpty && !isAppleID(keyID) { r.context.issue(r.key("key_id"), "\"\(keyID)\" is not a 10-character Key ID (A–Z, 0–9)", r.source(of: "key_id")) }
            let keyPath = r.requiredString("key_path", what: "path of the AuthKey_<KEYID>.p8 file") ?? ""
            if !keyPath.isEmpty { checkReadableFile(keyPath, key: r.key("key_path"), what: "signing key", context: r.context, source: r.source(of: "key_path")) }
            let environment = r.choice("environment", default: APNsEnvironment.production)
            let frequent = r.bool("frequent_updates", default: false)
            var attributes: [String: AttributesSettings] = [:]
            let attributesReader = r.child("attributes")
            for type in attributesReader.fieldNames {
                let a = attributesReader.child(type)
                let fields = a.has("progress_fields") ? readProgressFields(a, "progress_fields", default: []) : nil
                if fields == nil { a.recordUnset("progress_fields", as: "(engine.progress_fields)") }
                let stale: Duration? = a.has("stale_after") ? a.duration("stale_after", default: .seconds(900), range: .seconds(1)...(.seconds(8 * 3600))) : nil
                if stale == nil { a.recordUnset("stale_after", as: "(engine.default_stale_after)") }
                a.finish()
                attributes[type] = AttributesSettings(progressFields: fields, staleAfter: stale)
            }
            if attributesReader.fieldNames.isEmpty { r.recordUnset("attributes", as: "{}") }
            attributesReader.finish()
            var channels: [String: ChannelStorage] = [:]
            let channelsReader = r.child("broadcast_channels")
            for channel in channelsReader.fieldNames {
                if !Base64URL.isStandardBase64(channel) {
                    r.context.issue(channelsReader.key(channel), "\"\(channel)\" is not a base64 channel id (as printed by fanout channels create)",
                                    channelsReader.source(of: channel))
                }
                channels[channel] = channelsReader.choice(channel, default: ChannelStorage.none)
            }
            if channelsReader.fieldNames.isEmpty { r.recordUnset("broadcast_channels", as: "{} (policies looked up)") }
            channelsReader.finish()
            r.finish()
            apps.append(App(bundleID: bundle, teamID: team, keyID: keyID, keyPath: keyPath, environment: environment,
                            frequentUpdates: frequent, attributes: attributes, broadcastChannels: channels))
        }
        return apps
    }

    static func isAppleID(_ text: String) -> Bool {
        text.count == 10 && text.allSatisfy { $0.isASCII && ($0.isUppercase || $0.isNumber) }
    }

    static func checkReadableFile(_ path: String, key: String, what: String, context: ConfigReadContext, source: ConfigSource?) {
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            context.issue(key, "\(what) file \(path) does not exist", source)
        } else if isDirectory.boolValue {
            context.issue(key, "\(path) is a directory, expected the \(what) file", source)
        } else if !FileManager.default.isReadableFile(atPath: path) {
            context.issue(key, "\(what) file \(path) is not readable by this process", source)
        }
    }

    private static func readAPNs(_ r: ConfigReader) -> APNs {
        let base = r.optionalString("base_url")
        if let base { checkURL(base, key: r.key("base_url"), context: r.context, source: r.source(of: "base_url")) }
        let management = r.optionalString("management_base_url")
        if let management { checkURL(management, key: r.key("management_base_url"), context: r.context, source: r.source(of: "management_base_url")) }
        let ca = r.optionalString("ca_file")
        if let ca { checkReadableFile(ca, key: r.key("ca_file"), what: "CA", context: r.context, source: r.source(of: "ca_file")) }
        checkCustomCA(ca, base: base, management: management, r)
        let port = r.int("port", default: 443, range: 1...65535)
        if port != 443 && port != 2197 {
            r.context.issue(r.key("port"), "\(port) is not an APNs port; allowed 443 or 2197 (for a simulator set apns.base_url)", r.source(of: "port"))
        }
        let timeout = r.duration("request_timeout", default: .seconds(10), range: .seconds(1)...(.seconds(120)))
        let refresh = r.duration("jwt_refresh_interval", default: .seconds(50 * 60), range: .seconds(20 * 60)...(.seconds(60 * 60)),
                                 why: " (Apple: refresh no more than once every 20 minutes and at least once every 60)")
        let failingAfter = r.duration("lane_failing_after", default: .seconds(30), range: .seconds(1)...(.seconds(3600)))
        let transport = r.choice("transport", default: APNsClientConfiguration.Transport.nghttp2)
        let activity = readLane(r.child("activity"), connections: 2, maxInFlight: 1000, maxQueued: 20_000)
        let broadcast = readLane(r.child("broadcast"), connections: 1, maxInFlight: 200, maxQueued: 20_000)
        r.finish()
        return APNs(baseURL: base, managementBaseURL: management, caFile: ca, port: port, requestTimeout: timeout,
                    laneFailingAfter: failingAfter, jwtRefreshInterval: refresh, transport: transport, activity: activity, broadcast: broadcast)
    }

    /// A CA file is trusted only for custom endpoints (a simulator, a test server): without one it would
    /// be ignored, and for Apple's hosts it is refused, so Apple is verified against the system's CAs only.
    private static func checkCustomCA(_ ca: String?, base: String?, management: String?, _ r: ConfigReader) {
        guard ca != nil else { return }
        if base == nil && management == nil {
            r.context.issue(r.key("ca_file"), "applies only with apns.base_url or apns.management_base_url (a simulator or test "
                            + "server); Apple's hosts are verified against the system's CAs, so remove it", r.source(of: "ca_file"))
        }
        for (name, url) in [("base_url", base), ("management_base_url", management)] {
            guard let url, let host = URL(string: url)?.host, APNsModel.APNsEnvironment.isAppleHost(host) else { continue }
            r.context.issue(r.key(name), "\(host) is Apple's: apns.ca_file cannot be trusted for it, Apple is verified against "
                            + "the system's CAs only; remove apns.\(name) (Apple's hosts are the default) or apns.ca_file", r.source(of: name))
        }
    }

    private static func checkURL(_ text: String, key: String, context: ConfigReadContext, source: ConfigSource?) {
        guard let url = URL(string: text), url.scheme == "https", let host = url.host, !host.isEmpty else {
            context.issue(key, "\"\(text)\" is not an https URL like https://127.0.0.1:8443", source)
            return
        }
    }

    private static func readLane(_ r: ConfigReader, connections: Int, maxInFlight: Int, maxQueued: Int) -> APNsLane {
        let lane = APNsLane(connections: r.int("connections", default: connections, range: 1...64),
                            maxInFlight: r.int("max_in_flight", default: maxInFlight, range: 1...100_000),
                            maxQueued: r.int("max_queued", default: maxQueued, range: 0...1_000_000))
        r.finish()
        return lane
    }

    private static func readBudget(_ r: ConfigReader, minInterval: Duration, perHour: Int, burst: Int) -> Budget {
        let budget = Budget(minInterval: r.duration("min_interval", default: minInterval, range: .milliseconds(100)...(.seconds(3600))),
                            priority10PerHour: r.int("priority10_per_hour", default: perHour, range: 0...3600),
                            priority10Burst: r.int("priority10_burst", default: burst, range: 0...1000))
        return budget
    }

    private static func readEngine(_ r: ConfigReader) -> Engine {
        let standard = readBudget(r, minInterval: .seconds(1), perHour: 12, burst: 4)
        let frequentReader = r.child("frequent")
        let frequent = readBudget(frequentReader, minInterval: .seconds(1), perHour: 60, burst: 8)
        frequentReader.finish()
        let broadcastReader = r.child("broadcast")
        let broadcast = readBudget(broadcastReader, minInterval: .seconds(1), perHour: 60, burst: 8)
        broadcastReader.finish()
        let p = r.child("push_to_start")
        let pushToStart = PushToStartBudget(perHour: p.int("per_hour", default: 10, range: 0...3600),
                                            burst: p.int("burst", default: 5, range: 0...100))
        p.finish()
        let maxQuiet = r.duration("max_quiet", default: .seconds(30), range: .seconds(1)...(.seconds(3600)))
        let delta = r.double("min_progress_delta", default: 0.05, range: 0...1e12)
        // A type listed replaces the default for that type; "*" (every other type) defaults to the standard list.
        let progressReader = r.child("progress_fields")
        var progress = ["*": readProgressFields(progressReader, "*", default: MeaningProfile.standardProgressFields)]
        for type in progressReader.fieldNames where type != "*" {
            progress[type] = readProgressFields(progressReader, type, default: [])
        }
        progressReader.finish()
        let stale = r.duration("default_stale_after", default: .seconds(15 * 60), range: .seconds(1)...(.seconds(8 * 3600)))
        let tokenWait = r.duration("token_wait", default: .seconds(30), range: .zero...(.seconds(3600)))
        let backoffCap = r.duration("backoff_cap", default: .seconds(300), range: .seconds(1)...(.seconds(3600)),
                                    why: " (retries back off exponentially from 500ms up to this, with full jitter)")
        let recoveryRamp = r.duration("recovery_ramp", default: .seconds(10), range: .zero...(.seconds(600)),
                                      why: " (after an outage, backed-off targets retry spread over this window once APNs answers again)")
        let dedupe = r.int("dedupe_window", default: 8192, range: 1...100_000)  // event ids remembered per partition
        let maxEvent = r.int("max_event_bytes", default: 65_536, range: 1024...(16 * 1024 * 1024), unit: " bytes")
        let endedRetention = r.duration("ended_retention", default: .seconds(600), range: .zero...(.seconds(24 * 3600)),
                                        why: " (an ended activity is remembered this long, so late events for it are dropped as after-end)")
        let maxTracked = r.int("max_tracked_targets", default: 1_000_000, range: 1_000...100_000_000)
        r.finish()
        return Engine(standard: standard, frequent: frequent, broadcast: broadcast, pushToStart: pushToStart,
                      maxQuiet: maxQuiet, minProgressDelta: delta, progressFields: progress, defaultStaleAfter: stale,
                      tokenWait: tokenWait, backoffCap: backoffCap, recoveryRamp: recoveryRamp, dedupeWindow: dedupe, maxEventBytes: maxEvent,
                      endedRetention: endedRetention, maxTrackedTargets: maxTracked)
    }

    /// A list of progress fields: distinct names, at most `MeaningProfile.maxProgressFields`.
    private static func readProgressFields(_ r: ConfigReader, _ name: String, default fallback: [String]) -> [String] {
        let fields = r.stringList(name, default: fallback)
        if fields.count > MeaningProfile.maxProgressFields {
            r.context.issue(r.key(name), "lists \(fields.count) fields; at most \(MeaningProfile.maxProgressFields)", r.source(of: name))
            return fallback
        }
        if Set(fields).count != fields.count {
            r.context.issue(r.key(name), "lists a field twice: [\(fields.joined(separator: ", "))]", r.source(of: name))
            return fallback
        }
        return fields
    }

    private static func readBackpressure(_ r: ConfigReader) -> Backpressure {
        let b = Backpressure(maxPendingPerPartition: r.int("max_pending_per_partition", default: 10_000, range: 1...10_000_000),
                             maxInFlight: r.int("max_in_flight", default: 20_000, range: 1...1_000_000),
                             maxPendingTargets: r.int("max_pending_targets", default: 200_000, range: 1...100_000_000),
                             resumeRatio: r.double("resume_ratio", default: 0.5, range: 0.05...0.95))
        r.finish()
        return b
    }

    /// `liveness_window` must outlast what the engine may wait for with records uncommitted and no
    /// commit moving (a retry backed off to `backoff_cap`, a token awaited for `token_wait`, a minor
    /// update held for `max_quiet`), or `/livez` would restart a worker that is only waiting.
    private static func readAdmin(_ r: ConfigReader, engine: Engine) -> Admin {
        let liveness = r.duration("liveness_window", default: .seconds(600), range: .seconds(10)...(.seconds(24 * 3600)),
                                  why: " (/livez answers 503 when records wait uncommitted and no committed offset moved for this long)")
        let longestWait = engine.backoffCap + max(engine.tokenWait, engine.maxQuiet)
        if liveness <= longestWait {
            r.context.issue(r.key("liveness_window"),
                            "\(DurationText.format(liveness)) is not longer than engine.backoff_cap plus the longer of engine.token_wait and engine.max_quiet (\(DurationText.format(longestWait))): /livez would take a worker waiting on a backed-off retry for a stuck one; make it longer",
                            r.source(of: "liveness_window"))
        }
        let a = Admin(host: r.string("host", default: "127.0.0.1"),
                      port: r.int("port", default: 9180, range: 0...65535),
                      maxConnections: r.int("max_connections", default: 16, range: 1...1024),
                      readTimeout: r.duration("read_timeout", default: .seconds(5), range: .milliseconds(100)...(.seconds(300))),
                      maxRequestBytes: r.int("max_request_bytes", default: 8192, range: 512...(1024 * 1024), unit: " bytes"),
                      livenessWindow: liveness)
        r.finish()
        return a
    }
}
