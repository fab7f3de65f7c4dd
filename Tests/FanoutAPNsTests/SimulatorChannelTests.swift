import APNsModel
import APNsSimulator
import Foundation
import Testing
@testable import FanoutAPNs
import FanoutCrypto

@Suite struct SimulatorChannelTests {
    @Test(arguments: APNsClientConfiguration.Transport.allCases)
    func createReadListBroadcastDelete(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness(broadcastApps: [TestApps.bundleID])
        let channels = try APNsChannelClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: harness.simulator.managementURL, caFile: harness.simulator.caCertificatePath),
            credentials: TestApps.credentials(key: harness.key), connections: 1, tokenCache: harness.cache, transport: transport))
        let id = try await channels.create(bundleID: TestApps.bundleID, storagePolicy: .noMessageStored)
        #expect(!id.isEmpty)
        let channel = try await channels.read(bundleID: TestApps.bundleID, channelID: id)
        #expect(channel.storagePolicy == .noMessageStored)
        #expect(try await channels.list(bundleID: TestApps.bundleID).contains(id))

        // Broadcast to it on the push host.
        let pushes = try harness.client(transport)
        let broadcast = try APNsRequest.broadcast(channelID: id, bundleID: TestApps.bundleID,
                                                  payload: TestApps.updatePayload(), priority: .immediate, expiration: 0)
        let sent = await pushes.send(broadcast)
        #expect(sent.outcome == .delivered, "\(sent)")

        #expect(try await channels.delete(bundleID: TestApps.bundleID, channelID: id) == .deleted)
        #expect(try await !channels.list(bundleID: TestApps.bundleID).contains(id))
        // Gone: a read says there is no such channel, a second delete that it is already gone.
        do {
            _ = try await channels.read(bundleID: TestApps.bundleID, channelID: id)
            Issue.record("read of a deleted channel succeeded")
        } catch let APNsChannelError.noSuchChannel(channelID, result) {
            #expect(channelID == id)
            #expect(result.status == 404 && result.reason == .badPath)
        }
        guard case .alreadyGone(let again) = try await channels.delete(bundleID: TestApps.bundleID, channelID: id) else {
            Issue.record("a second delete of the same channel was not 'already gone'"); return
        }
        #expect(again.status == 404 && again.reason == .badPath)
        // Broadcast to the deleted channel: the channel is gone.
        let afterDelete = await pushes.send(broadcast)
        guard case .tokenGone = afterDelete.outcome else { Issue.record("expected tokenGone, got \(afterDelete)"); return }
        await pushes.shutdown(deadline: .now + .seconds(5))
        await channels.shutdown(deadline: .now + .seconds(5))
    }
}
