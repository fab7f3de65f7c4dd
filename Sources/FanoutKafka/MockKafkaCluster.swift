import CRdKafka
import FanoutCore

/// librdkafka's in-process mock Kafka cluster: real Kafka protocol on loopback ports, served by
/// this object's own librdkafka threads. Other processes can use `bootstrapServers` too.
/// Brokers are numbered 1...brokers. Destroying it stops the brokers.
///
/// `@unchecked Sendable`: owns the client and mock-cluster pointers, immutable after init; the
/// mock cluster API is thread-safe (each call is a request to the cluster's own thread).
public final class MockKafkaCluster: @unchecked Sendable {
    /// The client whose threads serve the brokers; destroyed after the cluster (stored-property release follows `deinit`).
    private let client: RDKafkaClient
    private let cluster: OpaquePointer
    public let bootstrapServers: String
    public let brokerCount: Int

    /// - Parameter log: receives the brokers' own debug lines (librdkafka's `mock` context: every
    ///   request received, group state changes, members leaving or timing out), on the brokers'
    ///   thread as they happen; for tests that watch what the broker saw. nil: errors only, to stderr.
    public init(brokers: Int = 1, log: KafkaLogHandler? = nil) throws {
        guard (1...16).contains(brokers) else {
            throw KafkaError(.mockCluster, reason: "a mock cluster needs 1...16 brokers, got \(brokers)")
        }
        let properties = log == nil ? ["log_level": "3"] : ["log_level": "7", "debug": "mock"]
        client = try RDKafkaClient(type: RD_KAFKA_PRODUCER, conf: try RDKafkaConf(KafkaConfiguration(properties)),
                                   context: ClientContext(log: log))
        guard let cluster = client.withHandle({ rd_kafka_mock_cluster_new($0, Int32(brokers)) }) else {
            throw KafkaError(.mockCluster, reason: "librdkafka could not start a mock cluster with \(brokers) broker(s)")
        }
        self.cluster = cluster
        bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
        brokerCount = brokers
    }

    deinit {
        rd_kafka_mock_cluster_destroy(cluster)
    }

    /// A client configuration pointing at this cluster.
    public func configuration(_ properties: [String: String] = [:]) -> KafkaConfiguration {
        KafkaConfiguration(bootstrapServers: bootstrapServers, properties)
    }

    public func createTopic(_ name: String, partitions: Int, replicationFactor: Int = 1) throws {
        guard partitions > 0, replicationFactor > 0, replicationFactor <= brokerCount else {
            throw KafkaError(.mockCluster, reason: "topic '\(name)': need partitions ≥ 1 and 1 ≤ replication factor ≤ \(brokerCount) brokers (got \(partitions), \(replicationFactor))")
        }
        try check(rd_kafka_mock_topic_create(cluster, name, Int32(partitions), Int32(replicationFactor)),
                  "could not create topic '\(name)'")
    }

    /// The next `errors.count` requests of `apiKey` fail with these codes, in order (any broker).
    public func pushRequestErrors(_ apiKey: KafkaAPIKey, _ errors: [KafkaResponseCode]) {
        let codes = errors.map(\.rd)
        codes.withUnsafeBufferPointer { buffer in
            rd_kafka_mock_push_request_errors_array(cluster, apiKey.rawValue, buffer.count, buffer.baseAddress)
        }
    }

    public func clearRequestErrors(_ apiKey: KafkaAPIKey) {
        rd_kafka_mock_clear_request_errors(cluster, apiKey.rawValue)
    }

    /// Closes the broker's listener and its connections; `setBrokerUp` listens again on the same port.
    /// librdkafka re-binds the port as it closes the listener and aborts the process if that bind fails,
    /// which another socket of a busy process can make happen: tests in a shared process use an
    /// unreachable address or a round-trip time instead.
    public func setBrokerDown(_ broker: Int32) throws {
        try check(rd_kafka_mock_broker_set_down(cluster, broker), "could not take broker \(broker) down")
    }

    public func setBrokerUp(_ broker: Int32) throws {
        try check(rd_kafka_mock_broker_set_up(cluster, broker), "could not bring broker \(broker) up")
    }

    public func setBrokerRoundTripTime(_ broker: Int32, milliseconds: Int) throws {
        try check(rd_kafka_mock_broker_set_rtt(cluster, broker, Int32(clamping: milliseconds)),
                  "could not set the round-trip time of broker \(broker)")
    }

    public func setPartitionLeader(_ partition: PartitionID, broker: Int32) throws {
        try check(rd_kafka_mock_partition_set_leader(cluster, partition.topic, partition.partition, broker),
                  "could not move the leader of \(partition) to broker \(broker)")
    }

    /// - Parameter keyType: `"group"` or `"transaction"`.
    public func setCoordinator(keyType: String, key: String, broker: Int32) throws {
        try check(rd_kafka_mock_coordinator_set(cluster, keyType, key, broker),
                  "could not make broker \(broker) the \(keyType) coordinator for '\(key)'")
    }

    private func check(_ err: rd_kafka_resp_err_t, _ what: String) throws {
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.mockCluster, err, "\(what): \(KafkaResponseCode(err).message)")
        }
    }
}
