import FanoutKafka
import Foundation

extension FanoutConfiguration {
    /// Properties Fanout sets itself; passing them through would break its guarantees or hide a knob.
    static let ownedKafkaProperties: [String: String] = [
        "bootstrap.servers": "use kafka.bootstrap_servers",
        "metadata.broker.list": "use kafka.bootstrap_servers",
        "group.id": "use kafka.group_id",
        "group.instance.id": "use kafka.group_instance_id (checked, and given to the group consumer only)",
        "enable.auto.commit": "Fanout commits only after APNs acknowledged (docs/design.md §4); it must stay false",
        "enable.auto.offset.store": "Fanout stores offsets itself after acknowledgement; it must stay false",
    ]

    /// Properties that may be restated but not changed, with why Fanout needs their value.
    static let requiredKafkaProperties: [String: (value: String, why: String)] = [
        "isolation.level": ("read_committed", "read_uncommitted would deliver records of aborted and still-open transactions, states that never happened, to Lock Screens, where a push cannot be taken back. Remove the property: Fanout reads committed records only (a producer's transaction left open holds its partition back until that producer's transaction.timeout.ms)"),
    ]

    /// Kafka's rule for a group instance id (as for topic names): 1…249 of a–z, A–Z, 0–9, '.', '_',
    /// '-', and not "." or "..". nil when `id` keeps it.
    static func groupInstanceIDProblem(_ id: String) -> String? {
        if id.isEmpty {
            return "is empty: name this worker (e.g. FANOUT_KAFKA__GROUP_INSTANCE_ID from the pod name; an unset variable expands to nothing), or leave the key out for a dynamic member"
        }
        let allowed = id.utf8.allSatisfy { byte in
            (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2e || byte == 0x5f || byte == 0x2d
        }
        if allowed && id.utf8.count <= maxGroupInstanceIDLength && id != "." && id != ".." { return nil }
        return "\"\(id)\" is not a group instance id Kafka accepts: use 1…\(maxGroupInstanceIDLength) of the letters a–z and A–Z, digits, '.', '_' and '-' (not \".\" or \"..\"), a name of its own for each worker that stays the same across its restarts, e.g. the pod name of a StatefulSet (FANOUT_KAFKA__GROUP_INSTANCE_ID from metadata.name)"
    }

    static let maxGroupInstanceIDLength = 249

    static func isSecretProperty(_ name: String) -> Bool {
        let lowered = name.lowercased()
        return ["password", "secret", "key.pem", "oauthbearer.config", "jaas", "ssl_key"].contains { lowered.contains($0) }
    }

    static func readKafka(_ r: ConfigReader) -> Kafka {
        let bootstrap = r.string("bootstrap_servers", default: "localhost:9092")
        let group = r.string("group_id", default: "fanout")
        let instance = r.optionalString("group_instance_id", allowEmpty: true)
        if let instance, let problem = groupInstanceIDProblem(instance) {
            r.context.issue(r.key("group_instance_id"), problem, r.source(of: "group_instance_id"))
        }
        let t = r.child("topics")
        let topics = Topics(
            activityUpdates: t.string("activity_updates", default: "activity-updates"),
            broadcastUpdates: t.string("broadcast_updates", default: "broadcast-updates"),
            activityTokens: t.string("activity_tokens", default: "activity-tokens"),
            activityTokenFeedback: t.string("activity_token_feedback", default: "activity-token-feedback"),
            dlqSuffix: t.string("dlq_suffix", default: "-dlq"),
            state: t.string("state", default: "fanout-state", allowEmpty: true))
        t.finish()
        let names = [topics.activityUpdates, topics.broadcastUpdates, topics.activityTokens, topics.activityTokenFeedback]
            + (topics.state.isEmpty ? [] : [topics.state])
        if Set(names).count != names.count {
            r.context.issue(t.path, "topic names must be distinct, got \(names.joined(separator: ", "))", nil)
        }
        let commit = r.duration("commit_interval", default: .seconds(1), range: .milliseconds(100)...(.seconds(60)))

        var properties: [String: String] = [:]
        var sources: [String: ConfigSource] = [:]
        for (name, node) in r.entries("properties") {
            let key = "\(r.key("properties")).\(name)"
            if let why = ownedKafkaProperties[name] {
                r.context.issue(key, "is set by Fanout: \(why)", node.source)
                continue
            }
            let value: String
            switch node {
            case .string(let text, _): value = text
            case .number, .bool: value = node.shown
            default:
                r.context.issue(key, "librdkafka properties are strings, numbers or booleans; got \(node.shown)", node.source)
                continue
            }
            if let required = requiredKafkaProperties[name], value.trimmingCharacters(in: .whitespaces).lowercased() != required.value {
                r.context.issue(key, "'\(value)' is not allowed, only '\(required.value)': \(required.why)", node.source)
                continue
            }
            properties[name] = value
            sources[name] = node.source
            r.context.knobs.append(ConfigKnob(key: key, value: isSecretProperty(name) ? "<redacted>" : value, source: node.source))
        }
        if case .failure(let refusal) = KafkaGroupProtocol.resolve(properties, librdkafka: r.context.librdkafka) {
            let name = KafkaGroupProtocol.property
            r.context.issue("\(r.key("properties")).\(name)", refusal.reason, sources[name])
        }
        for (name, value) in FanoutConfiguration.defaultKafkaProperties.sorted(by: { $0.key < $1.key }) where properties[name] == nil {
            properties[name] = value
            r.context.knobs.append(ConfigKnob(key: "\(r.key("properties")).\(name)", value: value, source: .defaultValue))
        }
        r.finish()
        return Kafka(bootstrapServers: bootstrap, groupID: group, groupInstanceID: instance, topics: topics, commitInterval: commit, properties: properties)
    }
}
