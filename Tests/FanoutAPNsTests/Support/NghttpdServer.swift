import Foundation
import FanoutCrypto
import FanoutTestSupport

/// An independent HTTP/2 peer for transport tests: Debian's `nghttpd` on loopback with a
/// throwaway CA, serving files (POST to an existing file answers 200, anything else 404).
final class NghttpdServer: @unchecked Sendable {
    // @unchecked: immutable after init; the child's state is behind its own lock.
    let port: Int
    let caFile: String
    let directory: String
    private let process: ChildProcess

    static let executable = ["/usr/sbin/nghttpd", "/usr/bin/nghttpd"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/sbin/nghttpd"
    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    /// Serves `files` (path → contents) under a fresh directory. `maxConcurrentStreams` sets
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    init(files: [String: String], maxConcurrentStreams: Int = 100) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-nghttpd-\(UUID().uuidString)").path
        let root = directory + "/www"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        for (path, contents) in files {
            let full = root + path
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            try contents.write(toFile: full, atomically: true, encoding: .utf8)
        }
        let certificates = try CertificateAuthority.generateLoopbackServerFiles(in: directory)
        caFile = certificates.caCertificatePath
        var lastError = "no attempt"
        for _ in 0..<20 {
            // `TestPorts`: below Linux's ephemeral range and never drawn twice in the suite, so a connect that
            // succeeds reached this server, not another test's (one that shared a random draw answered once).
            let candidate = TestPorts.draw()
            let process = try ChildProcess(NghttpdServer.executable,
                                           ["-d", root, "--max-concurrent-streams=\(maxConcurrentStreams)", "--address=127.0.0.1",
                                            String(candidate), certificates.privateKeyPath, certificates.certificateChainPath])
            if Self.waitUntilListening(port: candidate, process: process) {
                self.port = candidate
                self.process = process
                return
            }
            process.signal(SIGKILL)
            _ = process.waitUntilExit()
            lastError = "nghttpd did not listen on \(candidate)"
        }
        throw NSError(domain: "NghttpdServer", code: 1, userInfo: [NSLocalizedDescriptionKey: lastError])
    }

    var baseURL: String { "https://127.0.0.1:\(port)" }

    /// Freezes the server (SIGSTOP): connections stay open, nothing is answered, PINGs included.
    func pause() { process.signal(SIGSTOP) }
    func resume() { process.signal(SIGCONT) }

    deinit {
        process.signal(SIGKILL)
        _ = process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Polls until something accepts TCP connections on 127.0.0.1:`port` (false if `process` exits first).
    static func waitUntilListening(port: Int, process: ChildProcess) -> Bool {
        for _ in 0..<100 {
            if !process.isRunning { return false }
            let socket = TestPorts.tcpSocket()
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            close(socket)
            if connected == 0 { return true }
            usleep(20_000)
        }
        return false
    }
}
