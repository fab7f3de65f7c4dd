/// librdkafka properties, passed through verbatim (`bootstrap.servers`, `security.protocol`,
/// `sasl.*`, `ssl.*`, timeouts, …). Validation happens when a client is created: an unknown property
/// or a bad value is a `KafkaError` with code `.invalidConfiguration` naming the property.
public struct KafkaConfiguration: Sendable, Hashable {
    public var properties: [String: String]

    public init(_ properties: [String: String] = [:]) {
        self.properties = properties
    }

    public init(bootstrapServers: String, _ properties: [String: String] = [:]) {
        self.properties = properties
        self.properties["bootstrap.servers"] = bootstrapServers
    }

    public subscript(name: String) -> String? {
        get { properties[name] }
        set { properties[name] = newValue }
    }

    /// Properties with Fanout's defaults filled in where the caller set nothing.
    func withDefaults(_ defaults: [String: String]) -> KafkaConfiguration {
        KafkaConfiguration(properties.merging(defaults) { caller, _ in caller })
    }

    /// What every consumer of Fanout reads: committed records only. Records of an aborted (or still
    /// open) transaction never happened; a push made from one cannot be taken back from a Lock Screen.
    /// librdkafka's own default is the same, but Fanout must not rest on a default silently.
    static let readCommitted = ["isolation.level": "read_committed"]
    static let readCommittedReason = "records of aborted or still-open transactions never happened, and a push made from one cannot be taken back"

    /// For a client that joins no group (producer, partition reader): without `group.protocol`, which
    /// only a group consumer uses (`KafkaGroupProtocol`) and a librdkafka before 2.4 refuses as unknown.
    func outsideTheGroup() -> KafkaConfiguration {
        var properties = properties
        properties[KafkaGroupProtocol.property] = nil
        return KafkaConfiguration(properties)
    }

    /// Fails when the caller set one of `pinned` to anything but its required value, then pins them.
    func pinning(_ pinned: [String: String], client: String,
                 because why: String = "Fanout relies on it for at-least-once delivery") throws -> KafkaConfiguration {
        for (name, required) in pinned.sorted(by: { $0.key < $1.key }) {
            if let given = properties[name], given.lowercased() != required {
                throw KafkaError(.invalidConfiguration,
                                 reason: "property '\(name)' must be '\(required)' for the \(client) (got '\(given)'): \(why); remove it from the configuration")
            }
        }
        return KafkaConfiguration(properties.merging(pinned) { _, pinned in pinned })
    }
}
