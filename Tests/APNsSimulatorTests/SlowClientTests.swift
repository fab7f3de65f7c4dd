@testable import APNsSimulator
import Foundation
import Synchronization
import Testing
import FanoutTestSupport

/// Slowloris against the simulator (it listens on a socket in every load test): clients that drip
/// their TLS handshake a byte at a time. No timing thresholds: bounds only against hangs.
@Suite("Slow clients")
struct SlowClientTests {
    /// Connections that each get one byte of a TLS handshake every 20 ms, on a thread of their own,
    /// until the simulator has closed all of them, `stop()` is called or the bound has passed.
    final class Drippers: Sendable {
        private let state = Mutex((passes: 0, closed: 0, stopped: false))

        var passes: Int { state.withLock { $0.passes } }

        func stop() { state.withLock { $0.stopped = true } }

        /// Drips on `count` new connections for at most `bound`; returns how many the simulator closed.
        func run(port: Int, count: Int, for bound: Duration) async throws -> Int {
            let sockets = (0..<count).compactMap { _ in Loopback.connect(port: port, receiveTimeoutSeconds: 1) }
            try #require(sockets.count == count)
            return await withCheckedContinuation { continuation in
                Thread.detachNewThread { [self] in
                    defer { sockets.forEach { close($0) } }
                    continuation.resume(returning: drip(sockets, bound: bound))
                }
            }
        }

        private func drip(_ sockets: [Int32], bound: Duration) -> Int {
            // A handshake record of the largest size TLS allows (16,384 bytes) and a ClientHello filling it:
            // at one byte per 20 ms the record never completes within a test, so the server can only
            // wait (a smaller record, complete, would be parsed and refused as garbage).
            let handshakeStart: [UInt8] = [0x16, 0x03, 0x01, 0x40, 0x00, 0x01, 0x00, 0x3f, 0xfc, 0x03, 0x03]
            var closed = Set<Int32>()
            let end = ContinuousClock.now + bound
            var sent = 0
            while closed.count < sockets.count, ContinuousClock.now < end, !state.withLock({ $0.stopped }) {
                for descriptor in sockets where !closed.contains(descriptor) {
                    var byte: UInt8 = 0
                    let read = recv(descriptor, &byte, 1, Int32(MSG_DONTWAIT))
                    if read == 0 || (read < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                        closed.insert(descriptor)
                        continue
                    }
                    var next = sent < handshakeStart.count ? handshakeStart[sent] : 0x41
                    if send(descriptor, &next, 1, Int32(MSG_NOSIGNAL)) != 1 { closed.insert(descriptor) }
                }
                sent += 1
                state.withLock { $0.passes = sent; $0.closed = closed.count }
                usleep(20_000)
            }
            return closed.count
        }
    }

    /// A real client's push is delivered while fifty connections drip their handshakes (a handshake
    /// timeout far longer than the test, so all fifty are still open when the push is answered).
    @Test func aRealClientIsServedWhileFiftyConnectionsDrip() async throws {
        let harness = try SimulatorHarness(configure: { $0.handshakeTimeoutSeconds = 300 })
        let drippers = Drippers()
        let dripping = Task { try await drippers.run(port: harness.simulator.port, count: 50, for: .seconds(600)) }
        while drippers.passes < 3 { try await Task.sleep(for: .milliseconds(10)) }
        let response = try await harness.devicePush()
        #expect(response.status == 200, "the real client was served while 50 connections dripped")
        #expect(harness.simulator.deviceView(token: SimulatorHarness.token) != nil, "the push reached the device")
        #expect(harness.simulator.stats().connectionsOpen >= 50, "the drippers were still connected: \(harness.simulator.stats())")
        drippers.stop()
        #expect(try await dripping.value == 0, "none was closed by the simulator within its handshake timeout")
    }

    /// A connection that keeps dripping its handshake is closed at the handshake timeout counted from
    /// the accept, not from its last byte.
    @Test func aDrippingHandshakeIsCutOffAtTheDeadline() async throws {
        let harness = try SimulatorHarness(configure: { $0.handshakeTimeoutSeconds = 1 })
        let closed = try await Drippers().run(port: harness.simulator.port, count: 5, for: .seconds(30))
        #expect(closed == 5, "every dripping connection was closed by the simulator")
        #expect(harness.simulator.stats().connectionsTimedOut == 5)
    }
}
