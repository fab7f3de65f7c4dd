import FanoutKafka

/// `fanout run` checks, before it joins the group, that every topic it writes to exists: the
/// dead-letter topic of each source topic and the token feedback topic. Without one, every record
/// meant for it would be retried forever and the offsets it covers never committed; better to
/// refuse to start, naming the topic.
///
/// The metadata request asks for all topics (`KafkaConsumer.partitionCounts`), never for one by
/// name, so it cannot auto-create the topic it checks: brokers with `auto.create.topics.enable`
/// create a topic named in a metadata request that allows it, and librdkafka 2.0.2's mock cluster
/// creates it even when the client sets `allow.auto.create.topics=false` (checked with
/// `kcat -X test.mock.num.brokers=1 -L -t <topic>`).
enum OutputTopicCheck {
    struct Output: Equatable {
        var topic: String
        /// What it is, for the error message ("the dead-letter topic of activity-updates").
        var role: String
        /// The setting that names it, and what it holds back when missing.
        var setting: String
        var consequence: String
    }

    static func outputs(of topics: FanoutConfiguration.Topics) -> [Output] {
        [topics.activityUpdates, topics.broadcastUpdates].map { source in
            Output(topic: topics.deadLetterTopic(for: source), role: "the dead-letter topic of \(source)",
                   setting: "kafka.topics.dlq_suffix", consequence: "every invalid event of \(source)")
        } + [Output(topic: topics.activityTokenFeedback, role: "the token feedback topic", setting: "kafka.topics.activity_token_feedback",
                    consequence: "every event whose token APNs reports gone")]
    }

    /// The state changelog (docs/design.md §11), unless `kafka.topics.state` is empty: it must exist with
    /// activity-updates' partition count, because the owner of partition p saves and restores its
    /// targets' state in partition p. Blocking (one metadata request, up to `timeout`).
    static func checkStateTopic(_ topics: FanoutConfiguration.Topics, partitions: Int, using consumer: KafkaConsumer,
                                timeout: Duration) throws(WorkerError) {
        guard !topics.state.isEmpty else { return }
        let create = "create it as a compacted topic (cleanup.policy=compact) with \(partitions) partitions, like \(topics.activityUpdates), or set kafka.topics.state to \"\" to start every target afresh on every handoff"
        let count = try partitionCount(of: topics.state, using: consumer, timeout: timeout) { problem in
            "kafka.topics.state: the state changelog '\(topics.state)' \(problem); \(create)"
        }
        guard count == partitions else {
            throw WorkerError(.configuration,
                              "kafka.topics.state: '\(topics.state)' has \(count) partitions but \(topics.activityUpdates) has \(partitions); they must match, because the owner of partition p of \(topics.activityUpdates) keeps its targets' state in partition p of '\(topics.state)' (\(create))")
        }
    }

    /// Blocking (one metadata request per output topic, each up to `timeout`).
    static func check(_ topics: FanoutConfiguration.Topics, using consumer: KafkaConsumer, timeout: Duration) throws(WorkerError) {
        for output in outputs(of: topics) {
            _ = try partitionCount(of: output.topic, using: consumer, timeout: timeout) { problem in
                "kafka.topics: \(output.role), '\(output.topic)', \(problem); Fanout would hold back the offsets of \(output.consequence) until it can write there. Create '\(output.topic)' (any partition count) and grant the worker write access, or set \(output.setting) to the topic you use"
            }
        }
    }

    /// The topic's partition count; a topic that is missing or unusable is a configuration error whose
    /// text `explain` writes around what is wrong with it ("does not exist on the cluster", …).
    private static func partitionCount(of topic: String, using consumer: KafkaConsumer, timeout: Duration,
                                       explain: (String) -> String) throws(WorkerError) -> Int {
        do {
            return try consumer.partitionCounts(of: [topic], timeout: timeout)[topic] ?? 0
        } catch let error as KafkaError where error.code == .topicNotFound {
            let problem = error.underlying == .unknownTopicOrPartition
                ? "does not exist on the cluster" : "cannot be used: \(error.underlying.message)"
            throw WorkerError(.configuration, explain(problem))
        } catch {
            throw WorkerError.kafka(error, while: "reading topic metadata")
        }
    }
}
