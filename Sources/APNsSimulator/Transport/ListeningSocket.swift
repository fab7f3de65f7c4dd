import Foundation
import Synchronization

/// A bound, listening, non-blocking TCP socket. Owns the descriptor and closes it in `close()`
/// (called by `APNsSimulator.stop` once no thread accepts on it any more) or at the latest in `deinit`.
final class ListeningSocket: Sendable {
    let descriptor: Int32
    let port: Int
    private let closed = Atomic<Bool>(false)

    init(host: String, port: Int, backlog: Int32 = 1024) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw APNsSimulatorError.configuration("host must be an IPv4 address, got '\(host)'")
        }
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw APNsSimulatorError.socket("socket(): \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(descriptor)
            throw APNsSimulatorError.socket("bind \(host):\(port): \(reason)")
        }
        guard listen(descriptor, backlog) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(descriptor)
            throw APNsSimulatorError.socket("listen on \(host):\(port): \(reason)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        self.descriptor = descriptor
        self.port = Int(UInt16(bigEndian: actual.sin_port))
    }

    deinit { close() }

    /// Releases the port now. Idempotent; callers must have stopped accepting on this socket.
    func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        Glibc.close(descriptor)
    }

    /// The next pending connection (non-blocking, TCP_NODELAY), nil when none is waiting.
    func acceptConnection() -> Int32? {
        let client = accept(descriptor, nil, nil)
        guard client >= 0 else { return nil }
        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
        var one: Int32 = 1
        setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return client
    }
}
