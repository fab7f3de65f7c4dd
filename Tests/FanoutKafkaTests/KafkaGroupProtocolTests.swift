import Testing
@testable import FanoutKafka

/// `group.protocol` decided against a librdkafka version: both sides of each threshold (the
/// property's arrival in 2.4, KIP-848's general availability in 2.12), whatever is linked here.
@Suite struct KafkaGroupProtocolTests {
    static let debian = LibrdkafkaVersion(2, 0, 2)
    static let preview = LibrdkafkaVersion(2, 11, 1)
    static let generallyAvailable = LibrdkafkaVersion(2, 12, 0)

    func resolved(_ properties: [String: String], on version: LibrdkafkaVersion) throws -> KafkaGroupProtocol.Resolution {
        try KafkaGroupProtocol.resolve(properties, librdkafka: version).get()
    }

    func refusal(_ properties: [String: String], on version: LibrdkafkaVersion) -> KafkaGroupProtocol.Refusal? {
        guard case .failure(let refusal) = KafkaGroupProtocol.resolve(properties, librdkafka: version) else { return nil }
        return refusal
    }

    @Test func versionsCompareAsLibrdkafkaEncodesThem() {
        #expect(Self.debian.number == 0x0200_02ff && Self.debian.text == "2.0.2")
        #expect(Self.debian < KafkaGroupProtocol.propertyKnownSince)
        #expect(Self.preview > KafkaGroupProtocol.propertyKnownSince && Self.preview < KafkaGroupProtocol.consumerProtocolSince)
        // A release candidate of 2.12 is not 2.12.
        #expect(LibrdkafkaVersion(number: 0x020c_0001, text: "2.12.0-RC1") < KafkaGroupProtocol.consumerProtocolSince)
        // The linked library's number and text agree (whichever it is).
        let linked = LibrdkafkaVersion.linked
        let prefix = "\(linked.number >> 24 & 0xff).\(linked.number >> 16 & 0xff).\(linked.number >> 8 & 0xff)"
        #expect(linked.text.hasPrefix(prefix), "\(linked.text) vs \(prefix)")
    }

    @Test func nothingSetIsClassicAndChangesNothing() throws {
        let properties = ["session.timeout.ms": "6000"]
        for version in [Self.debian, Self.preview, Self.generallyAvailable] {
            #expect(try resolved(properties, on: version) == .init(groupProtocol: .classic, properties: properties))
        }
    }

    @Test func classicIsAcceptedAndPassedOnlyToALibrdkafkaThatKnowsTheProperty() throws {
        let properties = ["group.protocol": "Classic ", "session.timeout.ms": "6000"]
        #expect(try resolved(properties, on: Self.debian) == .init(groupProtocol: .classic, properties: ["session.timeout.ms": "6000"]))
        #expect(try resolved(properties, on: KafkaGroupProtocol.propertyKnownSince) == .init(groupProtocol: .classic, properties: properties))
        #expect(try resolved(properties, on: Self.generallyAvailable) == .init(groupProtocol: .classic, properties: properties))
    }

    @Test func consumerIsRefusedBeforeItIsGenerallyAvailableNamingTheVersions() throws {
        for version in [Self.debian, Self.preview] {
            let refused = try #require(refusal(["group.protocol": "consumer"], on: version))
            #expect(refused.properties == ["group.protocol"])
            #expect(refused.reason.contains("librdkafka \(version.text)"), "\(refused)")
            #expect(refused.reason.contains("librdkafka ≥ 2.12.0") && refused.reason.contains("Kafka ≥ 4.0"), "\(refused)")
            #expect(refused.reason.contains("Remove group.protocol (or set it to 'classic')"), "\(refused)")
        }
        #expect(refusal(["group.protocol": "consumer"], on: Self.debian)?.reason.contains("speaks only the classic protocol") == true)
        #expect(refusal(["group.protocol": "consumer"], on: Self.preview)?.reason.contains("early-access preview") == true)
    }

    @Test func consumerIsPassedThroughFrom2_12() throws {
        let properties = ["group.protocol": "consumer", "group.remote.assignor": "uniform", "fetch.wait.max.ms": "10"]
        #expect(try resolved(properties, on: Self.generallyAvailable) == .init(groupProtocol: .consumer, properties: properties))
        #expect(try resolved(properties, on: LibrdkafkaVersion(3, 0, 0)).groupProtocol == .consumer)
    }

    @Test func consumerRefusesTheClassicOnlyPropertiesNamingEach() throws {
        for name in KafkaGroupProtocol.classicOnlyProperties {
            let refused = try #require(refusal(["group.protocol": "consumer", name: "x"], on: Self.generallyAvailable))
            #expect(refused.properties == ["group.protocol", name])
            #expect(refused.reason.contains("does not take \(name):"), "\(refused)")
        }
        let all = Dictionary(uniqueKeysWithValues: KafkaGroupProtocol.classicOnlyProperties.map { ($0, "1") })
        let refused = try #require(refusal(all.merging(["group.protocol": "consumer"]) { $1 }, on: Self.generallyAvailable))
        #expect(refused.properties == ["group.protocol", "group.protocol.type", "heartbeat.interval.ms", "partition.assignment.strategy", "session.timeout.ms"])
        #expect(refused.reason.contains("group.protocol.type, heartbeat.interval.ms, partition.assignment.strategy, session.timeout.ms"))
        // The same properties are fine under classic.
        #expect(try resolved(all.merging(["group.protocol": "classic"]) { $1 }, on: Self.generallyAvailable).groupProtocol == .classic)
    }

    @Test func anotherValueIsRefusedNamingBoth() throws {
        for version in [Self.debian, Self.generallyAvailable] {
            let refused = try #require(refusal(["group.protocol": "streams"], on: version))
            #expect(refused.reason.contains("'streams' is not a consumer group protocol") && refused.reason.contains("'classic'")
                    && refused.reason.contains("'consumer'"), "\(refused)")
        }
    }
}

/// What the clients do with `group.protocol` on the librdkafka linked here, which predates the property.
@Suite(.enabled(if: LibrdkafkaVersion.linked < KafkaGroupProtocol.propertyKnownSince, "the linked librdkafka knows group.protocol"))
struct KafkaGroupProtocolOnOldLibrdkafkaTests {
    let unreachable = ["bootstrap.servers": "127.0.0.1:1"]

    @Test func classicReachesNoClientAndEveryClientStarts() throws {
        // The premise: this librdkafka refuses the property itself.
        let refused = #expect(throws: KafkaError.self) { _ = try RDKafkaConf(KafkaConfiguration(["group.protocol": "classic"])) }
        #expect(refused?.reason.contains("unknown property 'group.protocol'") == true)
        let classic = KafkaConfiguration(unreachable.merging(["group.protocol": "classic"]) { $1 })
        _ = try KafkaConsumer(configuration: classic, groupID: "g")
        _ = try KafkaProducer(configuration: classic, onError: { _ in }, log: { _ in })
        _ = try KafkaPartitionReader(configuration: classic)
    }

    @Test func consumerIsRefusedByTheGroupConsumerNamingTheLinkedVersion() throws {
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaConsumer(configuration: KafkaConfiguration(unreachable.merging(["group.protocol": "consumer"]) { $1 }), groupID: "g")
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.reason.contains("librdkafka \(LibrdkafkaVersion.linked.text)") == true, "\(String(describing: error))")
        #expect(error?.reason.contains("KIP-848 needs librdkafka ≥ 2.12.0 and Kafka ≥ 4.0") == true)
    }
}
