import APNsSimulator
import Foundation
import Synchronization
import Testing
import FanoutTestSupport

@Suite("Control endpoint during teardown")
struct ControlTeardownTests {
    /// A blocking loopback HTTP/1.1 exchange in two halves, on its own thread (never the cooperative pool).
    final class SplitRequest: Sendable {
        let descriptor: Int32

        init(port: Int) throws {
            guard let descriptor = Loopback.connect(port: port, receiveTimeoutSeconds: 10) else { throw HarnessError("connect to the control port failed") }
            self.descriptor = descriptor
        }

        deinit { close(descriptor) }

        func send(_ text: String) { _ = Array(text.utf8).withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) } }

        func response() -> String {
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(descriptor, &buffer, buffer.count)
                if count <= 0 { break }
                received += buffer[..<count]
            }
            return String(decoding: received, as: UTF8.self)
        }
    }

    /// The simulator is released (deinit: stop) while the control thread is in the middle of a request that
    /// then asks for stats. It must answer 503 (the simulator is gone), not touch the freed simulator.
    @Test func aRequestFinishingWhileTheSimulatorIsFreedIsRefusedOrClosed() async throws {
        let credentials = try SimulatorCredentials.generate()
        let configuration = APNsSimulatorConfiguration(
            teamID: credentials.teamID, keys: [credentials.keyID: try credentials.publicKeyPEM()], apps: [SimulatorHarness.app])
        let holder = Mutex<APNsSimulator?>(try APNsSimulator(configuration: configuration))
        let port = try holder.withLock { simulator in
            try simulator!.start()
            return simulator!.controlPort
        }
        let request = try SplitRequest(port: port)
        request.send("GET /stats HTTP/1.1\r\nhost: x\r\n")
        // Ordering only (no threshold): the control thread polls every 100 ms, so it is now reading this request.
        try await Task.sleep(for: .milliseconds(400))
        let released = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            holder.withLock { $0 = nil }  // deinit → stop() waits for the control thread, which waits for us
            released.signal()
        }
        try await Task.sleep(for: .milliseconds(400))
        let reply: String = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                request.send("\r\n")
                continuation.resume(returning: request.response())
            }
        }
        // What must never happen is a crash (reading the freed simulator) or stats served from it.
        // On a loaded machine the control thread may not have picked the connection up before stop()
        // closed it; then the connection is closed unanswered, which is also a correct shutdown.
        #expect(reply.isEmpty || reply.hasPrefix("HTTP/1.1 503"), "\(reply)")
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                released.wait()
                continuation.resume()
            }
        }
    }
}
