import FanoutCrypto
import FanoutTestSupport
import Foundation
import Synchronization

/// A TLS + ALPN h2 server that keeps the request header blocks exactly as the client encoded them:
/// it reads the client's raw HTTP/2 frames, joins each stream's HEADERS and CONTINUATION fragments,
/// decodes them with the tests' own `HPACKDecoder` (one per connection, in the order sent) and
/// answers every request `:status: 200` (a literal without indexing, so the client's decoder keeps
/// an empty table). Enough HTTP/2 for a client to complete many requests on one connection:
/// SETTINGS and its ACK, PING ACKs, a connection WINDOW_UPDATE for each DATA frame.
final class HeaderCaptureServer: Sendable {
    let port: Int
    let caFile: String
    private let accepting: AcceptThread
    private let directory: String
    private let record = Recorder()

    /// One request's header block as it arrived.
    struct Request: Sendable {
        /// The connection it came on (0, 1, … in accept order).
        let connection: Int
        let stream: UInt32
        let fields: [HPACKField]

        func values(_ name: String) -> [String] { fields.filter { $0.name == name }.map(\.value) }
    }

    /// What the connections found, shared by their threads.
    private final class Recorder: Sendable {
        struct State {
            var requests: [Request] = []
            var problems: [String] = []
            var tables: [Int: [HPACKEntry]] = [:]
            var connections = 0
        }
        let state = Mutex(State())
        func withLock<Result>(_ body: (inout State) -> Result) -> Result { state.withLock { body(&$0) } }
    }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-hpack-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let files = try CertificateAuthority.generateLoopbackServerFiles(in: directory)
        caFile = files.caCertificatePath
        let context = try TLSServerContext(certificateChainPath: files.certificateChainPath, privateKeyPath: files.privateKeyPath,
                                           alpnProtocol: "h2")
        let (listening, port) = try Loopback.listen()
        self.port = port
        accepting = AcceptThread(listening: listening) { [record] socket in
            let connection = record.withLock { record in
                defer { record.connections += 1 }
                return record.connections
            }
            Thread { Self.serve(socket, connection: connection, context: context, record: record) }.start()
        }
    }

    // `accepting` shuts its listener down when it is released with this server.
    deinit { try? FileManager.default.removeItem(atPath: directory) }

    var baseURL: String { "https://127.0.0.1:\(port)" }

    /// Every request decoded so far, in arrival order.
    var requests: [Request] { record.withLock { $0.requests } }
    /// Decoding errors and frames this server does not expect from a client; empty when all went well.
    var problems: [String] { record.withLock { $0.problems } }
    /// Each connection's dynamic table (newest first) after its latest header block.
    var dynamicTables: [Int: [HPACKEntry]] { record.withLock { $0.tables } }

    // MARK: One connection (blocking I/O on its own thread)

    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private enum FrameType: UInt8 {
        case data = 0, headers = 1, priority = 2, resetStream = 3, settings = 4, pushPromise = 5, ping = 6, goAway = 7,
             windowUpdate = 8, continuation = 9
    }

    private static func serve(_ socket: Int32, connection: Int, context: TLSServerContext, record: Recorder) {
        defer { close(socket) }
        guard let tls = try? context.makeConnection(socket: socket), case .bytes = tls.handshake() else { return }
        func problem(_ text: String) { record.withLock { $0.problems.append("connection \(connection): \(text)") } }
        func send(_ bytes: [UInt8]) -> Bool {
            var offset = 0
            while offset < bytes.count {
                guard case .bytes(let written) = bytes[offset...].withUnsafeBytes({ tls.write($0) }) else { return false }
                offset += written
            }
            return true
        }
        guard send(Self.frame(.settings, flags: 0, stream: 0, payload: [])) else { return }
        var decoder = HPACKDecoder()
        var received: [UInt8] = []
        var sawPreface = false
        var block: (stream: UInt32, fragments: [UInt8], endStream: Bool)?
        var open: Set<UInt32> = []   // streams whose request is decoded but not yet ended
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        while case .bytes(let count) = tls.read(into: buffer) {
            received.append(contentsOf: buffer.prefix(count))
            if !sawPreface {
                guard received.count >= preface.count else { continue }
                guard Array(received.prefix(preface.count)) == preface else { return problem("no HTTP/2 client preface") }
                received.removeFirst(preface.count)
                sawPreface = true
            }
            var consumed = 0
            while let frame = Self.frame(in: received, at: consumed) {
                consumed += 9 + frame.payload.count
                guard let type = FrameType(rawValue: frame.type) else { continue }   // unknown types are ignored (RFC 9113 §4.1)
                if block != nil && type != .continuation { return problem("frame type \(type) inside a header block") }
                let (flags, stream, payload) = (frame.flags, frame.stream, frame.payload)
                var ended: UInt32?
                switch type {
                case .settings:
                    if flags & 0x1 == 0 { guard send(Self.frame(.settings, flags: 0x1, stream: 0, payload: [])) else { return } }
                case .ping:
                    if flags & 0x1 == 0 { guard send(Self.frame(.ping, flags: 0x1, stream: 0, payload: payload)) else { return } }
                case .headers:
                    guard let fragment = headerFragment(payload, flags: flags) else { return problem("bad HEADERS padding") }
                    block = (stream, fragment, flags & 0x1 != 0)
                case .continuation:
                    guard block?.stream == stream else { return problem("CONTINUATION of stream \(stream) outside its block") }
                    block?.fragments += payload
                case .data:
                    if !payload.isEmpty { guard send(windowUpdate(increment: UInt32(payload.count))) else { return } }
                    if flags & 0x1 != 0 { ended = stream }
                case .goAway:
                    return
                case .priority, .resetStream, .windowUpdate, .pushPromise:
                    break
                }
                if let complete = block, type == .headers || type == .continuation, flags & 0x4 != 0 {
                    block = nil
                    do {
                        let fields = try decoder.decode(complete.fragments)
                        record.withLock { record in
                            record.requests.append(Request(connection: connection, stream: complete.stream, fields: fields))
                            record.tables[connection] = decoder.dynamicTable
                        }
                    } catch {
                        return problem("stream \(complete.stream): \(error)")
                    }
                    open.insert(complete.stream)
                    if complete.endStream { ended = complete.stream }
                }
                if let ended, open.remove(ended) != nil {
                    // `:status` is static index 8: a literal without indexing naming it, value "200".
                    let status: [UInt8] = [0x08, 0x03] + Array("200".utf8)
                    guard send(Self.frame(.headers, flags: 0x5, stream: ended, payload: status)) else { return }
                }
            }
            received.removeFirst(consumed)
        }
    }

    /// The frame starting at `offset` of `bytes` (RFC 9113 §4.1), nil until all of it has arrived.
    private static func frame(in bytes: [UInt8], at offset: Int) -> (type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8])? {
        guard bytes.count - offset >= 9 else { return nil }
        let length = Int(bytes[offset]) << 16 | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
        guard bytes.count - offset >= 9 + length else { return nil }
        let stream = UInt32(bytes[offset + 5] & 0x7F) << 24 | UInt32(bytes[offset + 6]) << 16
            | UInt32(bytes[offset + 7]) << 8 | UInt32(bytes[offset + 8])
        return (bytes[offset + 3], bytes[offset + 4], stream, Array(bytes[offset + 9..<offset + 9 + length]))
    }

    /// A HEADERS payload without its padding and priority fields (RFC 9113 §6.2).
    private static func headerFragment(_ payload: [UInt8], flags: UInt8) -> [UInt8]? {
        var start = 0, end = payload.count
        if flags & 0x8 != 0 {
            guard let padding = payload.first, Int(padding) < payload.count else { return nil }
            start = 1
            end -= Int(padding)
        }
        if flags & 0x20 != 0 { start += 5 }
        guard start <= end else { return nil }
        return Array(payload[start..<end])
    }

    private static func frame(_ type: FrameType, flags: UInt8, stream: UInt32, payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type.rawValue, flags,
                UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    private static func windowUpdate(increment: UInt32) -> [UInt8] {
        frame(.windowUpdate, flags: 0, stream: 0,
              payload: [UInt8(increment >> 24 & 0x7F), UInt8(increment >> 16 & 0xFF), UInt8(increment >> 8 & 0xFF), UInt8(increment & 0xFF)])
    }
}
