#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import FanoutWorker
import FanoutTestSupport

/// A client that sends one byte of a request head that never ends, every `pace`: the slowloris attack.
/// It keeps dripping until the server closes on it, and keeps what the server said.
final class DrippingClient {
    private var fd: Int32
    private(set) var received: [UInt8] = []
    private(set) var closedByServer = false
    private(set) var bytesSent = 0

    init(port: Int) throws {
        fd = try #require(Loopback.connect(port: port))
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit { if fd >= 0 { close(fd) } }

    private static let head = Array("GET /healthz HTTP/1.1\r\nX-Slow: ".utf8)

    /// Reads what the server sent, then sends the next byte; notes when the server has closed.
    func drip() {
        guard !closedByServer else { return }
        var buffer = [UInt8](repeating: 0, count: 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 { received += buffer[0..<count]; continue }
            if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
                // Closed on this side too, as a real client would, so the server's lingering close ends.
                closedByServer = true
                close(fd)
                fd = -1
                return
            }
            break
        }
        var byte = bytesSent < Self.head.count ? Self.head[bytesSent] : UInt8(ascii: "a")
        if Glibc.send(fd, &byte, 1, Int32(MSG_NOSIGNAL)) == 1 { bytesSent += 1 }
    }

    var answer: String { String(decoding: received, as: UTF8.self) }
}

/// Drips on every client every 20 ms until all are closed by the server or `bound` has passed (a
/// bound for the test, many times the deadline under test). `meanwhile` runs once, after the first drips.
func dripUntilClosed(_ clients: [DrippingClient], bound: Duration = .seconds(20), meanwhile: () throws -> Void = {}) rethrows {
    let end = ContinuousClock.now + bound
    var ranMeanwhile = false
    while clients.contains(where: { !$0.closedByServer }), ContinuousClock.now < end {
        for client in clients { client.drip() }
        if !ranMeanwhile, clients.allSatisfy({ $0.bytesSent >= 3 }) {
            ranMeanwhile = true
            try meanwhile()
        }
        usleep(20_000)
    }
}

/// Slowloris against the admin port: a read timeout per `recv` never fires for a client that sends a
/// byte every few milliseconds, so each connection's deadline covers the whole exchange.
@Suite(.serialized) struct AdminSlowClientTests {
    /// Clients dripping a request head are answered 408 and closed at the deadline while they still
    /// drip; a client beside them is served meanwhile, and once they are gone too.
    @Test func drippingClientsAreCutOffAtTheDeadlineAndOthersAreServed() throws {
        let fixture = Fixture(limits: .init(maxConnections: 4, readTimeout: .seconds(1), maxRequestBytes: 8192))
        let port = try fixture.server.start()
        defer { fixture.server.stop() }
        let drippers = try (0..<3).map { _ in try DrippingClient(port: port) }
        var servedMeanwhile = -1
        try dripUntilClosed(drippers) { servedMeanwhile = try get(port: port, "/healthz").status }
        #expect(servedMeanwhile == 200, "the fourth slot serves a normal client while three drip")
        for dripper in drippers {
            #expect(dripper.closedByServer, "still open after \(dripper.bytesSent) bytes")
            #expect(dripper.answer.hasPrefix("HTTP/1.1 408 "), "\(dripper.answer)")
        }
        #expect(try get(port: port, "/healthz").status == 200)
    }

    /// A connection past `maxConnections` is answered 503 on the accept thread; one that then drips
    /// its request holds that thread at most 100 ms, so the accept loop goes on serving.
    @Test func aDripperBeyondTheBoundDoesNotHoldTheAcceptThread() throws {
        let fixture = Fixture(limits: .init(maxConnections: 1, readTimeout: .milliseconds(300), maxRequestBytes: 8192))
        let port = try fixture.server.start()
        defer { fixture.server.stop() }
        let holder = try DrippingClient(port: port)
        let beyond = try DrippingClient(port: port)
        try dripUntilClosed([holder, beyond])
        #expect(beyond.closedByServer && beyond.answer.hasPrefix("HTTP/1.1 503 "), "\(beyond.answer)")
        #expect(holder.closedByServer && holder.answer.hasPrefix("HTTP/1.1 408 "), "\(holder.answer)")
        // The slot is free once the server has seen the holder's close.
        var status = 503
        for _ in 0..<1000 where status == 503 { status = try get(port: port, "/healthz").status }
        #expect(status == 200)
    }
}
