import APNsSimulator
import FanoutTestSupport
import Foundation
import Synchronization

/// A started simulator with throwaway credentials, plus helpers to drive it with real, independent
/// HTTP/2 clients (`curl --http2`, `h2load`) over TLS verified against the simulator's CA.
final class SimulatorHarness: Sendable {
    static let app = "com.example.fanout"
    static let topic = app + ".push-type.liveactivity"
    static let token = String(repeating: "ab", count: 80)

    let credentials: SimulatorCredentials
    let simulator: APNsSimulator
    let jwt: String
    let scratch: String

    init(
        clock: (@Sendable () -> Double)? = nil,
        configure adjust: (inout APNsSimulatorConfiguration) -> Void = { _ in }
    ) throws {
        credentials = try SimulatorCredentials.generate()
        var configuration = APNsSimulatorConfiguration(
            teamID: credentials.teamID, keys: [credentials.keyID: try credentials.publicKeyPEM()], apps: [Self.app, "com.example.other"])
        configuration.threads = 1
        if let clock { configuration.clock = clock }
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("apns-sim-test-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        adjust(&configuration)
        simulator = try APNsSimulator(configuration: configuration)
        try simulator.start()
        jwt = try credentials.providerToken(issuedAt: Int(configuration.clock()))
    }

    deinit {
        simulator.stop()
        try? FileManager.default.removeItem(atPath: scratch)
    }

    struct Response {
        var status: Int
        var headers: [String: String]
        var body: String

        var reason: String? {
            guard let data = body.data(using: .utf8),
                  let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
            return object["reason"] as? String
        }

        var json: [String: Any]? {
            body.data(using: .utf8).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
        }
    }

    /// Standard valid Live Activity headers; override or drop (value nil) any of them.
    func pushHeaders(_ overrides: [String: String?] = [:]) -> [(String, String)] {
        var headers: [String: String] = [
            "authorization": "bearer \(jwt)", "apns-push-type": "liveactivity", "apns-topic": Self.topic, "apns-priority": "10",
        ]
        for (name, value) in overrides { headers[name] = value }
        return headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    static func updateBody(timestamp: Int = 1_700_000_000, state: String = "{\"progress\":0.5}", event: String = "update") -> String {
        "{\"aps\":{\"timestamp\":\(timestamp),\"event\":\"\(event)\",\"content-state\":\(state)}}"
    }

    func devicePush(token: String = SimulatorHarness.token, headers: [(String, String)]? = nil, body: String = updateBody()) async throws -> Response {
        try await curl(url: "\(simulator.deviceURL)/3/device/\(token)", method: "POST", headers: headers ?? pushHeaders(), body: body)
    }

    /// One curl invocation. Several requests in `extra` (each after `--next`) reuse the same HTTP/2 connection.
    func curl(url: String, method: String, headers: [(String, String)], body: String?) async throws -> Response {
        try await curlSequence([(url, method, headers, body)])[0]
    }

    func curlSequence(_ requests: [(url: String, method: String, headers: [(String, String)], body: String?)]) async throws -> [Response] {
        var arguments: [String] = []
        var outputs: [(headers: String, body: String)] = []
        for (index, request) in requests.enumerated() {
            if index > 0 { arguments.append("--next") }
            let headerFile = "\(scratch)/h-\(UUID().uuidString)", bodyFile = "\(scratch)/b-\(UUID().uuidString)"
            outputs.append((headerFile, bodyFile))
            arguments += ["--http2", "--silent", "--show-error", "--cacert", simulator.caCertificatePath,
                          "-X", request.method, "-D", headerFile, "-o", bodyFile, request.url]
            for (name, value) in request.headers { arguments += ["-H", "\(name): \(value)"] }
            if let body = request.body {
                let file = "\(scratch)/in-\(UUID().uuidString)"
                try Data(body.utf8).write(to: URL(fileURLWithPath: file))
                arguments += ["--data-binary", "@\(file)"]
            }
        }
        let result = try await Self.run("/usr/bin/curl", arguments)
        guard result.status == 0 else { throw HarnessError("curl failed (\(result.status)): \(result.stderr)") }
        return try outputs.map { files in
            let headerText = try String(contentsOfFile: files.headers, encoding: .utf8)
            let body = (try? String(contentsOfFile: files.body, encoding: .utf8)) ?? ""
            return Self.parse(headerText: headerText, body: body)
        }
    }

    static func parse(headerText: String, body: String) -> Response {
        var status = 0
        var headers: [String: String] = [:]
        for line in headerText.split(whereSeparator: \.isNewline) {
            if line.hasPrefix("HTTP/") {
                status = Int(line.split(separator: " ")[1]) ?? 0
            } else if let colon = line.firstIndex(of: ":") {
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return Response(status: status, headers: headers, body: body)
    }

    struct ProcessResult {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs a tool to completion without blocking the test's thread (waits on the termination handler).
    static func run(_ executable: String, _ arguments: [String]) async throws -> ProcessResult {
        let result = try await ChildProcess.run(executable, arguments)
        return ProcessResult(status: result.status, stdout: result.stdout, stderr: result.stderr)
    }
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension SimulatorHarness {
    struct H2LoadResult {
        var done: Int
        var succeeded: Int
        var failed: Int
        var errored: Int
        var status2xx: Int
        var status4xx: Int
        var status5xx: Int
        var output: String
    }

    /// Runs h2load (an independent HTTP/2 load generator) with valid push headers against one token.
    /// h2load has no CA option and does not verify certificates; the curl tests cover verification.
    func h2load(requests: Int, clients: Int, streams: Int, token: String = SimulatorHarness.token,
                headers: [(String, String)]? = nil, body: String = SimulatorHarness.updateBody()) async throws -> H2LoadResult {
        let bodyFile = scratch + "/h2load-\(UUID().uuidString).json"
        try Data(body.utf8).write(to: URL(fileURLWithPath: bodyFile))
        var arguments = ["-n", String(requests), "-c", String(clients), "-m", String(streams), "-t", "1", "-d", bodyFile]
        for (name, value) in headers ?? pushHeaders() { arguments += ["-H", "\(name): \(value)"] }
        arguments.append("\(simulator.deviceURL)/3/device/\(token)")
        let result = try await Self.run("/usr/bin/h2load", arguments)
        /// "requests: 6 total, 6 started, 6 done, 2 succeeded, 4 failed, 0 errored, 0 timeout" → ["done": 6, …]
        func counts(_ prefix: String) -> [String: Int] {
            guard let line = result.stdout.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return [:] }
            var found: [String: Int] = [:]
            for part in line.dropFirst(prefix.count).split(separator: ",") {
                let words = part.split(separator: " ")
                if words.count == 2, let value = Int(words[0]) { found[String(words[1])] = value }
            }
            return found
        }
        let requestCounts = counts("requests:"), codes = counts("status codes:")
        return H2LoadResult(
            done: requestCounts["done"] ?? -1, succeeded: requestCounts["succeeded"] ?? -1, failed: requestCounts["failed"] ?? -1,
            errored: requestCounts["errored"] ?? -1,
            status2xx: codes["2xx"] ?? -1, status4xx: codes["4xx"] ?? -1, status5xx: codes["5xx"] ?? -1,
            output: result.stdout + result.stderr)
    }
}
