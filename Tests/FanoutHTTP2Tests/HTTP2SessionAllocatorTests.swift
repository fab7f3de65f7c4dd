@testable import FanoutHTTP2
import Testing

/// A client session's nghttp2 blocks come from a pool of its own (`HTTP2Session.allocatorStats`):
/// after a warm-up the requests of a busy connection are served from recycled blocks, every block
/// goes back, and the pool keeps no more than its bound, whatever was in flight at once.
struct HTTP2SessionAllocatorTests {
    typealias Harness = HTTP2SessionTests

    /// Sends `count` requests with bodies, `concurrent` at a time, each answered 200 with a body.
    static func run(_ client: HTTP2Session, _ server: HTTP2Session, _ clientSide: Harness.Recorder, _ serverSide: Harness.Recorder,
                    requests count: Int, concurrent: Int) throws {
        let context = Harness.Context()
        var sent = 0
        while sent < count {
            var streams: [Int32] = []
            for _ in 0..<min(concurrent, count - sent) {
                var headers = Harness.request(path: "/3/device/\(String(repeating: "ab", count: 80))", body: true)
                headers.add("authorization", "bearer " + String(repeating: "j", count: 200), index: false)
                let streamID = try client.submitRequest(&headers, hasBody: true, context: context)
                clientSide.bodies[streamID] = Array("hello".utf8)
                streams.append(streamID)
            }
            try Harness.exchange(client, server)
            for streamID in streams { try Harness.respond(server, serverSide, streamID: streamID) }
            try Harness.exchange(client, server)
            for streamID in streams {
                #expect(clientSide.headers[streamID]?[":status"] == "200")
                #expect(clientSide.data[streamID] == Array("{}".utf8))
                #expect(clientSide.closed[streamID] == .noError)
            }
            sent += streams.count
        }
    }

    @Test func aBusyClientSessionRecyclesItsBlocksAndKeepsItsPoolBounded() throws {
        let clientSide = Harness.Recorder(), serverSide = Harness.Recorder()
        try withExtendedLifetime((clientSide, serverSide)) {
            let (client, server) = try Harness.pair(clientSide, serverSide)
            #expect(server.allocatorStats == nil, "a server session uses the heap")
            try Self.run(client, server, clientSide, serverSide, requests: 100, concurrent: 100)   // warm: one round at full concurrency
            let warm = try #require(client.allocatorStats)
            try Self.run(client, server, clientSide, serverSide, requests: 2000, concurrent: 100)
            let after = try #require(client.allocatorStats)

            let made = after.allocations - warm.allocations
            let reused = after.recycled - warm.recycled
            #expect(made >= 2000 * 4, "nghttp2 makes several blocks per request: \(made) for 2000")
            #expect(Double(reused) >= 0.99 * Double(made), "\(reused) of \(made) blocks recycled once warm")
            #expect(after.outstanding == warm.outstanding, "every request's blocks went back to the pool")
            #expect(after.cachedBytes <= 8 * 256 * 1024)
        }
    }

    @Test func thePoolKeepsAtMostItsBoundFreeAfterABurst() throws {
        let clientSide = Harness.Recorder(), serverSide = Harness.Recorder()
        try withExtendedLifetime((clientSide, serverSide)) {
            // 100 streams' worth at once, then quiet: what the burst freed beyond the bound went to the heap.
            let (client, server) = try Harness.pair(clientSide, serverSide, peerMaxConcurrentStreams: 1000)
            try Self.run(client, server, clientSide, serverSide, requests: 100, concurrent: 100)
            let stats = try #require(client.allocatorStats)
            #expect(stats.cachedBytes > 0)
            #expect(stats.cachedBytes <= 8 * 256 * 1024)
        }
    }
}
