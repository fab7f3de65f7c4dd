import Testing
@testable import FanoutKafka

/// Which produce failures can never succeed by retrying, and that the startup topic check can ask
/// the mock cluster about a topic without creating it.
@Suite struct ProduceFailureTests {
    static let permanent: [(KafkaError, String)] = [
        (KafkaError(.delivery, underlying: .unknownTopicOrPartition, reason: "x"), "create the topic"),
        (KafkaError(.delivery, underlying: .unknownTopic, reason: "x"), "create the topic"),
        (KafkaError(.produce, underlying: .unknownPartition, reason: "x"), "create the topic"),
        (KafkaError(.delivery, underlying: .topicAuthorizationFailed, reason: "x"), "write access"),
        (KafkaError(.delivery, underlying: .clusterAuthorizationFailed, reason: "x"), "IdempotentWrite"),
        (KafkaError(.delivery, underlying: .saslAuthenticationFailed, reason: "x"), "write access"),
        (KafkaError(.delivery, underlying: .messageTooLarge, reason: "x"), "max.message.bytes"),
        (KafkaError(.produce, underlying: .recordListTooLarge, reason: "x"), "max.message.bytes"),
        (KafkaError(.delivery, underlying: .invalidTopic, reason: "x"), "configuration"),
        (KafkaError(.delivery, underlying: .policyViolation, reason: "x"), "configuration"),
        (KafkaError(.delivery, underlying: .invalidRecord, reason: "x"), "configuration"),
        (KafkaError(.produce, underlying: .invalidArgument, reason: "x"), "configuration"),
        (KafkaError(.invalidConfiguration, reason: "property 'acks' …"), "kafka properties"),
        (KafkaError(.fatal, underlying: .fatal, reason: "x"), "restart the worker"),
        (KafkaError(.produce, underlying: .fatal, reason: "x"), "restart the worker"),
    ]

    static let transient: [KafkaError] = [
        KafkaError(.delivery, underlying: .messageTimedOut, reason: "x"),
        KafkaError(.delivery, underlying: .timedOut, reason: "x"),
        KafkaError(.delivery, underlying: .requestTimedOut, reason: "x"),
        KafkaError(.delivery, underlying: .transport, reason: "x"),
        KafkaError(.delivery, underlying: .allBrokersDown, reason: "x"),
        KafkaError(.delivery, underlying: .leaderNotAvailable, reason: "x"),
        KafkaError(.delivery, underlying: .notLeaderForPartition, reason: "x"),
        KafkaError(.delivery, underlying: .notEnoughReplicas, reason: "x"),
        KafkaError(.delivery, underlying: .purgedInQueue, reason: "x"),
        KafkaError(.queueFull, underlying: .queueFull, reason: "x"),
        // Closing outranks the code: the worker is shutting down, not misconfigured.
        KafkaError(.closed, underlying: .unknownTopic, reason: "x"),
        // Not from librdkafka at all: nothing says it cannot succeed.
        KafkaError(.produce, reason: "x"),
    ]

    @Test(arguments: permanent) func permanentFailures(_ error: KafkaError, _ remedy: String) {
        let failure = ProduceFailure(error)
        #expect(failure.kind == .permanent, "\(error)")
        #expect(failure.remedy.contains(remedy), "\(error): \(failure.remedy)")
    }

    @Test(arguments: transient) func transientFailures(_ error: KafkaError) {
        #expect(ProduceFailure(error) == ProduceFailure(KafkaError(.delivery, underlying: .messageTimedOut, reason: "")))
        #expect(ProduceFailure(error).kind == .transient, "\(error)")
        #expect(ProduceFailure(error).remedy.isEmpty)
    }

    /// The mock cluster creates a topic on first use; `partitionCounts` (a metadata request for all
    /// topics) must not count as a use, or a startup check of a missing topic would create it.
    @Test func partitionCountsDoesNotCreateAMissingTopicOnTheMock() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        let producer = try KafkaProducer(configuration: cluster.configuration())
        let topic = uniqueName("absent-dlq")
        for _ in 0..<2 {
            let error = try #require(throws: KafkaError.self) { try producer.partitionCounts(of: [topic], timeout: .seconds(5)) }
            #expect(error.code == .topicNotFound && error.reason.contains(topic))
        }
        // Producing to it is a use: the mock creates it, and the same request now sees it.
        _ = try await producer.produce(topic: topic, key: nil, value: Array("x".utf8))
        #expect(try producer.partitionCounts(of: [topic], timeout: .seconds(5))[topic] != nil)
    }
}
