import Foundation
import Synchronization

/// A bound, listening, non-blocking TCP socket. Owns the descriptor and closes it in `close()`
/// (called by `APNsSimulator.stop` once no thread accepts on it any more) or at the latest in `deinit`.
final class ListeningSocket: Sendable {
    let descriptor: Int32
    let port: Int
    private let closed = Atomic<Bool>(false)

    /// `host` is a numeric IPv4 ("127.0.0.1", "0.0.0.0") or IPv6 ("::1", "::", also "[::1]") address.
    init(host: String, port: Int, backlog: Int32 = 1024) throws {
        guard (0...65535).contains(port) else { throw APNsSimulatorError.configuration("port must be within 0...65535, got \(port)") }
        guard let address = SocketAddress(host: host, port: port) else {
            throw APNsSimulatorError.configuration("host must be a numeric IPv4 or IPv6 address (like 127.0.0.1 or ::1), got '\(host)'")
        }
        let descriptor = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw APNsSimulatorError.socket("socket(): \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if address.family == AF_INET6 {
            // "::" means IPv6 only here; bind 0.0.0.0 for IPv4 (the simulator has one push listener per host).
            setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        var storage = address.storage
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, address.length) }
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
        var actual = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        self.descriptor = descriptor
        self.port = SocketAddress.port(of: actual)
    }

    deinit { close() }

    /// Releases the port now. Idempotent; callers must have stopped accepting on this socket.
    func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        Glibc.close(descriptor)
    }

    enum Accepted {
        /// A connection (non-blocking, TCP_NODELAY) the caller now owns.
        case connection(Int32)
        /// None is waiting.
        case none
        /// accept() failed with this errno (EMFILE, ENFILE, ENOBUFS, …) while the listener stays readable:
        /// retrying at once would spin, so the caller waits before it accepts again.
        case failed(Int32)
    }

    /// The next pending connection. A connection that was reset before it was accepted is skipped.
    /// After `close` there is none: the number may already belong to another socket of the process
    /// (the control thread can close its own listener when the simulator's last reference goes there).
    func accept() -> Accepted {
        guard !closed.load(ordering: .acquiring) else { return .none }
        var client: Int32
        repeat {
            client = Glibc.accept(descriptor, nil, nil)
        } while client < 0 && (errno == EINTR || errno == ECONNABORTED)
        guard client >= 0 else { return errno == EAGAIN || errno == EWOULDBLOCK ? .none : .failed(errno) }
        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
        var one: Int32 = 1
        setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return .connection(client)
    }
}

/// A numeric IPv4 or IPv6 socket address for `bind`.
struct SocketAddress {
    var family: Int32
    var storage = sockaddr_storage()
    var length: socklen_t

    init?(host: String, port: Int) {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var v4 = sockaddr_in()
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET, bare, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = in_port_t(UInt16(port).bigEndian)
            family = AF_INET
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutableBytes(of: &storage) { target in withUnsafeBytes(of: v4) { target.copyMemory(from: $0) } }
        } else if inet_pton(AF_INET6, bare, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = in_port_t(UInt16(port).bigEndian)
            family = AF_INET6
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeMutableBytes(of: &storage) { target in withUnsafeBytes(of: v6) { target.copyMemory(from: $0) } }
        } else {
            return nil
        }
    }

    static func port(of storage: sockaddr_storage) -> Int {
        let family = Int32(storage.ss_family)
        return withUnsafeBytes(of: storage) { bytes in
            if family == AF_INET6 {
                return Int(UInt16(bigEndian: bytes.loadUnaligned(as: sockaddr_in6.self).sin6_port))
            }
            return Int(UInt16(bigEndian: bytes.loadUnaligned(as: sockaddr_in.self).sin_port))
        }
    }
}
