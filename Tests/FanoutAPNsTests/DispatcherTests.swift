import APNsModel
import FanoutCrypto
import Foundation
import Synchronization
import Testing
@testable import FanoutAPNs

/// The dispatch pass both transports share: a submission completed without being started (its permit
/// withdrawn, its token unsignable) takes no connection slot, so one pass clears every such submission
/// ahead of those it can start, however few slots the connections have.
@Suite struct DispatcherTests {
    final class Connection: PooledConnection {
        var inFlight = 0
        let slots: Int
        init(slots: Int) { self.slots = slots }
        func capacity(now: ContinuousClock.Instant) -> Int { slots }
    }

    final class RefusingGate: WriteGate {
        let refused: UInt64
        init(refusing assignment: UInt64) { refused = assignment }
        func isOpen() -> Bool { true }
        func admits(_ permit: WritePermit) -> Bool { permit.assignment != refused }
    }

    /// What each queued submission ended as, by its place in the queue.
    final class Ends: Sendable {
        let withdrawn = Mutex<[Int]>([])
        func completion(_ n: Int) -> SubmissionCompletion {
            .exchange { [self] outcome in
                if case .failure(.withdrawn) = outcome { withdrawn.withLock { $0.append(n) } }
            }
        }
    }

    private static func queue(refused: Int, admitted: Int, ends: Ends) throws -> SubmissionQueue {
        let credentials = APNsCredentials(teamID: TestApps.teamID, keyID: TestApps.keyID, key: try P256PrivateKey(pem: RFC6979Vectors.privateKeyPEM))
        let queue = SubmissionQueue(capacity: refused + admitted)
        for n in 0..<(refused + admitted) {
            let request = try TestApps.push(n).http(liveActivityTopic: TestApps.bundleID + ".push-type.liveactivity")
            _ = try queue.append(Submission(request: request, credentials: credentials,
                                            permit: WritePermit(assignment: n < refused ? 1 : 2), completion: ends.completion(n)))
        }
        return queue
    }

    @Test func oneProbingSlotPerConnectionStillClearsEveryWithdrawnSendInOnePass() throws {
        // Two probing connections (one slot each), as after a request timeout; 1500 sends of a lost
        // partition queued ahead of 5 of a kept one.
        let connections = [Connection(slots: 1), Connection(slots: 1)]
        var dispatcher = Dispatcher(connections: connections, maxInFlight: 1000, tokenCache: ProviderTokenCache(),
                                    gate: RefusingGate(refusing: 1))
        let ends = Ends()
        let queue = try Self.queue(refused: 1500, admitted: 5, ends: ends)
        var batch: [Submission] = []
        var started: [(index: Int, connection: Int)] = []
        let spare = dispatcher.dispatch(from: queue, into: &batch, inFlight: 0, now: .now) { submission, connection, _ in
            connection.inFlight += 1
            let index = (0..<1505).first { TestApps.updatePayload($0) == submission.request.body } ?? -1
            started.append((index, connections.firstIndex { $0 === connection }!))
        }
        #expect(ends.withdrawn.withLock { $0 } == Array(0..<1500), "every withdrawn send completes in the first pass, in order")
        #expect(started.map(\.index) == [1500, 1501], "then a send per free slot")
        #expect(Set(started.map(\.connection)) == [0, 1], "one on each connection")
        #expect(!spare, "the slots are used")
        #expect(queue.count == 3, "the rest stays queued for the next pass")
    }

    @Test func withdrawnSendsLeaveTheRoomToTheOthersAndTheQueueEmpty() throws {
        let connections = [Connection(slots: 500), Connection(slots: 500)]
        var dispatcher = Dispatcher(connections: connections, maxInFlight: 1000, tokenCache: ProviderTokenCache(),
                                    gate: RefusingGate(refusing: 1))
        let ends = Ends()
        let queue = try Self.queue(refused: 2000, admitted: 300, ends: ends)
        var batch: [Submission] = []
        var started = 0
        let spare = dispatcher.dispatch(from: queue, into: &batch, inFlight: 0, now: .now) { _, connection, _ in
            connection.inFlight += 1
            started += 1
        }
        #expect(ends.withdrawn.withLock { $0.count } == 2000)
        #expect(started == 300)
        #expect(spare, "room is left: the queue is empty")
        #expect(queue.count == 0)
        #expect(connections.map(\.inFlight) == [150, 150], "spread over the least loaded")
    }
}
