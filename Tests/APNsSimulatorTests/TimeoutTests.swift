@testable import APNsSimulator
import Foundation
import Testing
import FanoutTestSupport

/// No timing thresholds: each test waits (bounded, generously) for the close that must come.
@Suite("Handshake, idle and GOAWAY timeouts")
struct TimeoutTests {
    /// Connects over TCP and says nothing; true when the simulator closed the connection within `seconds`.
    static func silentTCPClientIsClosed(port: Int, seconds: Int = 10) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                guard let descriptor = Loopback.connect(port: port, receiveTimeoutSeconds: seconds) else {
                    return continuation.resume(returning: false)
                }
                defer { close(descriptor) }
                var byte: UInt8 = 0
                let count = read(descriptor, &byte, 1)
                // 0: orderly close; -1 with ECONNRESET: closed with RST. EAGAIN means the wait ran out.
                continuation.resume(returning: count == 0 || (count < 0 && errno == ECONNRESET))
            }
        }
    }

    @Test func aClientThatNeverHandshakesIsClosedAndFreesItsSlot() async throws {
        let harness = try SimulatorHarness(configure: {
            $0.handshakeTimeoutSeconds = 0.2
            $0.maxConnections = 1
        })
        #expect(await Self.silentTCPClientIsClosed(port: harness.simulator.port))
        #expect(harness.simulator.stats().connectionsTimedOut == 1)
        // No real client here: under load its own handshake could outlast the tiny timeout.
        #expect(harness.simulator.stats().connectionsOpen == 0, "the only connection slot is free again")
    }

    @Test func anIdleConnectionGetsGoAwayAndIsClosed() async throws {
        let harness = try SimulatorHarness(configure: { $0.idleTimeoutSeconds = 0.3 })
        let client = try RawTLSClient(port: harness.simulator.port)
        #expect(try await client.waitUntilClosed())
        #expect(String(decoding: client.receivedBytes, as: UTF8.self).contains("IdleTimeout"), "the GOAWAY carries the reason")
        #expect(harness.simulator.stats().connectionsTimedOut == 1)
    }

    /// A stream that stays open after the GOAWAY (the client never finishes it) cannot hold the connection forever.
    @Test func afterGoAwayAnUnfinishedStreamIsCutOffByTheGracePeriod() async throws {
        let harness = try SimulatorHarness(configure: {
            $0.goAwayGraceSeconds = 0.3
            $0.faults = APNsSimulatorFaults(goAwayAfterRequests: 2, goAwayReason: "Shutdown")
        })
        let client = try RawTLSClient(port: harness.simulator.port)
        let path = "/3/device/\(SimulatorHarness.token)"
        let fields = [(":method", "POST"), (":scheme", "https"), (":authority", "127.0.0.1"), (":path", path)] + harness.pushHeaders()
        client.send(RawTLSClient.preface
            + RawTLSClient.headers(stream: 1, fields, endStream: false) + RawTLSClient.data(stream: 1, SimulatorHarness.updateBody())
            + RawTLSClient.headers(stream: 3, fields, endStream: false)
            + RawTLSClient.headers(stream: 5, fields, endStream: false) + RawTLSClient.data(stream: 5, SimulatorHarness.updateBody()))
        #expect(try await client.waitUntilClosed())
        let stats = harness.simulator.stats()
        #expect(stats.goAwaysSent == 1, "\(stats) \(client.diagnostics) received \(Array(client.receivedBytes.prefix(80)))")
        #expect(stats.count(status: 200) == 2)
        #expect(stats.connectionsTimedOut == 1, "closed by the grace period, not by the client")
    }

    @Test func deadlineVerdicts() throws {
        var configuration = APNsSimulatorConfiguration(teamID: "T", keys: [:], apps: [])
        configuration.handshakeTimeoutSeconds = 1
        configuration.idleTimeoutSeconds = 2
        configuration.goAwayGraceSeconds = 3
        let deadlines = ConnectionDeadlines(configuration: configuration)
        let second: UInt64 = 1_000_000_000
        func verdict(now: UInt64, handshakeDone: Bool = true, lastActivity: UInt64 = 0, open: Bool = false, goAwayAt: UInt64? = nil) -> ConnectionDeadlines.Verdict {
            deadlines.verdict(now: now, openedAt: 0, handshakeDone: handshakeDone, lastActivity: lastActivity, hasOpenStreams: open, goAwayAt: goAwayAt)
        }
        #expect(verdict(now: second - 1, handshakeDone: false) == .keep)
        #expect(verdict(now: second, handshakeDone: false) == .handshakeTimedOut)
        #expect(verdict(now: 2 * second - 1) == .keep)
        #expect(verdict(now: 2 * second) == .idle)
        #expect(verdict(now: 10 * second, open: true) == .keep, "open streams are not idle")
        #expect(verdict(now: 10 * second, lastActivity: 9 * second) == .keep)
        #expect(verdict(now: 4 * second - 1, open: true, goAwayAt: second) == .keep)
        #expect(verdict(now: 4 * second, open: true, goAwayAt: second) == .goAwayGraceOver)
        #expect(deadlines.sweepIntervalNanos == second / 4)
        // A connection stamped after the loop read its clock is not ancient.
        #expect(deadlines.verdict(now: second, openedAt: second + 1, handshakeDone: false, lastActivity: second + 1,
                                  hasOpenStreams: false, goAwayAt: nil) == .keep)
        #expect(deadlines.verdict(now: 5 * second, openedAt: 0, handshakeDone: true, lastActivity: 5 * second + 1,
                                  hasOpenStreams: false, goAwayAt: nil) == .keep)
        #expect(verdict(now: second, goAwayAt: second + 1) == .keep)
        configuration.goAwayGraceSeconds = 0.001
        #expect(ConnectionDeadlines(configuration: configuration).sweepIntervalNanos == 10_000_000)
    }

    @Test func nonPositiveTimeoutsAreRejected() throws {
        let credentials = try SimulatorCredentials.generate()
        var configuration = APNsSimulatorConfiguration(
            teamID: credentials.teamID, keys: [credentials.keyID: try credentials.publicKeyPEM()], apps: [SimulatorHarness.app])
        configuration.idleTimeoutSeconds = 0
        #expect(throws: APNsSimulatorError.self) { try APNsSimulator(configuration: configuration) }
    }
}
