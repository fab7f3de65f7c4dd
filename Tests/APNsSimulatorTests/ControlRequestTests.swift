import APNsSimulator
import Foundation
import Synchronization
import Testing
import FanoutTestSupport

@Suite("Control endpoint: malformed and slow requests")
struct ControlRequestTests {
    /// Connects to the control port (blocking socket, 10 s receive timeout); -1 when the connection fails.
    static func connectControl(port: Int) -> Int32 {
        Loopback.connect(port: port, receiveTimeoutSeconds: 10) ?? -1
    }

    /// Sends `request` in one piece and reads the whole answer, on its own thread (never the cooperative pool).
    static func exchange(port: Int, _ request: String) async -> String {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let descriptor = connectControl(port: port)
                guard descriptor >= 0 else { return continuation.resume(returning: "") }
                defer { close(descriptor) }
                _ = Array(request.utf8).withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = read(descriptor, &buffer, buffer.count)
                    if count <= 0 { break }
                    received += buffer[..<count]
                }
                continuation.resume(returning: String(decoding: received, as: UTF8.self))
            }
        }
    }

    /// A negative or absurd Content-Length used to make the body range invalid: the whole process trapped
    /// ("Range requires lowerBound <= upperBound"), taking the simulator (or the test run hosting it) down.
    @Test func aBadContentLengthIsAnsweredNotACrash() async throws {
        let harness = try SimulatorHarness()
        let port = harness.simulator.controlPort
        for length in ["-5", "9223372036854775807", "12abc", ""] {
            let reply = await Self.exchange(port: port, "PUT /faults HTTP/1.1\r\nhost: x\r\ncontent-length: \(length)\r\n\r\n{}")
            #expect(reply.hasPrefix("HTTP/1.1 400"), "content-length '\(length)': \(reply)")
        }
        let tooLarge = await Self.exchange(port: port, "PUT /faults HTTP/1.1\r\nhost: x\r\ncontent-length: 2000000\r\n\r\n{}")
        #expect(tooLarge.hasPrefix("HTTP/1.1 413"), "a body over the limit is refused, not truncated: \(tooLarge)")
        let health = await Self.exchange(port: port, "GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        #expect(health.hasPrefix("HTTP/1.1 200"), "\(health)")
    }

    /// A control client that trickles its request (one byte at a time, never finishing) used to keep the serving
    /// thread reading forever (each byte reset the 5 s receive timeout), so `stop` never returned.
    @Test func aTricklingControlClientDoesNotHoldStop() async throws {
        let harness = try SimulatorHarness()
        let port = harness.simulator.controlPort
        let done = Atomic<Bool>(false)
        let trickler = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            defer { trickler.signal() }
            let descriptor = Self.connectControl(port: port)
            guard descriptor >= 0 else { return }
            defer { close(descriptor) }
            _ = Array("GET /stats HTTP/1.1\r\n".utf8).withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            // Bounded: 300 bytes, 100 ms apart (30 s), far beyond what stop may take.
            for _ in 0..<300 where !done.load(ordering: .acquiring) {
                var byte = UInt8(ascii: "x")
                if send(descriptor, &byte, 1, Int32(MSG_NOSIGNAL)) != 1 { return }
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
        // Ordering only: the control thread polls every 100 ms, so it is now reading this request.
        try await Task.sleep(for: .milliseconds(400))
        let stopped = Atomic<Bool>(false)
        Thread.detachNewThread {
            harness.simulator.stop()
            stopped.store(true, ordering: .releasing)
        }
        // Generous bounded wait for the stop that must come; the trickle goes on for 30 s, so a stop that waits
        // for the request to finish is still blocked when this gives up.
        let waitUntil = ContinuousClock.now + .seconds(20)
        while !stopped.load(ordering: .acquiring), ContinuousClock.now < waitUntil { try await Task.sleep(for: .milliseconds(50)) }
        let stoppedInTime = stopped.load(ordering: .acquiring)
        done.store(true, ordering: .releasing)
        #expect(stoppedInTime, "stop() is still waiting for a control request that never ends")
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                trickler.wait()
                continuation.resume()
            }
        }
    }
}
