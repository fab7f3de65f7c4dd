import Foundation

/// The consumer group protocol a configuration asks for (librdkafka's `group.protocol`), decided
/// against the librdkafka that will run it.
///
/// Pure: the librdkafka version is a parameter, so every threshold is tested from both sides without
/// linking another library. `KafkaConsumer` applies it to its properties, the configuration loader
/// to `kafka.properties` (so `fanout run` refuses at startup, naming the key).
public enum KafkaGroupProtocol: String, Sendable, CaseIterable {
    /// JoinGroup/SyncGroup with an assignor on the members (Fanout's default: cooperative-sticky).
    /// The only protocol before librdkafka 2.4, and the default after.
    case classic
    /// KIP-848: the broker assigns partitions and owns the session; members heartbeat their
    /// assignment. Needs librdkafka ≥ 2.12 (generally available there) and Kafka ≥ 4.0.
    case consumer

    public static let property = "group.protocol"
    /// The first librdkafka that knows `group.protocol` (KIP-848 as an early-access preview): an
    /// older one refuses the property as unknown, so `classic` is not passed to it.
    public static let propertyKnownSince = LibrdkafkaVersion(2, 4, 0)
    /// The first librdkafka whose `consumer` protocol is generally available.
    public static let consumerProtocolSince = LibrdkafkaVersion(2, 12, 0)
    /// Classic-protocol properties that `consumer` does not take: the broker assigns
    /// (`group.remote.assignor` picks its assignor) and sets the session and heartbeat timing
    /// (`group.consumer.session.timeout.ms`, `group.consumer.heartbeat.interval.ms` on the broker).
    public static let classicOnlyProperties = ["group.protocol.type", "heartbeat.interval.ms", "partition.assignment.strategy", "session.timeout.ms"]

    public struct Resolution: Sendable, Equatable {
        public var groupProtocol: KafkaGroupProtocol
        /// What to hand librdkafka: the input, less `group.protocol` where librdkafka does not know it.
        public var properties: [String: String]
    }

    /// Why the properties cannot run on this librdkafka, in words a person can act on.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// The properties at fault, sorted: `group.protocol`, or the classic-only ones set beside it.
        public var properties: [String]
        public var reason: String
        public var description: String { reason }
    }

    /// Decides the protocol `properties` ask for (none given: classic) on `librdkafka`.
    public static func resolve(_ properties: [String: String], librdkafka: LibrdkafkaVersion) -> Result<Resolution, Refusal> {
        guard let given = properties[property] else { return .success(Resolution(groupProtocol: .classic, properties: properties)) }
        let requirement = "KIP-848 needs librdkafka ≥ \(consumerProtocolSince) and Kafka ≥ 4.0"
        guard let chosen = KafkaGroupProtocol(rawValue: given.trimmingCharacters(in: .whitespaces).lowercased()) else {
            return .failure(Refusal(properties: [property], reason:
                "\(property) '\(given)' is not a consumer group protocol: use 'classic' (the default; Fanout assigns cooperative-sticky) or 'consumer' (\(requirement))"))
        }
        switch chosen {
        case .classic:
            var passed = properties
            if librdkafka < propertyKnownSince { passed[property] = nil }
            return .success(Resolution(groupProtocol: .classic, properties: passed))
        case .consumer:
            guard librdkafka >= consumerProtocolSince else {
                let linked = librdkafka < propertyKnownSince ? "which speaks only the classic protocol" : "which offers it only as an early-access preview"
                return .failure(Refusal(properties: [property], reason:
                    "\(property) 'consumer' cannot be used: \(requirement), and this Fanout runs with librdkafka \(librdkafka.text), \(linked). Remove \(property) (or set it to 'classic') to join with the classic protocol and cooperative-sticky assignment, or run a Fanout built with librdkafka ≥ \(consumerProtocolSince)"))
            }
            let refused = classicOnlyProperties.filter { properties[$0] != nil }
            guard refused.isEmpty else {
                return .failure(Refusal(properties: [property] + refused, reason:
                    "\(property) 'consumer' (KIP-848) does not take \(refused.joined(separator: ", ")): under it the broker assigns partitions (group.remote.assignor picks its assignor) and sets the session and heartbeat timing (the broker's group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms). Remove \(refused.count == 1 ? "it" : "them")"))
            }
            return .success(Resolution(groupProtocol: .consumer, properties: properties))
        }
    }
}
