import FanoutHTTP2
import Foundation
import Synchronization

/// Resolves host names off the transport thread: `getaddrinfo` blocks (up to the system resolver's
/// timeouts), and on the transport thread it would stall every other connection of the client.
///
/// Each lookup runs on a short-lived thread of its own (at most one per connection at a time, since a
/// connection asks again only after its previous attempt ended) and posts its answer here, then wakes
/// the transport loop, which collects the answers with `take`. IP literals never come here.
final class HTTP2Resolver: Sendable {
    struct Answer: Sendable {
        var connection: Int
        /// The connection's lookup serial: an answer for an attempt that timed out meanwhile is dropped.
        var serial: UInt64
        var result: Result<[SocketAddress], HTTP2ConnectError>
    }

    private let answers = Mutex<[Answer]>([])
    private let events: SocketEventSet

    init(events: SocketEventSet) { self.events = events }

    func resolve(_ endpoint: HTTP2Endpoint, connection: Int, serial: UInt64) {
        let thread = Thread.named("fanout-apns-dns") { [self] in
            let result = endpoint.resolve()
            answers.withLock { $0.append(Answer(connection: connection, serial: serial, result: result)) }
            events.wake()
        }
        thread.stackSize = 256 << 10
        thread.start()
    }

    /// The answers that arrived since the last call (transport thread).
    func take() -> [Answer] {
        answers.withLock { answers in
            defer { answers.removeAll() }
            return answers
        }
    }
}
