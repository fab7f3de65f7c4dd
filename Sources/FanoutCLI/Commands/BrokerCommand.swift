import Dispatch
import FanoutKafka
import Foundation

/// `fanout broker`: librdkafka's mock Kafka cluster as a standalone local broker for development.
struct BrokerCommand: Command {
    static let name = "broker"
    static let summary = "Run an embedded mock Kafka cluster for local development"
    static let help = """
    Usage: fanout broker [options]

    Starts librdkafka's built-in mock Kafka cluster on loopback, creates the topics, prints
    'bootstrap: <host:port,...>' on stdout and serves until SIGINT or SIGTERM (exit 0).
    Real Kafka protocol: kcat, other processes and 'fanout run' can use it. Data lives in memory only;
    each partition keeps roughly its newest 5 MiB (older records are deleted, like a tiny retention).

    Options:
      --brokers <n>                    number of mock brokers (default: 1)
      --topic <name>:<partitions>[:<replication>]
                                       create a topic; repeat for several. When given, replaces the
                                       default set:
                                         activity-updates:12, broadcast-updates:6, activity-tokens:12,
                                         activity-updates-dlq:3, broadcast-updates-dlq:3,
                                         activity-token-feedback:3
                                       Other topics are auto-created on first use.
      --control-stdin                  read commands from standard input, one a line, each answered on
                                       stdout with 'ok: …' or 'error: …':
                                         down <broker>      disconnect it and refuse connections
                                         up <broker>        accept connections again
                                         rtt <broker> <ms>  delay its responses (0: none)
    """

    static let defaultTopics: [TopicSpec] = [
        TopicSpec(name: "activity-updates", partitions: 12),
        TopicSpec(name: "broadcast-updates", partitions: 6),
        TopicSpec(name: "activity-tokens", partitions: 12),
        TopicSpec(name: "activity-updates-dlq", partitions: 3),
        TopicSpec(name: "broadcast-updates-dlq", partitions: 3),
        TopicSpec(name: "activity-token-feedback", partitions: 3),
        TopicSpec(name: "fanout-state", partitions: 12),
    ]

    struct TopicSpec: Equatable {
        var name: String
        var partitions: Int
        var replicationFactor = 1

        /// Parses `name:partitions[:replication]`.
        init(parsing text: String) throws {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard (2...3).contains(parts.count), !parts[0].isEmpty else {
                throw UsageError("--topic expects name:partitions[:replication], got '\(text)'")
            }
            guard let partitions = Int(parts[1]), partitions > 0 else {
                throw UsageError("--topic '\(text)': partitions must be a positive whole number")
            }
            name = parts[0]
            self.partitions = partitions
            if parts.count == 3 {
                guard let replication = Int(parts[2]), replication > 0 else {
                    throw UsageError("--topic '\(text)': replication must be a positive whole number")
                }
                replicationFactor = replication
            }
        }

        init(name: String, partitions: Int, replicationFactor: Int = 1) {
            self.name = name
            self.partitions = partitions
            self.replicationFactor = replicationFactor
        }
    }

    static func run(_ arguments: [String]) async throws -> Int32 {
        var args = Arguments(arguments)
        let brokers = try args.int("brokers") ?? 1
        guard (1...16).contains(brokers) else { throw UsageError("--brokers must be between 1 and 16, got \(brokers)") }
        let given = try args.options("topic").map(TopicSpec.init(parsing:))
        let controlStdin = args.flag("control-stdin")
        try args.finish()
        let topics = given.isEmpty ? defaultTopics : given
        for topic in topics where topic.replicationFactor > brokers {
            throw UsageError("topic '\(topic.name)' wants replication \(topic.replicationFactor) but only \(brokers) broker(s) run")
        }
        if Set(topics.map(\.name)).count != topics.count { throw UsageError("a topic is given twice") }

        // Signals are ignored by default handling and delivered through dispatch sources instead.
        let signals = SignalWaiter(signals: [SIGINT, SIGTERM])
        let cluster = try MockKafkaCluster(brokers: brokers)
        for topic in topics {
            try cluster.createTopic(topic.name, partitions: topic.partitions, replicationFactor: topic.replicationFactor)
            Output.err("topic \(topic.name): \(topic.partitions) partition(s), replication \(topic.replicationFactor)")
        }
        Output.out("bootstrap: \(cluster.bootstrapServers)")
        if controlStdin { BrokerControl.serveStandardInput(cluster) }
        let signal = await signals.next()
        Output.err("received signal \(signal), stopping the mock cluster")
        withExtendedLifetime(cluster) {}
        return 0
    }
}
