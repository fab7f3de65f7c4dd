import FanoutKafka
import Foundation
import Testing
@testable import FanoutWorker

/// The Kafka group conventions of the configuration (docs/design.md §9): `group.protocol` checked against
/// the linked librdkafka.
@Suite struct GroupProtocolConfigurationTests {
    func load(_ fixture: ConfigFixture, properties: String, librdkafka: LibrdkafkaVersion = .linked) throws -> FanoutConfiguration {
        try FanoutConfiguration.loadReadingKeys(path: try fixture.file(#""kafka": {"properties": {\#(properties)}}"#),
                                                environment: [:], librdkafka: librdkafka).configuration
    }

    func issues(_ fixture: ConfigFixture, properties: String, librdkafka: LibrdkafkaVersion = .linked,
                environment: [String: String] = [:]) throws -> [ConfigurationError.Issue] {
        let path = try fixture.file(#""kafka": {"properties": {\#(properties)}}"#)
        do {
            _ = try FanoutConfiguration.loadReadingKeys(path: path, environment: environment, librdkafka: librdkafka)
            return []
        } catch let error as ConfigurationError {
            return error.issues
        }
    }

    @Test func consumerBeforeLibrdkafka2_12IsRefusedAtLoadNamingTheVersionAndTheSource() throws {
        let fixture = try ConfigFixture()
        let found = try issues(fixture, properties: #""group.protocol": "consumer""#, librdkafka: LibrdkafkaVersion(2, 0, 2))
        let issue = try #require(found.first)
        #expect(found.count == 1)
        #expect(issue.key == "kafka.properties.group.protocol")
        #expect(issue.message.contains("librdkafka 2.0.2") && issue.message.contains("librdkafka ≥ 2.12.0 and Kafka ≥ 4.0"), "\(issue)")
        if case .file? = issue.source {} else { Issue.record("the issue names no file: \(issue)") }
        // From the environment, the variable is named.
        let fromEnvironment = try issues(fixture, properties: "", librdkafka: LibrdkafkaVersion(2, 0, 2),
                                         environment: ["FANOUT_KAFKA__GROUP_PROTOCOL": "consumer"])
        #expect(fromEnvironment.map(\.source) == [.environment(variable: "FANOUT_KAFKA__GROUP_PROTOCOL")])
    }

    @Test func theLinkedLibrdkafkaDecides() throws {
        let fixture = try ConfigFixture()
        let found = try issues(fixture, properties: #""group.protocol": "consumer""#)
        if LibrdkafkaVersion.linked < KafkaGroupProtocol.consumerProtocolSince {
            #expect(found.first?.message.contains("librdkafka \(LibrdkafkaVersion.linked.text)") == true, "\(found)")
        } else {
            #expect(found == [])
        }
    }

    @Test func consumerFrom2_12LoadsAndRefusesTheClassicOnlyProperties() throws {
        let fixture = try ConfigFixture()
        let current = LibrdkafkaVersion(2, 12, 0)
        let loaded = try load(fixture, properties: #""group.protocol": "consumer", "group.remote.assignor": "uniform""#, librdkafka: current)
        #expect(loaded.kafka.properties["group.protocol"] == "consumer")
        let found = try issues(fixture, properties: #""group.protocol": "consumer", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500"#,
                               librdkafka: current)
        #expect(found.map(\.key) == ["kafka.properties.group.protocol"])
        #expect(found.first?.message.contains("does not take heartbeat.interval.ms, session.timeout.ms") == true, "\(found)")
    }

    @Test func classicLoadsOnEveryVersionAndIsPrinted() throws {
        let fixture = try ConfigFixture()
        for version in [LibrdkafkaVersion(2, 0, 2), LibrdkafkaVersion(2, 12, 0)] {
            let loaded = try load(fixture, properties: #""group.protocol": "classic""#, librdkafka: version)
            // The configuration keeps what was written; the clients decide what reaches librdkafka.
            #expect(loaded.kafka.properties["group.protocol"] == "classic")
            #expect(loaded.describe().split(separator: "\n").contains { $0.hasPrefix("kafka.properties.group.protocol ") && $0.contains("classic") })
        }
    }
}

/// `isolation.level=read_committed` is one of Fanout's written-out defaults, and the only value allowed.
@Suite struct IsolationLevelConfigurationTests {
    @Test func readCommittedIsADefaultPrintedAsSuch() throws {
        let fixture = try ConfigFixture()
        let config = try FanoutConfiguration.load(path: try fixture.file(), environment: [:])
        #expect(config.kafka.properties["isolation.level"] == "read_committed")
        let line = try #require(config.describe().split(separator: "\n").first { $0.hasPrefix("kafka.properties.isolation.level ") })
        #expect(line.contains("read_committed") && line.hasSuffix("# default"))
    }

    @Test func readUncommittedIsRefusedSayingWhy() throws {
        let fixture = try ConfigFixture()
        let error = try #require(loadError(try fixture.file(), ["FANOUT_KAFKA__ISOLATION_LEVEL": "read_uncommitted"]))
        let issue = try #require(error.issues.first)
        #expect(error.issues.count == 1)
        #expect(issue.key == "kafka.properties.isolation.level")
        #expect(issue.source == .environment(variable: "FANOUT_KAFKA__ISOLATION_LEVEL"))
        #expect(issue.message.contains("'read_uncommitted' is not allowed, only 'read_committed'") && issue.message.contains("aborted")
                && issue.message.contains("Remove the property"), "\(issue)")
        // Restating the value is fine, and it is then printed as the file's.
        let restated = try FanoutConfiguration.load(path: try fixture.file(#""kafka": {"properties": {"isolation.level": "READ_COMMITTED"}}"#), environment: [:])
        #expect(restated.knobs.first { $0.key == "kafka.properties.isolation.level" }?.source != .defaultValue)
    }

    @Test func theWorkersConsumersGetItAndItsProducerDoesNot() throws {
        let settings = WorkerSettings(configuration: FanoutConfiguration.defaults(), options: WorkerOptions(randomSeed: 1))
        #expect(settings.kafka["isolation.level"] == "read_committed" && settings.kafka["fetch.wait.max.ms"] == "10")
        #expect(settings.kafka["queued.max.messages.kbytes"] == "16384")
        // Consumer properties on a producer only draw librdkafka warnings ("is a consumer property and will be ignored").
        #expect(settings.producerKafka["isolation.level"] == nil && settings.producerKafka["fetch.wait.max.ms"] == nil
                && settings.producerKafka["queued.max.messages.kbytes"] == nil)
        #expect(settings.producerKafka["bootstrap.servers"] == settings.kafka["bootstrap.servers"])
        // The producer's batching default stays off the consumers ("is a producer property and will be ignored").
        #expect(settings.producerKafka["linger.ms"] == "50" && settings.kafka["linger.ms"] == nil)
        // A default for every librdkafka client reaches the producer too: dead letters reconnect as fast.
        #expect(settings.kafka["reconnect.backoff.max.ms"] == "1000" && settings.producerKafka["reconnect.backoff.max.ms"] == "1000")
    }

    /// The engine offers no commit while a heartbeat's answer may be on its way (docs/design.md §4):
    /// half the heartbeat interval, at most 500 ms, from the properties the consumer gets.
    @Test func theHeartbeatAnswerWindowFollowsTheHeartbeatInterval() throws {
        let ms: Int64 = 1_000_000
        let defaults = WorkerSettings(configuration: FanoutConfiguration.defaults(), options: WorkerOptions(randomSeed: 1))
        #expect(defaults.engine.heartbeatAnswerWindow == 500 * ms, "librdkafka's 3 s heartbeat: capped")
        let fleet = WorkerSettings(configuration: FanoutConfiguration.defaults(),
                                   options: WorkerOptions(extraKafkaProperties: ["heartbeat.interval.ms": "500"], randomSeed: 1))
        #expect(fleet.engine.heartbeatAnswerWindow == 250 * ms)
        #expect(WorkerSettings.heartbeatAnswerWindow(["heartbeat.interval.ms": "1"]) == 1 * ms, "never zero")
        #expect(WorkerSettings.heartbeatAnswerWindow(["heartbeat.interval.ms": "soon"]) == 500 * ms)
    }
}

/// `kafka.group_instance_id`: static membership, named per worker (e.g. from the pod name).
@Suite struct GroupInstanceIDConfigurationTests {
    @Test func unsetByDefaultAndPrintedSo() throws {
        let fixture = try ConfigFixture()
        let config = try FanoutConfiguration.load(path: try fixture.file(), environment: [:])
        #expect(config.kafka.groupInstanceID == nil)
        #expect(FanoutConfiguration.defaults().kafka.groupInstanceID == nil)
        let line = try #require(config.describe().split(separator: "\n").first { $0.hasPrefix("kafka.group_instance_id ") })
        #expect(line.contains("(none)") && line.hasSuffix("# default"))
    }

    @Test func fromTheFileOrTheEnvironmentWhichWins() throws {
        let fixture = try ConfigFixture()
        let path = try fixture.file(#""kafka": {"group_instance_id": "fanout-from-file"}"#)
        #expect(try FanoutConfiguration.load(path: path, environment: [:]).kafka.groupInstanceID == "fanout-from-file")
        let config = try FanoutConfiguration.load(path: path, environment: ["FANOUT_KAFKA__GROUP_INSTANCE_ID": "fanout-7f9c4-0"])
        #expect(config.kafka.groupInstanceID == "fanout-7f9c4-0")
        // The variable names Fanout's key, not a librdkafka property passed through.
        #expect(config.kafka.properties["group.instance.id"] == nil)
        let line = try #require(config.describe().split(separator: "\n").first { $0.hasPrefix("kafka.group_instance_id ") })
        #expect(line.contains("fanout-7f9c4-0") && line.hasSuffix("# env FANOUT_KAFKA__GROUP_INSTANCE_ID"), "\(line)")
    }

    @Test(arguments: ["", "pod 1", "fanout/0", "fanout-ü", ".", "..", String(repeating: "a", count: 250)])
    func anUnusableIdIsRefusedSayingWhatKafkaAccepts(_ id: String) throws {
        let fixture = try ConfigFixture()
        let error = try #require(loadError(try fixture.file(), ["FANOUT_KAFKA__GROUP_INSTANCE_ID": id]))
        let issue = try #require(error.issues.first)
        #expect(error.issues.count == 1)
        #expect(issue.key == "kafka.group_instance_id" && issue.source == .environment(variable: "FANOUT_KAFKA__GROUP_INSTANCE_ID"))
        if id.isEmpty {
            #expect(issue.message.contains("is empty") && issue.message.contains("an unset variable"), "\(issue)")
        } else {
            #expect(issue.message.contains("is not a group instance id Kafka accepts") && issue.message.contains("1…249"), "\(issue)")
        }
    }

    @Test(arguments: ["fanout-0", "Fanout_worker.3", String(repeating: "a", count: 249)])
    func aUsableIdLoads(_ id: String) throws {
        let fixture = try ConfigFixture()
        #expect(try FanoutConfiguration.load(path: try fixture.file(), environment: ["FANOUT_KAFKA__GROUP_INSTANCE_ID": id]).kafka.groupInstanceID == id)
    }

    @Test func theLibrdkafkaPropertyIsRefusedPointingAtTheKey() throws {
        let fixture = try ConfigFixture()
        let error = try #require(loadError(try fixture.file(#""kafka": {"properties": {"group.instance.id": "fanout-0"}}"#)))
        #expect(error.issues.map(\.key) == ["kafka.properties.group.instance.id"])
        #expect(error.issues.first?.message.contains("use kafka.group_instance_id") == true)
    }
}
