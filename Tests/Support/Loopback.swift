import Glibc

/// Blocking IPv4 TCP sockets on 127.0.0.1 for the tests' own servers and raw clients: one place that
/// binds, listens and connects, so every test server picks its port by the same rules (`TestPorts`).
public enum Loopback {
    /// Where a listener binds.
    public enum Port: Sendable {
        /// A port drawn by `TestPorts` (below the ephemeral range, never given twice in this process):
        /// for a server whose clients learn it is up only from something accepting on its port.
        case drawn
        /// A port the kernel picks (from the ephemeral range): for a server whose port is read back and
        /// handed to its clients.
        case anyFree
    }

    /// Why a listener could not be made.
    public struct ListenError: Error, CustomStringConvertible {
        public let errno: Int32
        public var description: String { "loopback listener: \(String(cString: strerror(errno)))" }
    }

    /// A listening socket on 127.0.0.1 and its port. A drawn port that another process holds is
    /// replaced by the next draw (up to 50 draws).
    public static func listen(on port: Port = .drawn, backlog: Int32 = 16) throws(ListenError) -> (descriptor: Int32, port: Int) {
        var lastError: Int32 = EADDRINUSE
        for _ in 0..<(port == .drawn ? 50 : 1) {
            let descriptor = TestPorts.tcpSocket()
            guard descriptor >= 0 else { throw ListenError(errno: errno) }
            var address = address(port: port == .drawn ? TestPorts.draw() : 0)
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, length) == 0 && Glibc.listen(descriptor, backlog) == 0 && getsockname(descriptor, $0, &length) == 0
                }
            }
            if bound { return (descriptor, Int(UInt16(bigEndian: address.sin_port))) }
            lastError = errno
            close(descriptor)
        }
        throw ListenError(errno: lastError)
    }

    /// A socket connected to `host:port`, or nil (nothing left open) when the connection fails. With
    /// `receiveTimeoutSeconds`, each read gives up after that long.
    public static func connect(port: Int, host: String = "127.0.0.1", receiveTimeoutSeconds: Int? = nil) -> Int32? {
        let descriptor = TestPorts.tcpSocket()
        guard descriptor >= 0 else { return nil }
        var address = address(port: port, host: host)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            return nil
        }
        if let receiveTimeoutSeconds {
            var timeout = timeval(tv_sec: receiveTimeoutSeconds, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
        return descriptor
    }

    private static func address(port: Int, host: String = "127.0.0.1") -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr(host)
        return address
    }
}
