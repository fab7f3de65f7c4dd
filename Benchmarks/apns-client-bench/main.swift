// Benchmark (not a test): acked sends per second from APNsClient to a server over HTTP/2+TLS.
// Usage: apns-client-bench [--sim | --url https://127.0.0.1:PORT --ca FILE --token HEX]
//                          [--requests N] [--connections C] [--streams S] [--in-flight F]
// With --sim (default) it starts the APNs simulator in-process (1 thread) and prints its port and
// CA file, so curl-ceiling and h2load can be pointed at the same server.
import APNsModel
import APNsSimulator
import FanoutAPNs
import FanoutCrypto
import Foundation
import Synchronization

func log(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }
let arguments = Array(CommandLine.arguments.dropFirst())
@MainActor func option(_ name: String) -> String? {
    guard let index = arguments.firstIndex(of: "--" + name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}
let requests = Int(option("requests") ?? "") ?? 100_000
let connections = Int(option("connections") ?? "") ?? 1
let streams = Int(option("streams") ?? "") ?? 100
let inFlight = Int(option("in-flight") ?? "") ?? streams * connections
let holdSeconds = Int(option("hold") ?? "") ?? 0
let bundleID = "com.example.bench"
let key = try P256PrivateKey.generate()

var simulator: APNsSimulator?
let baseURL: String
let caFile: String
let token = option("token") ?? String(repeating: "ab", count: 32)
if let url = option("url") {
    baseURL = url
    caFile = option("ca") ?? ""
} else {
    var configuration = APNsSimulatorConfiguration(teamID: "TEAM123456", keys: ["KEY1234567": try key.publicKey().pemSPKI()],
                                                   apps: [bundleID])
    configuration.threads = Int(option("sim-threads") ?? "") ?? 1
    configuration.deliveryMemoryCapacity = 1000
    let sim = try APNsSimulator(configuration: configuration)
    try sim.start()
    simulator = sim
    baseURL = sim.deviceURL
    caFile = sim.caCertificatePath
    log("simulator: \(baseURL) ca=\(caFile)")
}

let client = try APNsClient(configuration: APNsClientConfiguration(
    endpoint: .custom(baseURL: baseURL, caFile: caFile.isEmpty ? nil : caFile),
    credentials: [bundleID: APNsCredentials(teamID: "TEAM123456", keyID: "KEY1234567", key: key)],
    connections: connections, maxConcurrentStreamsPerConnection: streams, maxInFlight: inFlight,
    maxQueued: requests, requestTimeout: .seconds(60),
    reconnectBackoff: (.milliseconds(Int64(option("backoff-ms") ?? "") ?? 100), .seconds(30)), tokenCache: ProviderTokenCache()))

let payload = Array(#"{"aps":{"event":"update","timestamp":1700000000,"content-state":{"progress":0.5}}}"#.utf8)
let request = try APNsRequest.liveActivity(deviceToken: token, bundleID: bundleID, payload: payload, priority: .conserve)
// Warm up: establish and authenticate every connection.
for _ in 0..<(connections * 4) { _ = await client.send(request) }

let acked = Atomic<Int>(0)
let failed = Atomic<Int>(0)
let start = ContinuousClock.now
if option("timeline") != nil {
    let sampler = Thread {
        var last = 0
        while acked.load(ordering: .relaxed) < requests {
            usleep(250_000)
            let now = acked.load(ordering: .relaxed)
            let stats = client.stats
            log("t=\(ContinuousClock.now - start) acked+\(now - last) inFlight=\(stats.inFlight) queued=\(stats.queued) conns=\(stats.connections)")
            last = now
        }
    }
    sampler.start()
}
await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
    let completion: @Sendable (APNsResult) -> Void = { result in
        if result.outcome != .delivered {
            if failed.add(1, ordering: .relaxed).newValue <= 5 {
                log("not delivered after \(ContinuousClock.now - start): \(result.transportFailure ?? "\(result.outcome)")")
            }
        }
        if acked.add(1, ordering: .relaxed).newValue == requests { done.resume() }
    }
    for _ in 0..<requests {
        do { try client.send(request, completion: completion) } catch { log("enqueue: \(error)"); exit(1) }
    }
}
let elapsed = ContinuousClock.now - start
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
print(String(format: "apns-client: %d requests, %d not delivered, %.2f s, %.0f acked sends/s (connections=%d streams=%d in-flight=%d)",
             requests, failed.load(ordering: .relaxed), seconds, Double(requests) / seconds, connections, streams, inFlight))
let clientRate = Double(requests) / seconds

// --compare CURL_CEILING_BINARY: run libcurl's ceiling and h2load against the same server, same
// request shape and a valid JWT, and print ratios.
if let ceiling = option("compare") {
    let jwt = try APNsJWT.make(teamID: "TEAM123456", keyID: "KEY1234567", issuedAt: Int64(Date().timeIntervalSince1970), key: key)
    let url = baseURL + "/3/device/" + token
    func run(_ path: String, _ args: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = args
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
    func rate(_ text: String, after marker: String) -> Double? {
        guard let range = text.range(of: marker) else { return nil }
        return Double(text[..<range.lowerBound].split(separator: " ").last.map(String.init)?.replacingOccurrences(of: ",", with: "") ?? "")
    }
    let curlOut = try run(ceiling, [url, caFile, String(requests), String(streams), "authorization: bearer " + jwt])
    print(curlOut.trimmingCharacters(in: .whitespacesAndNewlines))
    let bodyFile = NSTemporaryDirectory() + "apns-bench-body.json"
    try Data(payload).write(to: URL(fileURLWithPath: bodyFile))
    let h2Out = try run("/usr/bin/h2load", ["-n", String(requests), "-c", String(connections), "-m", String(streams), "-d", bodyFile,
                                           "-H", "authorization: bearer " + jwt, "-H", "apns-push-type: liveactivity",
                                           "-H", "apns-topic: \(bundleID).push-type.liveactivity", "-H", "apns-priority: 5",
                                           url])
    let h2Line = h2Out.split(separator: "\n").first { $0.contains("finished in") }.map(String.init) ?? "h2load: no result"
    let h2Status = h2Out.split(separator: "\n").first { $0.contains("status codes") }.map(String.init) ?? ""
    print("h2load: " + h2Line.trimmingCharacters(in: .whitespaces) + " | " + h2Status.trimmingCharacters(in: .whitespaces))
    let curlRate = rate(curlOut, after: " requests/s")
    let h2Rate = rate(h2Line, after: " req/s")
    if let curlRate { print(String(format: "ratio client / libcurl ceiling: %.2f", clientRate / curlRate)) }
    if let h2Rate { print(String(format: "ratio client / h2load: %.3f   libcurl / h2load: %.3f", clientRate / h2Rate, (curlRate ?? 0) / h2Rate)) }
}
if holdSeconds > 0 { sleep(UInt32(holdSeconds)) }
await client.shutdown(deadline: .now + .seconds(5))
simulator?.stop()
