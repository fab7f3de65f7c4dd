@testable import APNsSimulator
import Testing

@Suite("Simulator state: delivery ring and device views")
struct SimulatorStateTests {
    static func record(_ number: Int, token: String) -> DeliveryRecord {
        DeliveryRecord(time: Double(number), kind: .device, token: token, channel: nil, bundleID: "com.example.app", priority: 10,
                       apnsID: "id-\(number)", uniqueID: "unique-\(number)", topic: "com.example.app.push-type.liveactivity",
                       pushType: "liveactivity", expiration: nil, collapseID: nil, event: "update", timestamp: Double(number),
                       aps: "{}")
    }

    @Test func fullRingEvictsOldestAndHandsItBack() {
        var configuration = APNsSimulatorConfiguration(teamID: "TEAM123456", keys: [:], apps: ["com.example.app"])
        configuration.deliveryMemoryCapacity = 3
        var state = SimulatorState(configuration: configuration)
        var evicted: [String] = []
        for number in 1...5 {
            if let old = state.recordAccepted(Self.record(number, token: "t\(number)"), event: .update, contentState: "{}") {
                evicted.append(old.apnsID)
            }
        }
        #expect(evicted == ["id-1", "id-2"])
        #expect(state.deliveries.map(\.apnsID) == ["id-3", "id-4", "id-5"])
        #expect(state.stats.accepted == 5)
    }

    @Test func deliveriesFromAnIndexFollowTheRingAndCountWhatItDropped() {
        var configuration = APNsSimulatorConfiguration(teamID: "TEAM123456", keys: [:], apps: ["com.example.app"])
        configuration.deliveryMemoryCapacity = 3
        var state = SimulatorState(configuration: configuration)
        #expect(state.deliveries(from: 0).records.isEmpty && state.deliveries(from: 0).next == 0)
        for number in 0..<2 { state.recordAccepted(Self.record(number, token: "t"), event: .update, contentState: "{}") }
        let first = state.deliveries(from: 0)
        #expect(first.records.map(\.apnsID) == ["id-0", "id-1"] && first.next == 2 && first.missed == 0)
        for number in 2..<7 { state.recordAccepted(Self.record(number, token: "t"), event: .update, contentState: "{}") }
        // The ring holds 4, 5, 6: a reader at 2 lost 2 and 3.
        let second = state.deliveries(from: first.next)
        #expect(second.records.map(\.apnsID) == ["id-4", "id-5", "id-6"] && second.next == 7 && second.missed == 2)
        let third = state.deliveries(from: 5)
        #expect(third.records.map(\.apnsID) == ["id-5", "id-6"] && third.next == 7 && third.missed == 0)
        #expect(state.deliveries(from: 7).records.isEmpty && state.deliveries(from: 7).next == 7)
    }

    @Test func tokensSharingATailKeepSeparateViews() {
        let configuration = APNsSimulatorConfiguration(teamID: "TEAM123456", keys: [:], apps: ["com.example.app"])
        var state = SimulatorState(configuration: configuration)
        let tail = String(repeating: "0", count: 96)
        let tokens = (1...50).map { String(repeating: String($0 % 10), count: 64) + tail }
        for (number, token) in tokens.enumerated() {
            state.recordAccepted(Self.record(number, token: token), event: .update, contentState: "{\"n\":\(number)}")
        }
        #expect(state.deviceViews.count == 10)
        #expect(state.deviceViews.view(tokens[0])?.applied == 5)
        #expect(state.deviceViews.view(tokens[9])?.contentState == "{\"n\":49}")
    }
}
