import APNsModel
import FanoutCrypto
import FanoutHTTP2
import Synchronization
import Testing
@testable import FanoutAPNs

/// Exactly-once completion by construction: a report completes only the dispatch whose ticket it
/// carries. The races these guard against (a late end reaching a pooled object already serving the
/// next request) cannot be provoked deterministically over a network, so the tables are driven directly.
@Suite struct CompletionTicketTests {
    /// Counts the runs of each completion it hands out.
    final class CompletionLog: Sendable {
        let runs = Mutex<[Int: Int]>([:])
        func completion(_ n: Int) -> CarriedRequest.Completion {
            .exchange { [self] _ in runs.withLock { $0[n, default: 0] += 1 } }
        }
        func count(_ n: Int) -> Int { runs.withLock { $0[n] ?? 0 } }
    }

    @Test func ticketsAreNeverReused() {
        var issuer = DispatchTicketIssuer()
        let issued = (0..<10_000).map { _ in issuer.issue() }
        #expect(Set(issued).count == issued.count)
        #expect(issued == issued.sorted())
    }

    @Test func onlyTheCarriedTicketTakesTheCompletionAndOnlyOnce() {
        var issuer = DispatchTicketIssuer()
        let log = CompletionLog()
        var carried = CarriedRequest()
        let first = issuer.issue()
        carried.begin(first, completion: log.completion(1))
        carried.take(first)?(.failure(.shutDown))
        #expect(carried.take(first) == nil, "a second report of the same end takes nothing")
        // The object is re-dispatched: the first dispatch's late report must not reach the second request.
        let second = issuer.issue()
        carried.begin(second, completion: log.completion(2))
        #expect(carried.take(first) == nil)
        #expect(carried.ticket == second)
        carried.take(second)?(.failure(.shutDown))
        #expect(log.count(1) == 1)
        #expect(log.count(2) == 1)
        #expect(carried.ticket == nil)
    }

    @Test func lateReportForARedispatchedStreamIsCountedAndCompletesNothing() throws {
        let counters = APNsClientCounters()
        let engine = try HTTP2TransportEngine(
            configuration: APNsClientConfiguration(endpoint: .custom(baseURL: "https://127.0.0.1:9", caFile: nil),
                                                   credentials: TestApps.credentials(key: try P256PrivateKey.generate()),
                                                   tokenCache: ProviderTokenCache()),
            queue: SubmissionQueue(capacity: 4), counters: counters, finished: ShutdownSignal())
        var issuer = DispatchTicketIssuer()
        let log = CompletionLog()
        let stream = HTTP2Stream()
        // Request 1 ended and completed; the pooled object now carries request 2 under the same stream id.
        let first = issuer.issue()
        stream.carried.begin(first, completion: log.completion(1))
        stream.carried.take(first)?(.failure(.shutDown))
        stream.carried.begin(issuer.issue(), completion: log.completion(2))
        stream.streamID = 1
        engine.sink.ended.append(.init(stream: stream, ticket: first, end: .response))
        engine.sink.ended.append(.init(stream: HTTP2Stream(), ticket: nil, end: .streamFailed("idle object")))
        engine.completeEnded()
        #expect(counters.unmatchedEnds.load(ordering: .relaxed) == 2)
        #expect(counters.completed.load(ordering: .relaxed) == 0)
        #expect(log.count(1) == 1)
        #expect(log.count(2) == 0, "the late report must not complete the request the object carries now")
        #expect(stream.isActive)
    }

    /// The nghttp2 connection's timeout scan visits only the due deadlines (never every stream on the
    /// wire), ends each expired stream once and drops the entries of streams already answered.
    @Test func timeoutScanTerminatesAndEndsEachExpiredStreamOnce() throws {
        let events = try SocketEventSet(capacity: 4)
        let sink = HTTP2CompletionSink()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1024, alignment: 16)
        defer { buffer.deallocate() }
        // Made before `now` is read: the connection starts its stream scan from the clock when it is
        // made, and loading the system CAs can take longer than the second this test steps forward.
        let tlsContext = try TLSClientContext(caFile: nil)
        let endpoint = try HTTP2Endpoint(baseURL: "https://127.0.0.1:9")
        let now = ContinuousClock.now
        let connection = HTTP2ClientConnection(
            index: 0,
            gate: ConnectionGate(streamCap: 10, idleReprobe: nil, backoffMinimum: .milliseconds(10), backoffMaximum: .seconds(1), now: now),
            settings: .init(endpoint: endpoint, connectTimeout: .seconds(10),
                            requestTimeout: .seconds(1), upkeepInterval: .seconds(60), pingTimeout: .seconds(10)),
            tlsContext: tlsContext, events: events, sink: sink, counters: APNsClientCounters(),
            resolver: HTTP2Resolver(events: events), readBuffer: buffer)
        var issuer = DispatchTicketIssuer()
        let log = CompletionLog()
        var wire: [HTTP2Stream] = []
        for n in 0..<6 {
            let stream = HTTP2Stream()
            let ticket = issuer.issue()
            stream.carried.begin(ticket, completion: log.completion(n))
            stream.streamID = Int32(2 * n + 1)
            // Submitted in order with one request timeout: deadlines never decrease on a connection.
            stream.deadline = n < 3 ? now : now + .seconds(3600)
            stream.slot = wire.count  // as `start` puts it on the wire
            wire.append(stream)
            connection.deadlines.append(stream, ticket: ticket, deadline: stream.deadline)
        }
        // Stream 1 was answered (its completion taken) and left the wire: its due entry ends nothing.
        _ = wire[1].carried.take(wire[1].carried.ticket!)
        wire.remove(at: 1)
        for (slot, stream) in wire.enumerated() { stream.slot = slot }
        connection.streams = wire
        connection.state = .ready
        connection.tick(now: now + .seconds(1))
        #expect(connection.streams.count == 3)
        #expect(connection.streams.allSatisfy { $0.deadline > now + .seconds(1) })
        #expect(connection.streams.enumerated().allSatisfy { $0.element.slot == $0.offset })
        #expect(sink.ended.count == 2, "streams 0 and 2 timed out; 1 was answered before")
        #expect(Set(sink.ended.map { ObjectIdentifier($0.stream) }).count == 2)
        // Only what was due was visited: the three streams a hour away keep their entries.
        #expect(connection.deadlines.count == 3)
        for report in sink.ended {
            guard case .timedOut(let text) = report.end else { Issue.record("\(report.end)"); continue }
            #expect(text.contains("request timeout"))
            #expect(report.ticket == report.stream.carried.ticket)
        }
        connection.streams = []
        connection.state = .idle
    }
}

@Suite struct DeadlineQueueTests {
    final class Item {
        var carried: DispatchTicket?
        init(_ ticket: DispatchTicket) { carried = ticket }
    }

    @Test func popsExpiredInOrderDropsCompletedAndBoundsEachScan() {
        let start = ContinuousClock.now
        var issuer = DispatchTicketIssuer()
        var queue = DeadlineQueue<Item>()
        var items: [Item] = []
        for n in 0..<10 {
            let ticket = issuer.issue()
            let item = Item(ticket)
            items.append(item)
            queue.append(item, ticket: ticket, deadline: start + .seconds(n))
        }
        // Requests 0, 1 and 5 were answered; 2 completed and its object was re-dispatched (another ticket).
        for n in [0, 1, 5] { items[n].carried = nil }
        items[2].carried = issuer.issue()
        var expired: [DeadlineQueue<Item>.Entry] = []
        let isCarried: (Item, DispatchTicket) -> Bool = { $0.carried == $1 }
        // Two entries per scan: the work of one scan is bounded whatever is due.
        #expect(queue.popExpired(now: start + .seconds(6), limit: 2, isCarried: isCarried, into: &expired))
        #expect(expired.isEmpty, "0 and 1 were answered: dropped, not expired")
        #expect(queue.popExpired(now: start + .seconds(6), limit: 2, isCarried: isCarried, into: &expired))
        #expect(expired.map { $0.element } .map { element in items.firstIndex { $0 === element }! } == [3])
        #expect(!queue.popExpired(now: start + .seconds(6), limit: 100, isCarried: isCarried, into: &expired))
        #expect(expired.map { $0.element } .map { element in items.firstIndex { $0 === element }! } == [3, 4, 6])
        #expect(queue.count == 3)
        #expect(queue.earliestDeadline == start + .seconds(7))
        expired.removeAll()
        #expect(!queue.popExpired(now: start + .seconds(100), limit: 100, isCarried: isCarried, into: &expired))
        #expect(expired.count == 3)
        #expect(queue.count == 0)
        #expect(queue.earliestDeadline == nil)
    }
}
