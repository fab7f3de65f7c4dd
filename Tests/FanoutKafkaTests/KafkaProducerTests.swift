import FanoutTestSupport
import Synchronization
import Testing
@testable import FanoutKafka

@Suite struct KafkaProducerTests {
    @Test func deliveryReportGivesPartitionAndOffset() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("reports")
        try cluster.createTopic(topic, partitions: 3)
        let producer = try KafkaProducer(configuration: cluster.configuration())
        var offsets: [Int64] = []
        for index in 0..<3 {
            let report = try await producer.produce(topic: topic, partition: 2, key: bytes("k"), value: bytes("v\(index)"))
            #expect(report.topic == topic)
            #expect(report.partition == 2)
            offsets.append(report.offset)
        }
        #expect(offsets == [0, 1, 2])

        // Callback variant; same key lands on the same partition.
        let reports = Mutex<[KafkaDeliveryReport]>([])
        for _ in 0..<4 {
            try producer.produce(topic: topic, key: bytes("same-key"), value: bytes("x")) { result in
                if case .success(let report) = result { reports.withLock { $0.append(report) } }
            }
        }
        try await onThread { try producer.flush(timeout: .seconds(10)) }
        let delivered = reports.withLock { $0 }
        #expect(delivered.count == 4)
        #expect(Set(delivered.map(\.partition)).count == 1)
        #expect(producer.pendingCount == 0)
    }

    @Test func fullQueueFailsFastInsteadOfBlocking() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("full")
        try cluster.createTopic(topic, partitions: 1)
        // A broker that answers nothing for 3 s: no record is acknowledged before then, so the queue stays full.
        // (Not a broker taken down: that re-binds its port inside librdkafka, racing the suite's other sockets.)
        try cluster.setBrokerRoundTripTime(1, milliseconds: 3000)
        // The records must outlive the wait on a loaded runner: a long delivery timeout.
        let producer = try KafkaProducer(configuration: cluster.configuration(["queue.buffering.max.messages": "2",
                                                                               "delivery.timeout.ms": "300000"]))
        let failures = Mutex<[KafkaError]>([])
        for _ in 0..<2 {
            try producer.produce(topic: topic, key: nil, value: bytes("a")) { result in
                if case .failure(let error) = result { failures.withLock { $0.append(error) } }
            }
        }
        let error = #expect(throws: KafkaError.self) {
            try producer.produce(topic: topic, key: nil, value: bytes("b")) { _ in }
        }
        #expect(error?.code == .queueFull)
        #expect(error?.underlying == .queueFull)
        // The queued records are still owned by their completions: a flush cannot finish before the broker answers.
        let flushError = await #expect(throws: KafkaError.self) {
            try await onThread { try producer.flush(timeout: .milliseconds(300)) }
        }
        #expect(flushError?.code == .flushTimedOut)
        try cluster.setBrokerRoundTripTime(1, milliseconds: 0)
        try await onThread { try producer.flush(timeout: .seconds(120)) }
        #expect(failures.withLock { $0 }.isEmpty)
    }

    @Test func purgeFailsEveryUnacknowledgedRecordBeforeReturning() async throws {
        let unreachable = try RefusingAddress()
        let topic = uniqueName("purge")
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: unreachable.hostAndPort),
                                         onError: { _ in })
        let results = Mutex<[Result<KafkaDeliveryReport, KafkaError>]>([])
        for index in 0..<3 {
            try producer.produce(topic: topic, key: nil, value: bytes("\(index)")) { result in
                results.withLock { $0.append(result) }
            }
        }
        try await onThread { try producer.purge(timeout: .seconds(10)) }
        let reported = results.withLock { $0 }
        #expect(reported.count == 3)
        for result in reported {
            guard case .failure(let error) = result else {
                Issue.record("a purged record was reported as delivered")
                continue
            }
            #expect(error.code == .delivery)
            #expect(error.underlying.name.hasPrefix("_PURGE"))
        }
        #expect(producer.pendingCount == 0)
        withExtendedLifetime(unreachable) {}
    }

    @Test func librdkafkaLogLinesReachTheLogHandler() async throws {
        let unreachable = try RefusingAddress()
        let records = Mutex<[KafkaLogRecord]>([])
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: unreachable.hostAndPort),
                                         onError: { _ in },
                                         log: { record in records.withLock { $0.append(record) } })
        try await waitUntil("a log line about the refused connection") {
            records.withLock { $0.contains { $0.facility == "FAIL" } }
        }
        let failure = records.withLock { $0.first { $0.facility == "FAIL" } }!
        #expect(failure.level <= 4)
        #expect(failure.client.contains("producer"))
        #expect(failure.message.contains("Connect"))
        withExtendedLifetime((producer, unreachable)) {}
    }

    @Test func unhandledErrorsReachStderrWithoutTokensOrJWTs() {
        let token = String(repeating: "5a6b7c8d", count: 8), jwt = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJYIn0.c2ln"
        let line = KafkaProducer.unhandledErrorLine(KafkaError(.produce, reason: "topic \(token) for client \(jwt) failed"))
        #expect(!line.contains(token) && !line.contains(jwt), "\(line)")
        #expect(line.contains("topic 5a6b7c8d…(64) for client <jwt redacted> failed"), "\(line)")
    }

    @Test func retriableBrokerErrorsAreRetriedBeforeTheReport() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("retry")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: cluster.configuration())
        _ = try await producer.produce(topic: topic, key: nil, value: bytes("warm-up"))
        cluster.pushRequestErrors(.produce, [.notEnoughReplicas, .notEnoughReplicas])
        let report = try await producer.produce(topic: topic, key: nil, value: bytes("after-errors"))
        #expect(report.offset == 1)
    }

    @Test func metadataReportsPartitionCountsAndNamesMissingTopics() async throws {
        let cluster = try MockKafkaCluster()
        let updates = uniqueName("updates")
        let tokens = uniqueName("tokens")
        try cluster.createTopic(updates, partitions: 12)
        try cluster.createTopic(tokens, partitions: 5)
        let producer = try KafkaProducer(configuration: cluster.configuration())
        let counts = try await onThread { try producer.partitionCounts(of: [updates, tokens], timeout: .seconds(10)) }
        #expect(counts == [updates: 12, tokens: 5])
        let missing = uniqueName("missing")
        let error = await #expect(throws: KafkaError.self) {
            try await onThread { try producer.partitionCounts(of: [updates, missing], timeout: .seconds(10)) }
        }
        #expect(error?.code == .topicNotFound)
        #expect(error?.reason.contains(missing) == true)
    }
}
