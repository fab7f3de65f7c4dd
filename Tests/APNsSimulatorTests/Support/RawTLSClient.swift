import FanoutTestSupport
import Foundation

/// `openssl s_client` as a TLS client that says only what a test writes to it (raw HTTP/2 frames, or
/// nothing at all) and keeps its side open: it exits when the simulator closes the connection.
final class RawTLSClient: @unchecked Sendable {
    // @unchecked: the child and its pipes are only touched from the test's task; what was read is behind PipeDrain's lock.
    private let process: ChildProcess
    private let drain: PipeDrain

    init(port: Int) throws {
        process = try ChildProcess("/usr/bin/openssl", ["s_client", "-connect", "127.0.0.1:\(port)", "-alpn", "h2", "-quiet", "-verify_quiet"],
                                   input: .pipe, output: .pipe, error: .pipe)
        drain = PipeDrain(process.standardOutput!)
    }

    deinit {
        process.signal(SIGTERM)
    }

    /// s_client's own messages (for failure descriptions); read only after it exited.
    var diagnostics: String {
        process.isRunning ? "" : String(decoding: process.standardError!.readDataToEndOfFile(), as: UTF8.self)
    }

    func send(_ data: [UInt8]) { process.standardInput!.write(Data(data)) }

    var receivedBytes: Data { drain.data }

    /// Polls until the simulator has closed the connection (s_client exited) or `seconds` passed.
    func waitUntilClosed(seconds: Double = 10) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        return !process.isRunning
    }

    // MARK: HTTP/2 frames (RFC 9113) with HPACK literals (RFC 7541 §6.2.2, no Huffman)

    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + frame(type: 4, flags: 0, stream: 0, payload: [])

    static func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags,
                UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    static func headers(stream: UInt32, _ fields: [(String, String)], endStream: Bool) -> [UInt8] {
        var block: [UInt8] = []
        func integer(_ value: Int) {
            if value < 127 { block.append(UInt8(value)); return }
            block.append(127)
            var rest = value - 127
            while rest >= 128 { block.append(UInt8(rest & 0x7F | 0x80)); rest >>= 7 }
            block.append(UInt8(rest))
        }
        for (name, value) in fields {
            block.append(0)
            integer(name.utf8.count); block += Array(name.utf8)
            integer(value.utf8.count); block += Array(value.utf8)
        }
        return frame(type: 1, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, payload: block)
    }

    static func data(stream: UInt32, _ body: String) -> [UInt8] {
        frame(type: 0, flags: 0x1, stream: stream, payload: Array(body.utf8))
    }
}
