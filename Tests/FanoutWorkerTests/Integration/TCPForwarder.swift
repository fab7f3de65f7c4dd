import FanoutTestSupport
import Foundation
import Synchronization

/// A loopback TCP relay, so a test can replace the APNs simulator behind a stable address (the
/// stopped simulator keeps its listening port). Bytes pass through untouched: TLS stays end to end.
final class TCPForwarder: Sendable {
    let port: Int
    /// Shuts the listener down when it is released with this forwarder.
    private let accepting: AcceptThread
    private let target: TargetPort

    private final class TargetPort: Sendable {
        let value: Atomic<Int>
        init(_ port: Int) { value = Atomic(port) }
    }

    init(targetPort: Int) throws {
        let target = TargetPort(targetPort)
        self.target = target
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else {
            close(listener)
            throw IntegrationTimeout(description: "forwarder: bind/listen failed: \(String(cString: strerror(errno)))")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        accepting = AcceptThread(listening: listener) { client in
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var destination = Self.loopback(port: target.value.load(ordering: .relaxed))
            let connected = withUnsafePointer(to: &destination) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                close(client)
                close(upstream)
                return
            }
            let pair = SocketPair(client, upstream)
            Self.pump(from: client, to: upstream, pair: pair)
            Self.pump(from: upstream, to: client, pair: pair)
        }
    }

    /// New connections go to `port` from now on.
    func retarget(_ port: Int) { target.value.store(port, ordering: .relaxed) }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// Both ends of one relayed connection, closed by whichever of its two pumps ends last.
    private final class SocketPair: Sendable {
        let descriptors: (Int32, Int32)
        let pumpsRunning = Atomic(2)
        init(_ first: Int32, _ second: Int32) { descriptors = (first, second) }
        func pumpEnded() {
            guard pumpsRunning.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
            close(descriptors.0)
            close(descriptors.1)
        }
    }

    /// Copies until EOF or error, then shuts down both directions of both sockets (the pair's other pump ends too).
    private static func pump(from source: Int32, to destination: Int32, pair: SocketPair) {
        Thread {
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
                if count <= 0 { break }
                var offset = 0
                while offset < count {
                    let written = buffer.withUnsafeBytes { write(destination, $0.baseAddress! + offset, count - offset) }
                    if written <= 0 { break }
                    offset += written
                }
                if offset < count { break }
            }
            shutdown(source, Int32(SHUT_RDWR))
            shutdown(destination, Int32(SHUT_RDWR))
            pair.pumpEnded()
        }.start()
    }
}
