@testable import APNsSimulator
import Foundation
import Synchronization
import Testing

/// Slowloris against the simulator (it listens on a socket in every load test): clients that drip
/// their TLS handshake a byte at a time. No timing thresholds: bounds only against hangs.
@Suite("Slow clients")
struct SlowClientTests {
    /// Connections that each get one byte of a TLS handshake every 20 ms, on a thread of their own,
    /// until the simulator has closed all of them or 30 s have passed.
    final class Drippers: Sendable {
        private let state = Mutex((passes: 0, closed: 0))

        var passes: Int { state.withLock { $0.passes } }

        /// Drips on `count` new connections; returns how many the simulator closed.
        func run(port: Int, count: Int) async throws -> Int {
            let sockets = (0..<count).compactMap { _ in LoopbackSocket.open(port: port, receiveTimeoutSeconds: 1) }
            try #require(sockets.count == count)
            return await withCheckedContinuation { continuation in
                Thread.detachNewThread { [self] in
                    defer { sockets.forEach { close($0) } }
                    continuation.resume(returning: drip(sockets))
                }
            }
        }

        private func drip(_ sockets: [Int32]) -> Int {
            let handshakeStart: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]
            var closed = Set<Int32>()
            let end = ContinuousClock.now + .seconds(30)
            var sent = 0
            while closed.count < sockets.count, ContinuousClock.now < end {
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
                state.withLock { $0 = (sent, closed.count) }
                usleep(20_000)
            }
            return closed.count
        }
    }

    /// Fifty dripping handshakes are each closed at the handshake deadline, counted from the accept
    /// (not from their last byte), and a real client's push is delivered while they drip.
    @Test func drippingHandshakesAreCutOffAndARealClientIsServed() async throws {
        let harness = try SimulatorHarness(configure: { $0.handshakeTimeoutSeconds = 2 })
        let drippers = Drippers()
        async let closed = drippers.run(port: harness.simulator.port, count: 50)
        while drippers.passes < 3 { try await Task.sleep(for: .milliseconds(10)) }
        let response = try await harness.devicePush()
        let dripping = drippers.passes
        #expect(response.status == 200, "the real client was served while 50 connections dripped")
        #expect(try await closed == 50, "every dripping connection was closed by the simulator")
        #expect(drippers.passes > dripping, "they were still dripping when the push was answered")
        #expect(harness.simulator.stats().connectionsTimedOut == 50)
        #expect(harness.simulator.deviceView(token: SimulatorHarness.token) != nil, "the push reached the device")
    }
}
