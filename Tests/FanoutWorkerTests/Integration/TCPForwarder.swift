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
        let listener: Int32
        (listener, port) = try Loopback.listen(on: .anyFree, backlog: 64)
        accepting = AcceptThread(listening: listener) { client in
            guard let upstream = Loopback.connect(port: target.value.load(ordering: .relaxed)) else {
                close(client)
                return
            }
            let pair = SocketPair(client, upstream)
            Self.pump(from: client, to: upstream, pair: pair)
            Self.pump(from: upstream, to: client, pair: pair)
        }
    }

    /// New connections go to `port` from now on.
    func retarget(_ port: Int) { target.value.store(port, ordering: .relaxed) }

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
