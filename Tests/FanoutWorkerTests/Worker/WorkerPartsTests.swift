@testable import FanoutWorker
import FanoutCore
import FanoutKafka
import Testing

/// The worker's pure parts: retained records, the ticker's sleep and the configuration mapping.
struct WorkerPartsTests {
    /// The engine's "at once" is `Nanoseconds.min`; a worker stopping with a drained partition
    /// crashed here on `deadline - now` (arithmetic overflow) before this was computed apart.
    @Test func theTickerSleepsNotAtAllForADeadlineDueAtOnceOrPast() {
        #expect(EngineTicker.sleep(until: .min, now: 5_000_000_000) == 0)
        #expect(EngineTicker.sleep(until: .min, now: -5) == 0)
        #expect(EngineTicker.sleep(until: 4_000, now: 5_000) == 0)
        #expect(EngineTicker.sleep(until: 5_000, now: 5_000) == 0)
        #expect(EngineTicker.sleep(until: 5_250, now: 5_000) == 250)
    }

    /// A thread that read the rejoin count before another reported a newer one, and before the group
    /// settled after it, must not put the engine back into "rebalancing": it would hold every commit
    /// until a settle that is not coming.
    @Test func onlyAHigherRejoinCountIsNews() {
        var reports = RejoinReports()
        let answers = [0, 1, 1, 0, 3, 2].map { reports.isNews($0) }
        // 0: nothing happened yet; 0 after 1: a count read before the newer one was reported.
        #expect(answers == [false, true, false, false, true, false])
        #expect(reports.reported == 3)
    }

    /// The worker logs when commits start and stop waiting for the group, once per episode.
    @Test func aCommitHoldIsSeenOnceWhenItBeginsAndOnceWhenItEnds() {
        var since: Nanoseconds?
        let changes = [(false, 1_000), (true, 2_000), (true, 3_000), (false, 7_500), (false, 8_000)].map { held, now in
            WorkerCore.commitHoldChange(held: held, since: &since, now: Nanoseconds(now))
        }
        #expect(changes == [nil, .began, nil, .ended(after: 5_500), nil])
        #expect(since == nil)
    }

    @Test func retainedMessagesFindByOffsetAndDropBelowTheCommitPoint() {
        var retained = RetainedMessages()
        for offset: Int64 in [3, 4, 7, 9] {
            retained.append(KafkaMessage(topic: "t", partition: 0, offset: offset, key: nil, value: [UInt8(offset)]))
        }
        retained.append(KafkaMessage(topic: "t", partition: 0, offset: 7, key: nil, value: nil))   // redelivery: ignored
        #expect(retained.count == 4)
        #expect(retained.message(at: 7)?.value == [7])
        #expect(retained.message(at: 5) == nil)
        retained.prune(below: 7)
        #expect(retained.count == 2)
        #expect(retained.message(at: 4) == nil)
        #expect(retained.message(at: 9)?.value == [9])
        retained.prune(below: 10)
        #expect(retained.count == 0)
        retained.append(KafkaMessage(topic: "t", partition: 0, offset: 12, key: nil, value: nil))
        #expect(retained.message(at: 12) != nil)
    }

    @Test func configurationMapsOntoTheEngineAndDecoder() {
        var configuration = FanoutConfiguration.defaults(apps: [
            .init(bundleID: "com.example.a", teamID: "TEAM000001", keyID: "KEY0000001", keyPath: "/dev/null", frequentUpdates: true,
                  attributes: ["ExportAttributes": .init(progressFields: ["units"])]),
        ])
        configuration.engine.progressFields = ["*": ["progress"], "RideAttributes": ["eta"]]
        configuration.engine.tokenWait = .seconds(7)
        configuration.engine.endedRetention = .seconds(90)
        configuration.engine.maxTrackedTargets = 5_000
        configuration.engine.standard.minInterval = .milliseconds(1500)
        configuration.backpressure.maxPendingPerPartition = 123
        configuration.kafka.properties["socket.timeout.ms"] = "9000"
        let settings = WorkerSettings(configuration: configuration,
                                      options: WorkerOptions(extraKafkaProperties: ["session.timeout.ms": "6000"], randomSeed: 9))
        let engine = settings.engine
        #expect(engine.tokenWait == .seconds(7))
        #expect(engine.endedRetention == .seconds(90) && engine.maxTrackedTargets == 5_000)
        #expect(engine.activityBudget.minInterval == .milliseconds(1500))
        #expect(engine.frequentUpdatesApps == ["com.example.a"])
        #expect(engine.defaultApp == "com.example.a")
        #expect(engine.defaultMeaning.progressFields == ["progress"])
        #expect(engine.meaningProfiles["ExportAttributes"]?.progressFields == ["units"])
        #expect(engine.meaningProfiles["RideAttributes"]?.progressFields == ["eta"])
        #expect(engine.attributesTypeByApp["com.example.a"] == "ExportAttributes")
        #expect(engine.maxIncompletePerPartition == 123)
        #expect(engine.randomSeed == 9)
        #expect(settings.policy.apps == ["com.example.a"])
        #expect(settings.kafka["socket.timeout.ms"] == "9000")
        #expect(settings.kafka["session.timeout.ms"] == "6000")
        #expect(settings.kafka["bootstrap.servers"] == configuration.kafka.bootstrapServers)
    }
}
