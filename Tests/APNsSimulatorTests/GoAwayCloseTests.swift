import APNsSimulator
import FanoutCrypto
import Foundation
import Testing
import FanoutTestSupport

/// After a GOAWAY and its last response the simulator half-closes (close_notify + FIN) and keeps reading
/// until the client closes: a client that sent more requests right after the GOAWAY-triggering one still
/// gets every answer, and the connection ends cleanly instead of with a reset that discards them.
@Suite struct GoAwayCloseTests {
    /// A blocking TLS client on one socket (reads bounded by SO_RCVTIMEO), verifying the simulator's CA.
    final class BlockingTLSClient {
        let socket: Int32
        let tls: TLSConnection
        private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)

        init(port: Int, caFile: String) throws {
            guard let descriptor = Loopback.connect(port: port, receiveTimeoutSeconds: 10) else { throw POSIXError(.ECONNREFUSED) }
            socket = descriptor
            tls = try TLSClientContext(caFile: caFile).makeConnection(socket: descriptor, serverName: "127.0.0.1")
            guard tls.handshake() == .bytes(0) else { throw POSIXError(.EPROTO) }
        }

        deinit {
            buffer.deallocate()
            close(socket)
        }

        func send(_ bytes: [UInt8]) -> TLSConnection.IOResult { bytes.withUnsafeBytes { tls.write($0) } }

        /// Appends what one read brought; returns how the read ended when it brought nothing.
        func read(into received: inout [UInt8]) -> TLSConnection.IOResult? {
            let result = tls.read(into: buffer)
            guard case .bytes(let count) = result else { return result }
            received += UnsafeRawBufferPointer(rebasing: buffer[..<count])
            return nil
        }
    }

    /// (type, stream, first payload byte) of each complete HTTP/2 frame in `bytes`.
    static func frames(_ bytes: [UInt8]) -> [(type: UInt8, stream: UInt32, first: UInt8?)] {
        var frames: [(UInt8, UInt32, UInt8?)] = []
        var offset = 0
        while bytes.count - offset >= 9 {
            let length = Int(bytes[offset]) << 16 | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
            guard bytes.count - offset - 9 >= length else { break }
            let stream = UInt32(bytes[offset + 5] & 0x7F) << 24 | UInt32(bytes[offset + 6]) << 16 | UInt32(bytes[offset + 7]) << 8 | UInt32(bytes[offset + 8])
            frames.append((bytes[offset + 3], stream, length > 0 ? bytes[offset + 9] : nil))
            offset += 9 + length
        }
        return frames
    }

    @Test func requestsAfterTheGoAwayDoNotResetTheConnection() async throws {
        let harness = try SimulatorHarness(configure: {
            $0.faults = APNsSimulatorFaults(goAwayAfterRequests: 1, goAwayReason: "Shutdown")
            $0.goAwayGraceSeconds = 60
        })
        let client = try BlockingTLSClient(port: harness.simulator.port, caFile: harness.simulator.caCertificatePath)
        let path = "/3/device/\(SimulatorHarness.token)"
        let fields = [(":method", "POST"), (":scheme", "https"), (":authority", "127.0.0.1"), (":path", path)] + harness.pushHeaders()
        let body = SimulatorHarness.updateBody()
        #expect(client.send(RawTLSClient.preface + RawTLSClient.headers(stream: 1, fields, endStream: false)
                            + RawTLSClient.data(stream: 1, body)) == .bytes(RawTLSClient.preface.count + RawTLSClient.headers(stream: 1, fields, endStream: false).count + RawTLSClient.data(stream: 1, body).count))

        // Read until the GOAWAY and the answer to stream 1 are in, then send more requests, as a client does
        // that has not seen the GOAWAY yet.
        var received: [UInt8] = []
        var end: TLSConnection.IOResult?
        func answered() -> Bool {
            let seen = Self.frames(Array(received.dropFirst(0)))
            return seen.contains { $0.type == 7 } && seen.contains { $0.type == 1 && $0.stream == 1 }
        }
        for _ in 0..<100 where !answered() && end == nil { end = client.read(into: &received) }
        #expect(answered(), "GOAWAY and the answer to stream 1: \(Self.frames(received).map { ($0.type, $0.stream) }) end \(String(describing: end))")
        for stream: UInt32 in [3, 5, 7] {
            _ = client.send(RawTLSClient.headers(stream: stream, fields, endStream: false) + RawTLSClient.data(stream: stream, body))
        }

        // The simulator ends its side with close_notify (a clean half-close), not a reset, and keeps the
        // connection until this client closes.
        while end == nil { end = client.read(into: &received) }
        #expect(end == .closed, "the server's side ends with close_notify, got \(String(describing: end))")
        let responses = Self.frames(received).filter { $0.type == 1 }
        #expect(responses.map(\.stream) == [1], "only stream 1 was processed (the GOAWAY's last stream id)")
        #expect(responses.first?.first == 0x88, "stream 1 answered :status 200 (HPACK static index 8)")
        let stats = harness.simulator.stats()
        #expect(stats.goAwaysSent == 1)
        #expect(stats.count(status: 200) == 1)
        #expect(stats.connectionsOpen == 1, "kept (half-closed) until the client closes")
        #expect(stats.connectionsReset == 0)
    }

    /// TLS writes go through write(2): once a TLS session exists (here the simulator's and this client's),
    /// SIGPIPE is ignored, so a peer that closed cannot kill the simulator or the client.
    @Test func tlsSessionsIgnoreSIGPIPE() throws {
        let harness = try SimulatorHarness()
        let client = try BlockingTLSClient(port: harness.simulator.port, caFile: harness.simulator.caCertificatePath)
        var current = sigaction()
        #expect(sigaction(SIGPIPE, nil, &current) == 0)
        let ignored = unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == 1   // SIG_IGN is (void (*)(int))1
        #expect(ignored)
        withExtendedLifetime(client) {}
    }
}
