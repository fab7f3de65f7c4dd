import Foundation
import Glibc

/// A test server's blocking accept loop on its own thread, which owns the listening descriptor: the
/// thread closes it once `accept` fails, after this object's release shut the listener down.
///
/// Closing the listener from another thread instead (a server's deinit) raced with the loop: between
/// two `accept` calls the number could be closed and handed to another test's socket, and the next
/// `accept` then took that socket's pending connection. CI saw it take a connection meant for an APNs
/// simulator of another test, answer its ClientHello, and leave the simulator with none open.
public final class AcceptThread: Sendable {
    private let descriptor: Int32

    /// Starts accepting on `descriptor` (a listening socket this now owns); `serve` gets each connection.
    public init(listening descriptor: Int32, serve: @escaping @Sendable (Int32) -> Void) {
        self.descriptor = descriptor
        Thread {
            while true {
                let socket = accept(descriptor, nil, nil)
                if socket >= 0 {
                    serve(socket)
                } else if errno != EINTR {
                    break
                }
            }
            close(descriptor)
        }.start()
    }

    /// Makes the pending or next `accept` fail, so the thread closes the listener and ends.
    deinit { shutdown(descriptor, Int32(SHUT_RDWR)) }
}
