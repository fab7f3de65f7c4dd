import APNsSimulator
import FanoutKafka
import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    /// docs/design.md §7: the two lanes have separate queues, connections, limits, backoff and metrics,
    /// so a flood or an outage in one never delays the other. Faults are scoped to one kind of
    /// push in the simulator; delays are measured from produce time to the simulator's delivery
    /// record and bounded relative to the lane's own `min_interval`, with a generous margin (these
    /// are isolation checks, not speed checks: an unisolated lane misses them by the storm's backoffs).
    @Suite struct LaneIsolation {
        /// Rounds are spaced wider than min_interval, so an undelayed lane sends every round's state
        /// on its own; a lane delayed by more than the slack would coalesce rounds.
        static let minInterval: Duration = .seconds(1)
        static let spacing: Duration = .milliseconds(2500)
        static let margin: Double = 2.0

        static func sample(_ metrics: FanoutMetrics, prefix: String) -> Double {
            metrics.registry.render().split(separator: "\n").filter { $0.hasPrefix(prefix) }
                .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
        }

        static func seconds(_ duration: Duration) -> Double { Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18 }

        /// A 50:1 flood of per-activity events while 60% of device pushes fail with 429/500: every
        /// broadcast round still arrives on its own, within min_interval (+ margin) of being produced.
        @Test func deviceFloodAndErrorStormDoNotDelayBroadcasts() async throws {
            let harness = try IntegrationHarness(partitions: 2)
            let channel = try harness.simulator.createChannel(bundleID: IntegrationHarness.app, storagePolicy: 0)
            let keys = (0..<20).map { "job-\($0)" }
            let base = IntegrationHarness.now - 600
            for (index, key) in keys.enumerated() {
                try await harness.registerToken(key: key, token: IntegrationHarness.token(index), at: base - 10)
            }
            try harness.simulator.setFaults(APNsSimulatorFaults(internalServerErrorRate: 0.3, tooManyRequestsRate: 0.3, scope: .devicePushes))
            let metrics = FanoutMetrics()
            var configuration = harness.configuration()
            configuration.engine.broadcast.minInterval = Self.minInterval
            configuration.engine.standard.minInterval = Self.minInterval
            let worker = try harness.makeWorker(name: "iso-b", configuration: configuration, metrics: metrics)
            try worker.start()
            // Measure from an assigned worker: joining the group is not a lane's delay.
            try await harness.eventually("the worker is assigned") { worker.isReady().isReady }

            let rounds = 6
            var produced: [Double] = []
            var activityEvents = 0
            for round in 0..<rounds {
                let roundStart = ContinuousClock.now
                produced.append(Date().timeIntervalSince1970)
                try await harness.produce(IntegrationHarness.broadcasts, key: channel,
                                          value: IntegrationHarness.broadcastEvent(id: "b\(round)", channel: channel, timestamp: base + Int64(round) * 100,
                                                                                   state: "{\"score\":\"r\(round)\"}"))
                for step in 0..<50 {
                    let key = keys[step % keys.count]
                    try await harness.produceEvent(key: key, IntegrationHarness.event(
                        id: "\(key)-\(round)-\(step)", key: key, timestamp: base + Int64(round) * 100 + Int64(step), state: "{\"phase\":\"p\(round)-\(step)\"}"))
                    activityEvents += 1
                }
                try await Task.sleep(until: roundStart + Self.spacing, clock: .continuous)
            }
            try await harness.eventually("the channel shows the last round") {
                harness.simulator.deviceView(channel: channel)?.contentState.contains("r\(rounds - 1)") == true
            }

            let broadcasts = harness.simulator.deliveries().filter { $0.kind == .broadcast }
            // Every round was sent on its own (none coalesced into a later one), in order.
            #expect(broadcasts.map(\.aps).map { aps in (0..<rounds).first { aps.contains("\"r\($0)\"") } ?? -1 } == Array(0..<rounds))
            let bound = Self.seconds(Self.minInterval) + Self.margin
            for (round, record) in broadcasts.enumerated() where round < rounds {
                let delay = record.time - produced[round]
                #expect(delay <= bound, "broadcast round \(round) arrived \(delay) s after it was produced (bound \(bound) s)")
            }
            // The storm and the flood were real, and stayed on the device lane.
            let stats = harness.simulator.stats()
            #expect(stats.count(status: 429, reason: .tooManyRequests) > 0)
            #expect(stats.count(status: 500, reason: .internalServerError) > 0)
            #expect(activityEvents == rounds * 50)
            #expect(Self.sample(metrics, prefix: "fanout_apns_errors_total{lane=\"activity\"") > 0)
            #expect(Self.sample(metrics, prefix: "fanout_apns_errors_total{lane=\"broadcast\"") == 0)
            #expect(Self.sample(metrics, prefix: "fanout_apns_sends_total{lane=\"activity\"") > Double(rounds))
            await worker.stop(timeout: .seconds(2))
        }

        /// Broadcasts answered 503 for several seconds: per-activity updates keep arriving each round,
        /// within min_interval (+ margin); the broadcasts are delivered after the outage.
        @Test func broadcastOutageDoesNotSlowActivityDelivery() async throws {
            let harness = try IntegrationHarness(partitions: 2)
            let channels = try (0..<3).map { _ in try harness.simulator.createChannel(bundleID: IntegrationHarness.app, storagePolicy: 0) }
            let keys = (0..<4).map { "ride-\($0)" }
            let base = IntegrationHarness.now - 600
            for (index, key) in keys.enumerated() {
                try await harness.registerToken(key: key, token: IntegrationHarness.token(index + 100), at: base - 10)
            }
            let metrics = FanoutMetrics()
            var configuration = harness.configuration()
            configuration.engine.broadcast.minInterval = Self.minInterval
            configuration.engine.standard.minInterval = Self.minInterval
            configuration.engine.standard.priority10Burst = 20
            let worker = try harness.makeWorker(name: "iso-a", configuration: configuration, metrics: metrics)
            try worker.start()
            try await harness.eventually("the worker is assigned") { worker.isReady().isReady }

            let rounds = 5
            let outageStart = Date().timeIntervalSince1970
            let outageEnd = outageStart + Double(rounds) * Self.seconds(Self.spacing)
            try harness.simulator.setFaults(APNsSimulatorFaults(outageStart: outageStart, outageEnd: outageEnd, scope: .broadcasts))
            var produced: [[Double]] = Array(repeating: [], count: keys.count)
            for round in 0..<rounds {
                let roundStart = ContinuousClock.now
                // The broadcast lane gets a flood of its own into the outage.
                for (index, channel) in channels.enumerated() {
                    for step in 0..<10 {
                        try await harness.produce(IntegrationHarness.broadcasts, key: channel, value: IntegrationHarness.broadcastEvent(
                            id: "b\(index)-\(round)-\(step)", channel: channel, timestamp: base + Int64(round * 100 + step),
                            state: "{\"score\":\"r\(round)-\(step)\"}"))
                    }
                }
                for (index, key) in keys.enumerated() {
                    produced[index].append(Date().timeIntervalSince1970)
                    try await harness.produceEvent(key: key, IntegrationHarness.event(id: "\(key)-\(round)", key: key, timestamp: base + Int64(round) * 100,
                                                                                      state: "{\"phase\":\"r\(round)\"}"))
                }
                try await Task.sleep(until: roundStart + Self.spacing, clock: .continuous)
            }
            #expect(harness.simulator.stats().count(status: 503, reason: .serviceUnavailable) > 0, "the broadcast outage was real")
            try await harness.eventually("every activity shows the last round") {
                keys.indices.allSatisfy { harness.simulator.deviceView(token: IntegrationHarness.token($0 + 100))?.contentState.contains("r\(rounds - 1)") == true }
            }

            let bound = Self.seconds(Self.minInterval) + Self.margin
            let deliveries = harness.simulator.deliveries()
            for (index, _) in keys.enumerated() {
                let sends = deliveries.filter { $0.token == IntegrationHarness.token(index + 100) }
                #expect(sends.map(\.aps).map { aps in (0..<rounds).first { aps.contains("\"r\($0)\"") } ?? -1 } == Array(0..<rounds))
                for (round, record) in sends.enumerated() where round < rounds {
                    let delay = record.time - produced[index][round]
                    #expect(delay <= bound, "activity \(index) round \(round) arrived \(delay) s after it was produced (bound \(bound) s)")
                }
            }
            #expect(Self.sample(metrics, prefix: "fanout_apns_errors_total{lane=\"activity\"") == 0)
            #expect(Self.sample(metrics, prefix: "fanout_apns_errors_total{lane=\"broadcast\"") > 0)
            // After the outage the broadcasts get through too.
            try await harness.eventually("every channel shows its last state", timeout: .seconds(60)) {
                channels.allSatisfy { harness.simulator.deviceView(channel: $0)?.contentState.contains("r\(rounds - 1)-9") == true }
            }
            await worker.stop(timeout: .seconds(2))
        }

        /// Device pushes down long enough for the per-activity lane to reach the backpressure bounds:
        /// its partitions pause, the broadcast lane's keep flowing (its totals are its own).
        @Test func activityBackpressureDoesNotPauseBroadcastIntake() async throws {
            let harness = try IntegrationHarness(partitions: 2)
            let channel = try harness.simulator.createChannel(bundleID: IntegrationHarness.app, storagePolicy: 0)
            let keys = (0..<30).map { "order-\($0)" }
            let base = IntegrationHarness.now - 600
            for (index, key) in keys.enumerated() {
                try await harness.registerToken(key: key, token: IntegrationHarness.token(index + 50), at: base - 10)
            }
            let metrics = FanoutMetrics()
            var configuration = harness.configuration()
            configuration.backpressure.maxPendingTargets = 10
            configuration.backpressure.maxInFlight = 10
            configuration.engine.broadcast.minInterval = Self.minInterval
            let worker = try harness.makeWorker(name: "iso-bp", configuration: configuration, metrics: metrics)
            try worker.start()
            try await harness.eventually("the worker is assigned") { worker.isReady().isReady }
            let outageStart = Date().timeIntervalSince1970
            try harness.simulator.setFaults(APNsSimulatorFaults(outageStart: outageStart, outageEnd: outageStart + 30, scope: .devicePushes))
            for key in keys {
                try await harness.produceEvent(key: key, IntegrationHarness.event(id: "\(key)-0", key: key, timestamp: base, state: "{\"phase\":\"a\"}"))
            }
            try await harness.eventually("the per-activity lane is paused by backpressure") {
                (Self.sample(metrics, prefix: "fanout_paused_partitions{topic=\"\(IntegrationHarness.updates)\"}")) > 0
            }
            var produced: [Double] = []
            for round in 0..<3 {
                let roundStart = ContinuousClock.now
                produced.append(Date().timeIntervalSince1970)
                try await harness.produce(IntegrationHarness.broadcasts, key: channel, value: IntegrationHarness.broadcastEvent(
                    id: "bp\(round)", channel: channel, timestamp: base + Int64(round), state: "{\"score\":\"r\(round)\"}"))
                try await Task.sleep(until: roundStart + Self.spacing, clock: .continuous)
            }
            try await harness.eventually("the channel shows the last round", timeout: .seconds(20)) {
                harness.simulator.deviceView(channel: channel)?.contentState.contains("r2") == true
            }
            #expect(Date().timeIntervalSince1970 < outageStart + 30, "the broadcasts arrived during the device outage")
            let broadcasts = harness.simulator.deliveries().filter { $0.kind == .broadcast }
            let bound = Self.seconds(Self.minInterval) + Self.margin
            #expect(broadcasts.count == 3)
            for (round, record) in broadcasts.enumerated() where round < produced.count {
                #expect(record.time - produced[round] <= bound, "broadcast round \(round) arrived \(record.time - produced[round]) s after it was produced")
            }
            #expect(Self.sample(metrics, prefix: "fanout_paused_partitions{topic=\"\(IntegrationHarness.broadcasts)\"}") == 0)
            await worker.abort()
        }
    }
}
