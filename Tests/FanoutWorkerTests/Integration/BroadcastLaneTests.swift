import APNsSimulator
import FanoutKafka
import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    /// The broadcast lane (issue 7): channel storage policy decides apns-expiration, start is
    /// refused, end carries the final state, a gone channel is dead-lettered, push-to-start subscribes.
    @Suite struct BroadcastLane {
        static func header(_ message: KafkaMessage, _ name: String) -> String? {
            message.header(name)?.value.map { String(decoding: $0, as: UTF8.self) }
        }

        /// The value of one exported sample (`name{labels}`), 0 when never updated.
        static func sample(_ metrics: FanoutMetrics, _ series: String) -> Double {
            for line in metrics.registry.render().split(separator: "\n") where line.hasPrefix(series + " ") {
                return Double(line.dropFirst(series.count + 1)) ?? .nan
            }
            return 0
        }

        /// Without a management endpoint: configured channels get their policy's expiration, an
        /// unconfigured one goes out with 0 (valid everywhere) even though it stores messages.
        @Test func configuredStoragePolicyDecidesExpiration() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let app = IntegrationHarness.app
            let stored = try harness.simulator.createChannel(bundleID: app, storagePolicy: 1)
            let noStorage = try harness.simulator.createChannel(bundleID: app, storagePolicy: 0)
            let unlisted = try harness.simulator.createChannel(bundleID: app, storagePolicy: 1)
            var configuration = harness.configuration()
            configuration.apps[0].broadcastChannels = [stored: .mostRecent, noStorage: .none]
            let worker = try harness.makeWorker(name: "bp", configuration: configuration)
            try worker.start()
            let base = IntegrationHarness.now - 60
            for channel in [stored, noStorage, unlisted] {
                try await harness.produce(IntegrationHarness.broadcasts, key: channel,
                                          value: IntegrationHarness.broadcastEvent(id: "s-\(channel)", channel: channel, timestamp: base,
                                                                                   state: "{\"gate\":\"B12\"}"))
            }
            try await harness.eventually("every channel received its update") {
                [stored, noStorage, unlisted].allSatisfy { harness.simulator.deviceView(channel: $0) != nil }
            }
            let deliveries = harness.simulator.deliveries()
            func expiration(_ channel: String) -> Int64? { deliveries.first { $0.channel == channel }?.expiration }
            // stale date = timestamp + default_stale_after (15 min), still ahead of now.
            #expect(expiration(stored) == base + 900)
            #expect(expiration(noStorage) == 0)
            #expect(expiration(unlisted) == 0)
            #expect(harness.simulator.stats().count(status: 400, reason: .badExpirationDate) == 0)
            try await harness.eventually("every broadcast offset committed") { try harness.allCommitted(IntegrationHarness.broadcasts) }
            await worker.stop(timeout: .seconds(5))
        }

        /// With the simulator's management port: an unlisted channel's policy is read once and
        /// cached. Payloads up to 5120 bytes pass on this lane, start is dead-lettered, end is sent
        /// with the final state.
        @Test func lookedUpPolicyLargePayloadStartRefusedEndFinal() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let app = IntegrationHarness.app
            let stored = try harness.simulator.createChannel(bundleID: app, storagePolicy: 1)
            let noStorage = try harness.simulator.createChannel(bundleID: app, storagePolicy: 0)
            var configuration = harness.configuration()
            configuration.apns.managementBaseURL = harness.simulator.managementURL
            configuration.engine.broadcast.minInterval = .milliseconds(200)
            let worker = try harness.makeWorker(name: "bl", configuration: configuration)
            try worker.start()
            // Assigned, and min_interval past the assignment (a handoff holds first sends that long):
            // the large update below is then sent on its own, not coalesced into the later ones.
            try await harness.eventually("worker assigned") { worker.isReady().isReady }
            try await Task.sleep(for: .milliseconds(400))
            let base = IntegrationHarness.now - 60
            // A body between the device limit (4096) and the broadcast limit (5120), with a content state
            // within ActivityKit's 4096 bytes (4022 here; the aps wrapper and stale date make the rest).
            let padding = String(repeating: "x", count: 4000)
            try await harness.produce(IntegrationHarness.broadcasts, key: stored,
                                      value: IntegrationHarness.broadcastEvent(id: "big", channel: stored, timestamp: base,
                                                                               state: "{\"pad\":\"\(padding)\",\"score\":\"0-0\"}"))
            try await harness.produce(IntegrationHarness.broadcasts, key: noStorage,
                                      value: IntegrationHarness.broadcastEvent(id: "n1", channel: noStorage, timestamp: base, state: "{\"score\":\"0-0\"}"))
            // Delivered on its own before the later states arrive (they would replace it while its
            // channel's policy is looked up: latest state wins).
            try await harness.eventually("the large broadcast delivered") {
                harness.simulator.deliveries().contains { $0.channel == stored && $0.aps.contains(padding) }
            }
            let start = "{\"v\":1,\"id\":\"st\",\"channel\":\"\(noStorage)\",\"event\":\"start\",\"timestamp\":\(base + 1),\"content_state\":{\"score\":\"0-0\"},\"attributes_type\":\"MatchAttributes\",\"attributes\":{\"home\":\"A\"},\"alert\":{\"title\":\"Kick-off\",\"body\":\"A vs B\"}}"
            try await harness.produce(IntegrationHarness.broadcasts, key: noStorage, value: start)
            for step in 1...3 {
                try await harness.produce(IntegrationHarness.broadcasts, key: stored,
                                          value: IntegrationHarness.broadcastEvent(id: "u\(step)", channel: stored, timestamp: base + Int64(step),
                                                                                   state: "{\"score\":\"\(step)-0\"}"))
            }
            try await harness.produce(IntegrationHarness.broadcasts, key: stored,
                                      value: IntegrationHarness.broadcastEvent(id: "final", channel: stored, timestamp: base + 10,
                                                                               state: "{\"score\":\"3-1\",\"final\":true}", kind: "end"))
            try await harness.eventually("the stored channel's activities ended with the final score") {
                guard let view = harness.simulator.deviceView(channel: stored) else { return false }
                return view.ended && view.contentState.contains("3-1")
            }
            try await harness.eventually("every broadcast offset committed") { try harness.allCommitted(IntegrationHarness.broadcasts) }

            let deliveries = harness.simulator.deliveries()
            let storedSends = deliveries.filter { $0.channel == stored }
            #expect(storedSends.first?.aps.contains(padding) == true, "the broadcast over 4 KB was delivered")
            #expect((storedSends.first?.aps.utf8.count ?? 0) > 4096)
            // Looked up through channel management: the stale date as expiration on every send.
            #expect(storedSends.allSatisfy { ($0.expiration ?? 0) == Int64($0.timestamp) + 900 }, "\(storedSends.map(\.expiration))")
            #expect(storedSends.last?.event == "end")
            #expect(deliveries.filter { $0.channel == noStorage }.allSatisfy { $0.expiration == 0 && $0.event == "update" })
            #expect(harness.simulator.stats().count(status: 400, reason: .badExpirationDate) == 0)
            let letters = try harness.readAll(IntegrationHarness.broadcasts + "-dlq")
            #expect(letters.compactMap { Self.header($0, "fanout-error") } == ["start-on-broadcast"])
            await worker.stop(timeout: .seconds(5))
        }

        /// A channel never created and one deleted: APNs answers BadChannelId and ChannelNotRegistered (as
        /// live APNs does), both events are dead-lettered as channel-not-registered and counted, and the
        /// partition keeps flowing.
        @Test func channelNotRegisteredIsDeadLetteredAndThePartitionFlows() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let app = IntegrationHarness.app
            let live = try harness.simulator.createChannel(bundleID: app, storagePolicy: 0)
            let deleted = try harness.simulator.createChannel(bundleID: app, storagePolicy: 0)
            try await harness.deleteChannel(deleted)
            let neverCreated = "AAAAAAAAAAAAAAAAAAAAAA=="
            let metrics = FanoutMetrics()
            var configuration = harness.configuration()
            configuration.apns.managementBaseURL = harness.simulator.managementURL
            let worker = try harness.makeWorker(name: "cnr", configuration: configuration, metrics: metrics)
            try worker.start()
            let base = IntegrationHarness.now - 60
            for (index, channel) in [neverCreated, deleted, live].enumerated() {
                try await harness.produce(IntegrationHarness.broadcasts, key: channel,
                                          value: IntegrationHarness.broadcastEvent(id: "c\(index)", channel: channel, timestamp: base,
                                                                                   state: "{\"score\":\"\(index)\"}"))
            }
            try await harness.eventually("the live channel got its update") { harness.simulator.deviceView(channel: live) != nil }
            try await harness.eventually("every broadcast offset committed") { try harness.allCommitted(IntegrationHarness.broadcasts) }
            let letters = try harness.readAll(IntegrationHarness.broadcasts + "-dlq")
            #expect(letters.count == 2)
            #expect(letters.allSatisfy { Self.header($0, "fanout-error") == "channel-not-registered" })
            #expect(Set(letters.compactMap { $0.key.map { String(decoding: $0, as: UTF8.self) } }) == [neverCreated, deleted])
            // Per unknown channel: one storage-policy lookup (read channel: 404 BadPath, no such channel)
            // and one send (400 BadChannelId for the never-created id, ChannelNotRegistered for the deleted one).
            #expect(harness.simulator.stats().count(status: 404, reason: .badPath) == 2)
            #expect(harness.simulator.stats().count(status: 400, reason: .channelNotRegistered) == 1)
            #expect(harness.simulator.stats().count(status: 400, reason: .badChannelId) == 1)
            #expect(Self.sample(metrics, "fanout_broadcast_channel_not_registered_total{app=\"\(app)\"}") == 2)
            #expect(Self.sample(metrics, "fanout_dead_letters_total{topic=\"\(IntegrationHarness.broadcasts)\",reason=\"channel-not-registered\"}") == 2)
            #expect(worker.summary.deadLettered["channel-not-registered"] == 2)
            await worker.stop(timeout: .seconds(5))
        }

        /// Push-to-start, chosen per event: one start subscribes the new activity to a channel, the
        /// other asks for an update token; the simulator records both in aps.
        @Test func pushToStartSubscribesToChannelOrAsksForToken() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let channel = try harness.simulator.createChannel(bundleID: IntegrationHarness.app, storagePolicy: 0)
            let worker = try harness.makeWorker(name: "pts")
            try worker.start()
            let base = IntegrationHarness.now - 60
            let viaChannel = IntegrationHarness.token(201), viaToken = IntegrationHarness.token(202)
            func start(_ key: String, token: String, extra: String) -> String {
                "{\"v\":1,\"id\":\"start-\(key)\",\"activity\":\"\(key)\",\"event\":\"start\",\"timestamp\":\(base),\"token\":\"\(token)\",\"attributes_type\":\"MatchAttributes\",\"attributes\":{\"home\":\"A\",\"away\":\"B\"},\"content_state\":{\"score\":\"0-0\"},\"alert\":{\"title\":\"Kick-off\",\"body\":\"A vs B\"},\(extra)}"
            }
            try await harness.produceEvent(key: "fan-1", start("fan-1", token: viaChannel, extra: "\"input_push_channel\":\"\(channel)\""))
            try await harness.produceEvent(key: "fan-2", start("fan-2", token: viaToken, extra: "\"input_push_token\":true"))
            try await harness.eventually("both starts delivered") {
                let tokens = Set(harness.simulator.deliveries().compactMap(\.token))
                return tokens.contains(viaChannel) && tokens.contains(viaToken)
            }
            let deliveries = harness.simulator.deliveries()
            let subscribed = try #require(deliveries.first { $0.token == viaChannel })
            let asking = try #require(deliveries.first { $0.token == viaToken })
            #expect(subscribed.event == "start" && asking.event == "start")
            let subscribedAPS = try #require(try JSONSerialization.jsonObject(with: Data(subscribed.aps.utf8)) as? [String: Any])
            let askingAPS = try #require(try JSONSerialization.jsonObject(with: Data(asking.aps.utf8)) as? [String: Any])
            #expect(subscribedAPS["input-push-channel"] as? String == channel)
            #expect(subscribedAPS["input-push-token"] == nil)
            #expect((askingAPS["input-push-token"] as? NSNumber)?.intValue == 1)
            #expect(askingAPS["input-push-channel"] == nil)
            #expect(subscribedAPS["attributes-type"] as? String == "MatchAttributes")
            try await harness.eventually("every offset committed") { try harness.allCommitted() }
            await worker.stop(timeout: .seconds(5))
        }
    }
}
