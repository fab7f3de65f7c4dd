import FanoutKafka
import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    /// Bad configuration stops the worker before it does anything, with an error naming the problem.
    @Suite struct Startup {
        @Test func partitionCountMismatchNamesBothTopics() async throws {
            let harness = try IntegrationHarness(partitions: 3, tokenPartitions: 2)
            let worker = try harness.makeWorker(name: "s")
            let error = try #require(throws: WorkerError.self) { try worker.start() }
            #expect(error.isConfigurationError)
            #expect(error.message.contains(IntegrationHarness.updates) && error.message.contains(IntegrationHarness.tokens))
            #expect(error.message.contains("3") && error.message.contains("2"))
        }

        /// On the mock cluster, which creates a topic on first use: the check must ask without creating it.
        @Test(arguments: [IntegrationHarness.deadLetters, IntegrationHarness.broadcasts + "-dlq", IntegrationHarness.feedback])
        func missingOutputTopicRefusesToStartNamingIt(_ topic: String) async throws {
            let harness = try IntegrationHarness(partitions: 1, missing: [topic])
            let worker = try harness.makeWorker(name: "s")
            let error = try #require(throws: WorkerError.self) { try worker.start() }
            #expect(error.isConfigurationError)
            #expect(error.message.contains("'\(topic)', does not exist") && error.message.contains("Create '\(topic)'"), "\(error)")
            // Still missing afterwards: the check did not create it.
            let again = try #require(throws: WorkerError.self) { try harness.makeWorker(name: "s2").start() }
            #expect(again.message.contains("'\(topic)', does not exist"))
        }

        @Test func missingKeyFileIsAConfigurationError() throws {
            let harness = try IntegrationHarness(partitions: 1)
            var configuration = harness.configuration()
            configuration.apps[0].keyPath = harness.scratch + "/missing.p8"
            let error = try #require(throws: WorkerError.self) { try harness.makeWorker(name: "s", configuration: configuration) }
            #expect(error.isConfigurationError)
            #expect(error.message.contains("apps[0].key_path") && error.message.contains("missing.p8"))
        }

        /// A signing key others can read works, with one warning at startup naming it; the owner's alone, none.
        @Test func signingKeyReadableByOthersIsWarnedAbout() throws {
            let harness = try IntegrationHarness(partitions: 1)
            func warnings(worker name: String) -> [String] {
                harness.logs.lines.filter { $0.hasPrefix("{\"worker\":\"\(name)\"") && $0.contains("signing key file is readable by group or others") }
            }
            _ = try harness.makeWorker(name: "private")
            #expect(warnings(worker: "private").isEmpty)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: harness.keyPath)
            _ = try harness.makeWorker(name: "exposed")
            let line = try #require(warnings(worker: "exposed").first)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(object["level"] as? String == "warning")
            #expect(object["key_path"] as? String == harness.keyPath && object["mode"] as? String == "0644")
            #expect(object["app"] as? String == IntegrationHarness.app && object["key_id"] as? String == harness.credentials.keyID)
            #expect(warnings(worker: "exposed").count == 1)
        }

        @Test func unknownKafkaPropertyIsAConfigurationError() throws {
            let harness = try IntegrationHarness(partitions: 1)
            var configuration = harness.configuration()
            configuration.kafka.properties["no.such.property"] = "1"
            let error = try #require(throws: WorkerError.self) { try harness.makeWorker(name: "s", configuration: configuration) }
            #expect(error.isConfigurationError)
            #expect(error.message.contains("no.such.property"))
        }

        /// A configuration built in code skips the loader's check: the worker's consumer refuses it.
        @Test(.enabled(if: LibrdkafkaVersion.linked < KafkaGroupProtocol.consumerProtocolSince, "the linked librdkafka runs KIP-848"))
        func consumerGroupProtocolIsAConfigurationErrorNamingTheLinkedLibrdkafka() throws {
            let harness = try IntegrationHarness(partitions: 1)
            var configuration = harness.configuration()
            configuration.kafka.properties["group.protocol"] = "consumer"
            let error = try #require(throws: WorkerError.self) { try harness.makeWorker(name: "s", configuration: configuration) }
            #expect(error.isConfigurationError)
            #expect(error.message.contains("group.protocol") && error.message.contains("librdkafka \(LibrdkafkaVersion.linked.text)"), "\(error)")
            // classic builds every client, whether or not librdkafka knows the property.
            configuration.kafka.properties["group.protocol"] = "classic"
            _ = try harness.makeWorker(name: "s2", configuration: configuration)
        }
    }
}
