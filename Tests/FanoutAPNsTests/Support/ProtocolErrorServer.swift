import Foundation
import FanoutCrypto
import FanoutTestSupport
import Synchronization

/// A TLS + ALPN h2 server that answers every connection with its SETTINGS and then a PING on stream 1
/// (RFC 9113 §6.7: a connection error), and then keeps the connection open and reads what comes. An
/// nghttp2 client ends such a session on its own (GOAWAY PROTOCOL_ERROR; it then wants neither to read
/// nor to write) while the socket stays up: the state the transport must notice itself.
final class ProtocolErrorServer: Sendable {
    let port: Int
    let caFile: String
    private let connections = Counter()
    private let accepting: AcceptThread
    private let directory: String

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-protoerr-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let files = try CertificateAuthority.generateLoopbackServerFiles(in: directory)
        caFile = files.caCertificatePath
        let context = try TLSServerContext(certificateChainPath: files.certificateChainPath, privateKeyPath: files.privateKeyPath,
                                           alpnProtocol: "h2")
        let (descriptor, port) = try Loopback.listen(on: .anyFree)
        self.port = port
        accepting = AcceptThread(listening: descriptor) { [connections] socket in
            connections.value.add(1, ordering: .relaxed)
            Thread { Self.serve(socket, context: context) }.start()
        }
    }

    final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    /// Connections accepted so far.
    var accepted: Int { connections.value.load(ordering: .relaxed) }

    var baseURL: String { "https://127.0.0.1:\(port)" }

    /// Blocking I/O on its own thread: the handshake, the two frames, then reads until the client closes.
    private static func serve(_ socket: Int32, context: TLSServerContext) {
        defer { close(socket) }
        guard let tls = try? context.makeConnection(socket: socket), case .bytes = tls.handshake() else { return }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        guard case .bytes = tls.read(into: buffer) else { return }   // the client preface and SETTINGS
        let settings: [UInt8] = [0, 0, 0, 4, 0, 0, 0, 0, 0]
        let pingOnStream1: [UInt8] = [0, 0, 8, 6, 0, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 8)
        let frames = settings + pingOnStream1
        guard case .bytes = frames.withUnsafeBytes({ tls.write($0) }) else { return }
        while case .bytes = tls.read(into: buffer) {}
    }

    // `accepting` shuts its listener down when it is released with this server.
    deinit { try? FileManager.default.removeItem(atPath: directory) }
}
