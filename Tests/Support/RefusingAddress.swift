import Foundation
import Glibc

/// A loopback address that refuses every connection: a socket bound to it that never listens, held
/// until this is released. Nothing else can take the port meanwhile (no bind, no outgoing
/// connection's port), so a client is refused at once, every time.
///
/// For "the broker is unreachable" tests: taking an in-process mock broker down re-binds its port
/// inside librdkafka, and if another socket of the busy suite took the port in between, librdkafka
/// aborts the whole test process (CI saw "Failed to bind mock broker socket … Address already in use").
public final class RefusingAddress: Sendable {
    public let port: Int
    private let descriptor: Int32

    /// `host:port`, as a client's bootstrap list or URL takes it.
    public var hostAndPort: String { "127.0.0.1:\(port)" }

    public init() throws {
        let descriptor = TestPorts.tcpSocket()
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard bound else {
            let code = errno
            close(descriptor)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(descriptor) }
}
