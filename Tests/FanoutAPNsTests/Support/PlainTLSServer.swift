import Foundation
import FanoutCrypto

/// A TLS server that selects no ALPN protocol (`openssl s_server` without `-alpn`), to show that a
/// client insisting on HTTP/2 fails clearly instead of speaking HTTP/2 to an HTTP/1 server.
final class PlainTLSServer: @unchecked Sendable {
    // @unchecked: immutable after init except `process`, which only init and deinit touch.
    let port: Int
    let caFile: String
    let directory: String
    private let process: Process

    static let executable = "/usr/bin/openssl"
    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-plaintls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificates = try CertificateAuthority.generateLoopbackServerFiles(in: directory)
        caFile = certificates.caCertificatePath
        for _ in 0..<20 {
            let candidate = Int.random(in: 20_000..<60_000)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Self.executable)
            process.arguments = ["s_server", "-accept", "127.0.0.1:\(candidate)", "-cert", certificates.certificateChainPath,
                                 "-key", certificates.privateKeyPath, "-www", "-quiet"]
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            if NghttpdServer.waitUntilListening(port: candidate, process: process) {
                port = candidate
                self.process = process
                return
            }
            kill(process.processIdentifier, SIGKILL)
        }
        throw NSError(domain: "PlainTLSServer", code: 1, userInfo: [NSLocalizedDescriptionKey: "openssl s_server did not listen"])
    }

    var baseURL: String { "https://127.0.0.1:\(port)" }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        for _ in 0..<200 where process.isRunning { usleep(10_000) }
        try? FileManager.default.removeItem(atPath: directory)
    }
}
