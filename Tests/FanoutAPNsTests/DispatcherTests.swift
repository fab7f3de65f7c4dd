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

    /// What one dispatch pass did.
    struct Pass {
        var withdrawn: [Int]
        /// Each started submission's place in the queue and the connection it went to.
        var started: [(index: Int, connection: Int)]
        var spare: Bool
        var stillQueued: Int
        var inFlight: [Int]
    }

    /// One pass over `refused` sends of a lost partition queued ahead of `admitted` of a kept one.
    private static func pass(slots: [Int], refused: Int, admitted: Int) throws -> Pass {
        let connections = slots.map { Connection(slots: $0) }
        var dispatcher = Dispatcher(connections: connections, maxInFlight: 1000, tokenCache: ProviderTokenCache(),
                                    gate: RefusingGate(refusing: 1))
        let ends = Ends()
        let queue = try Self.queue(refused: refused, admitted: admitted, ends: ends)
        var batch: [Submission] = []
        var started: [(index: Int, connection: Int)] = []
        let spare = dispatcher.dispatch(from: queue, into: &batch, inFlight: 0, now: .now) { submission, connection, _ in
            connection.inFlight += 1
            let index = (refused..<(refused + admitted)).first { TestApps.updatePayload($0) == submission.request.body } ?? -1
            started.append((index, connections.firstIndex { $0 === connection }!))
        }
        return Pass(withdrawn: ends.withdrawn.withLock { $0 }, started: started, spare: spare, stillQueued: queue.count,
                    inFlight: connections.map(\.inFlight))
    }

    @Test func oneProbingSlotPerConnectionStillClearsEveryWithdrawnSendInOnePass() throws {
        // Two probing connections (one slot each), as after a request timeout.
        let pass = try Self.pass(slots: [1, 1], refused: 1500, admitted: 5)
        #expect(pass.withdrawn == Array(0..<1500), "every withdrawn send completes in the first pass, in order")
        #expect(pass.started.map(\.index) == [1500, 1501], "then a send per free slot")
        #expect(Set(pass.started.map(\.connection)) == [0, 1], "one on each connection")
        #expect(!pass.spare, "the slots are used")
        #expect(pass.stillQueued == 3, "the rest stays queued for the next pass")
    }

    @Test func withdrawnSendsLeaveTheRoomToTheOthersAndTheQueueEmpty() throws {
        let pass = try Self.pass(slots: [500, 500], refused: 2000, admitted: 300)
        #expect(pass.withdrawn.count == 2000)
        #expect(pass.started.map(\.index) == Array(2000..<2300), "in queue order")
        #expect(pass.spare, "room is left: the queue is empty")
        #expect(pass.stillQueued == 0)
        #expect(pass.inFlight == [150, 150], "spread over the least loaded")
    }
}
