import Foundation
import FanoutCrypto
import FanoutTestSupport

/// A TLS server that selects no ALPN protocol (`openssl s_server` without `-alpn`), to show that a
/// client insisting on HTTP/2 fails clearly instead of speaking HTTP/2 to an HTTP/1 server.
final class PlainTLSServer: @unchecked Sendable {
    // @unchecked: immutable after init; the child's state is behind its own lock.
    let port: Int
    let caFile: String
    let directory: String
    private let process: ChildProcess

    static let executable = "/usr/bin/openssl"
    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-plaintls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificates = try CertificateAuthority.generateLoopbackServerFiles(in: directory)
        caFile = certificates.caCertificatePath
        for _ in 0..<20 {
            // `TestPorts`: below Linux's ephemeral range and never drawn twice in the suite, so a connect that
            // succeeds reached this server, not another test's (one that shared a random draw answered once).
            let candidate = TestPorts.draw()
            let process = try ChildProcess(Self.executable, ["s_server", "-accept", "127.0.0.1:\(candidate)", "-cert", certificates.certificateChainPath,
                                                             "-key", certificates.privateKeyPath, "-www", "-quiet"])
            if NghttpdServer.waitUntilListening(port: candidate, process: process) {
                port = candidate
                self.process = process
                return
            }
            process.signal(SIGKILL)
            _ = process.waitUntilExit()
        }
        throw NSError(domain: "PlainTLSServer", code: 1, userInfo: [NSLocalizedDescriptionKey: "openssl s_server did not listen"])
    }

    var baseURL: String { "https://127.0.0.1:\(port)" }

    deinit {
        process.signal(SIGKILL)
        _ = process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
