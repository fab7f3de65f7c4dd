@testable import FanoutHTTP2
import Testing

/// A client and a server `HTTP2Session` wired back to back in memory (no socket, no TLS): what one
/// session writes is fed to the other, so every delegate callback is driven by real nghttp2 frames.
@Suite("HTTP/2 sessions back to back")
struct HTTP2SessionTests {
    /// Records what a session reports; answers `readBody` from `bodies`.
    final class Recorder: HTTP2SessionDelegate {
        var began: [Int32] = []
        var headers: [Int32: [String: String]] = [:]
        var data: [Int32: [UInt8]] = [:]
        var endOfStream: [Int32] = []
        var settingsFrames = 0
        var pingAcks = 0
        var goAways: [(errorCode: HTTP2ErrorCode, lastStreamID: Int32, debugData: [UInt8])] = []
        var closed: [Int32: HTTP2ErrorCode] = [:]
        var notSent: [Int32: HTTP2Error] = [:]
        /// The session this recorder listens to, when a test wants `streamContext` seen from the callbacks.
        var session: HTTP2Session?
        /// Whether the stream still had its context when it closed.
        var contextAtClose: [Int32: Bool] = [:]
        /// Stream ends in order: "not sent" or "closed", with the stream id.
        var ends: [String] = []
        var bodies: [Int32: [UInt8]] = [:]
        var abandonBodies = false

        func beganRequest(streamID: Int32) { began.append(streamID) }

        func receivedHeader(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
            headers[streamID, default: [:]][String(decoding: name, as: UTF8.self)] = String(decoding: value, as: UTF8.self)
        }

        func receivedData(streamID: Int32, chunk: UnsafeBufferPointer<UInt8>) { data[streamID, default: []].append(contentsOf: chunk) }

        func received(_ frame: HTTP2ReceivedFrame) {
            switch frame {
            case .endOfStream(let streamID): endOfStream.append(streamID)
            case .settings: settingsFrames += 1
            case .pingAck: pingAcks += 1
            case .goAway(let errorCode, let lastStreamID, let debugData): goAways.append((errorCode, lastStreamID, debugData))
            }
        }

        func streamClosed(streamID: Int32, errorCode: HTTP2ErrorCode) {
            closed[streamID] = errorCode
            if let session { contextAtClose[streamID] = session.streamContext(streamID) != nil }
            ends.append("closed \(streamID)")
        }

        func requestNotSent(streamID: Int32, error: HTTP2Error) {
            notSent[streamID] = error
            ends.append("not sent \(streamID)")
        }

        func readBody(streamID: Int32, into buffer: UnsafeMutableBufferPointer<UInt8>) -> HTTP2BodyRead {
            if abandonBodies { return .abandon }
            let body = bodies[streamID] ?? []
            let count = min(buffer.count, body.count)
            _ = buffer.initialize(from: body.prefix(count))
            bodies[streamID] = Array(body.dropFirst(count))
            return .bytes(count, endOfBody: count == body.count)
        }
    }

    final class Context {}

    /// A client and a server session, each with its initial SETTINGS queued (nghttp2 sends the client
    /// preface itself, never a SETTINGS frame: both applications must submit one first).
    static func pair(_ clientSide: Recorder, _ serverSide: Recorder,
                     peerMaxConcurrentStreams: UInt32 = 100) throws -> (client: HTTP2Session, server: HTTP2Session) {
        let client = try HTTP2Session(role: .client(peerMaxConcurrentStreams: peerMaxConcurrentStreams), delegate: clientSide)
        let server = try HTTP2Session(role: .server, delegate: serverSide)
        try client.submitSettings([HTTP2Setting(.enablePush, 0)])
        try server.submitSettings([HTTP2Setting(.maxConcurrentStreams, 100)])
        return (client, server)
    }

    /// Feeds everything each side has to send to the other until both are quiet.
    static func exchange(_ client: HTTP2Session, _ server: HTTP2Session) throws {
        var moved = true
        while moved {
            moved = false
            while let chunk = try client.nextOutput() { try server.receive(chunk); moved = true }
            while let chunk = try server.nextOutput() { try client.receive(chunk); moved = true }
        }
    }

    /// Queues a 200 with an `apns-id` and the body `{}` on the server side of `streamID`.
    static func respond(_ server: HTTP2Session, _ serverSide: Recorder, streamID: Int32) throws {
        var response = HTTP2HeaderBlock()
        response.add(":status", "200")
        response.add("apns-id", "00000000-0000-0000-0000-000000000000", index: false)
        serverSide.bodies[streamID] = Array("{}".utf8)
        try server.submitResponse(streamID: streamID, &response, hasBody: true)
    }

    static func request(path: String, body: Bool) -> HTTP2HeaderBlock {
        var block = HTTP2HeaderBlock()
        block.add(":method", "POST")
        block.add(":scheme", "https")
        block.add(":authority", "example.test")
        block.add(":path", path, index: false)
        if body { block.add("content-length", "5") }
        return block
    }

    @Test func requestAndResponseWithBodiesReachTheDelegates() throws {
        let clientSide = Recorder(), serverSide = Recorder()
        try withExtendedLifetime((clientSide, serverSide)) {
            let (client, server) = try Self.pair(clientSide, serverSide)
            let context = Context()
            var headers = Self.request(path: "/3/device/abc", body: true)
            let streamID = try client.submitRequest(&headers, hasBody: true, context: context)
            clientSide.bodies[streamID] = Array("hello".utf8)
            try Self.exchange(client, server)
            #expect(client.streamContext(streamID) === context)

            #expect(serverSide.began == [streamID])
            #expect(serverSide.headers[streamID]?[":path"] == "/3/device/abc")
            #expect(serverSide.data[streamID] == Array("hello".utf8))
            #expect(serverSide.endOfStream == [streamID])
            #expect(server.hasStream(streamID))

            try Self.respond(server, serverSide, streamID: streamID)
            try Self.exchange(client, server)

            #expect(clientSide.headers[streamID]?[":status"] == "200")
            #expect(clientSide.headers[streamID]?["apns-id"] == "00000000-0000-0000-0000-000000000000")
            #expect(clientSide.data[streamID] == Array("{}".utf8))
            #expect(clientSide.closed[streamID] == .noError)
            #expect(serverSide.closed[streamID] == .noError)
            #expect(clientSide.began.isEmpty)   // responses are not requests
        }
    }

    @Test func settingsPingAndGoAwayArriveAsSwiftValues() throws {
        let clientSide = Recorder(), serverSide = Recorder(), context = Context()
        try withExtendedLifetime((clientSide, serverSide, context)) {
            let (client, server) = try Self.pair(clientSide, serverSide)
            try server.submitSettings([HTTP2Setting(.maxConcurrentStreams, 7)])
            try client.submitPing()
            try Self.exchange(client, server)
            #expect(clientSide.settingsFrames >= 1)
            #expect(client.remoteSetting(.maxConcurrentStreams) == 7)
            #expect(clientSide.pingAcks == 1)

            var headers = Self.request(path: "/a", body: false)
            let streamID = try client.submitRequest(&headers, hasBody: false, context: context)
            try Self.exchange(client, server)
            #expect(server.lastProcessedStreamID == streamID)
            let debug = Array(#"{"reason":"Shutdown"}"#.utf8)
            try server.submitGoAway(lastStreamID: server.lastProcessedStreamID, errorCode: .noError, debugData: debug)
            try Self.exchange(client, server)
            #expect(clientSide.goAways.count == 1)
            #expect(clientSide.goAways.first?.errorCode == .noError)
            #expect(clientSide.goAways.first?.lastStreamID == streamID)
            #expect(clientSide.goAways.first?.debugData == debug)
            #expect(HTTP2ErrorCode.cancel.name == "CANCEL")
        }
    }

    @Test func resetsCarryTheirErrorCodeAndAnAbandonedBodyResetsTheStream() throws {
        let clientSide = Recorder(), serverSide = Recorder(), context = Context()
        try withExtendedLifetime((clientSide, serverSide, context)) {
            let (client, server) = try Self.pair(clientSide, serverSide)
            try Self.exchange(client, server)

            var headers = Self.request(path: "/cancelled", body: true)
            let cancelled = try client.submitRequest(&headers, hasBody: true, context: context)
            clientSide.bodies[cancelled] = Array("hello".utf8)
            try Self.exchange(client, server)
            try client.submitReset(streamID: cancelled, errorCode: .cancel)
            client.clearStreamContext(cancelled)
            #expect(client.streamContext(cancelled) == nil)
            try Self.exchange(client, server)
            #expect(serverSide.closed[cancelled] == .cancel)

            clientSide.abandonBodies = true
            headers = Self.request(path: "/abandoned", body: true)
            let abandoned = try client.submitRequest(&headers, hasBody: true, context: context)
            try Self.exchange(client, server)
            #expect(clientSide.closed[abandoned] != nil)
            #expect(clientSide.closed[abandoned] != .noError)
            #expect(serverSide.data[abandoned] == nil)
        }
    }

    @Test func aRequestAfterTheGoAwayIsReportedNotSent() throws {
        let clientSide = Recorder(), serverSide = Recorder()
        try withExtendedLifetime((clientSide, serverSide)) {
            let (client, server) = try Self.pair(clientSide, serverSide)
            try Self.exchange(client, server)
            try server.submitGoAway(lastStreamID: 0, errorCode: .noError, debugData: [])
            try Self.exchange(client, server)
            clientSide.session = client
            defer { clientSide.session = nil }
            var headers = Self.request(path: "/late", body: false)
            let context = Context()   // attached unretained: alive until the stream is gone
            let streamID = try client.submitRequest(&headers, hasBody: false, context: context)
            try withExtendedLifetime(context) { try Self.exchange(client, server) }
            #expect(clientSide.notSent[streamID] != nil)
            #expect(clientSide.notSent[streamID]?.code == -516)   // NGHTTP2_ERR_START_STREAM_NOT_ALLOWED
            // nghttp2 then closes the stream it had opened for the request, as refused.
            #expect(clientSide.ends == ["not sent \(streamID)", "closed \(streamID)"])
            #expect(clientSide.closed[streamID] == HTTP2ErrorCode(rawValue: 7))   // REFUSED_STREAM
            // Still attached at that close: a delegate that ends the request on the first notice must detach it there.
            #expect(clientSide.contextAtClose[streamID] == true)
            #expect(serverSide.began.isEmpty)
        }
    }
}
