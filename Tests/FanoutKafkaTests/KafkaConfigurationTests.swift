import Testing
@testable import FanoutKafka

@Suite struct KafkaConfigurationTests {
    @Test func unknownPropertyIsNamed() throws {
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaConsumer(configuration: KafkaConfiguration(["bootstrap.servers": "127.0.0.1:1", "no.such.property": "1"]),
                                  groupID: "g")
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.reason.contains("no.such.property") == true)
        #expect(error?.reason.contains("unknown property") == true)
    }

    @Test func badValueIsNamedWithLibrdkafkaMessage() throws {
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaProducer(configuration: KafkaConfiguration(["session.timeout.ms": "soon"]))
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.reason.contains("session.timeout.ms") == true)
        #expect(error?.reason.contains("invalid value") == true)
    }

    @Test func autoCommitCannotBeEnabled() throws {
        for property in ["enable.auto.commit", "enable.auto.offset.store"] {
            let error = #expect(throws: KafkaError.self) {
                _ = try KafkaConsumer(configuration: KafkaConfiguration([property: "true"]), groupID: "g")
            }
            #expect(error?.code == .invalidConfiguration)
            #expect(error?.reason.contains(property) == true)
        }
        // Restating the required value is fine.
        _ = try KafkaConsumer(configuration: KafkaConfiguration(["enable.auto.commit": "false"]), groupID: "g")
    }

    @Test func idempotenceCannotBeDisabled() throws {
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaProducer(configuration: KafkaConfiguration(["enable.idempotence": "false"]))
        }
        #expect(error?.reason.contains("enable.idempotence") == true)
    }

    /// docs/design.md §9: cooperative-sticky unless the configuration names another assignor.
    @Test func cooperativeStickyIsTheDefaultAssignor() throws {
        let unreachable = ["bootstrap.servers": "127.0.0.1:1"]
        let assignor = { (consumer: KafkaConsumer) in consumer.configuredValue(of: "partition.assignment.strategy") }
        #expect(assignor(try KafkaConsumer(configuration: KafkaConfiguration(unreachable), groupID: "g", log: { _ in })) == "cooperative-sticky")
        let range = try KafkaConsumer(configuration: KafkaConfiguration(unreachable.merging(["partition.assignment.strategy": "range"]) { $1 }),
                                      groupID: "g", log: { _ in })
        #expect(assignor(range) == "range")
    }

    @Test func emptyGroupIsRejected() throws {
        #expect(throws: KafkaError.self) { _ = try KafkaConsumer(configuration: KafkaConfiguration(), groupID: "") }
    }

    @Test func errorDescriptionCarriesLibrdkafkaName() {
        let error = KafkaError(.queueFull, underlying: .queueFull, reason: "full")
        #expect(error.underlying.name == "_QUEUE_FULL")
        #expect(error.description.contains("_QUEUE_FULL"))
        #expect(KafkaResponseCode.notCoordinator.name == "NOT_COORDINATOR")
    }

    @Test func durationMilliseconds() {
        #expect(Duration.milliseconds(1500).milliseconds == 1500)
        #expect(Duration.seconds(2).milliseconds == 2000)
        #expect(Duration.seconds(-1).librdkafkaMilliseconds == 0)
        #expect(Duration.seconds(1_000_000_000).librdkafkaMilliseconds == Int32.max)
    }
}
