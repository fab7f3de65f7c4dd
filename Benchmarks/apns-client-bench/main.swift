// Benchmark (not a test): acked sends per second from APNsClient to a server over HTTP/2+TLS, for
// each transport (libcurl and nghttp2), next to libcurl's own ceiling and h2load against the same server.
// Usage: apns-client-bench [--sim | --url https://127.0.0.1:PORT --ca FILE --token HEX]
//                          [--requests N] [--connections C] [--streams S] [--in-flight F]
//                          [--transports curl,nghttp2] [--runs R] [--compare CURL_CEILING_BINARY]
// With --sim (default) it starts the APNs simulator in-process (1 thread) and prints its port and
// CA file. Runs are interleaved (every contender once per round, R rounds) and medians are compared.
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
let backoffMillis = Int64(option("backoff-ms") ?? "") ?? 100
let timeline = option("timeline") != nil
let runs = max(1, Int(option("runs") ?? "") ?? 3)
let transports = (option("transports") ?? "curl,nghttp2").split(separator: ",").map { name -> APNsClientConfiguration.Transport in
    guard let transport = APNsClientConfiguration.Transport(rawValue: String(name)) else { log("unknown transport \(name)"); exit(2) }
    return transport
}
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

let payload = Array(#"{"aps":{"event":"update","timestamp":1700000000,"content-state":{"progress":0.5}}}"#.utf8)
// apns-expiration: the stale date Fanout sends (docs/apns.md §11), after the payload's timestamp.
let request = try APNsRequest.liveActivity(deviceToken: token, bundleID: bundleID, payload: payload, priority: .conserve,
                                           expiration: 1_700_003_600)

/// One timed run of `requests` sends through a fresh client; returns acked sends per second.
func measureClient(_ transport: APNsClientConfiguration.Transport) async throws -> Double {
    let client = try APNsClient(configuration: APNsClientConfiguration(
        endpoint: .custom(baseURL: baseURL, caFile: caFile.isEmpty ? nil : caFile),
        credentials: [bundleID: APNsCredentials(teamID: "TEAM123456", keyID: "KEY1234567", key: key)],
        connections: connections, maxConcurrentStreamsPerConnection: streams, maxInFlight: inFlight,
        maxQueued: requests, requestTimeout: .seconds(60),
        reconnectBackoff: (.milliseconds(backoffMillis), .seconds(30)), tokenCache: ProviderTokenCache(),
        transport: transport))
    // Warm up: establish and authenticate every connection.
    for _ in 0..<(connections * 4) { _ = await client.send(request) }

    let acked = Atomic<Int>(0)
    let failed = Atomic<Int>(0)
    let start = ContinuousClock.now
    if timeline {
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
    print(String(format: "apns-client[%@]: %d requests, %d not delivered, %.2f s, %.0f acked sends/s (connections=%d streams=%d in-flight=%d)",
                 transport.rawValue, requests, failed.load(ordering: .relaxed), seconds, Double(requests) / seconds, connections, streams,
                 inFlight))
    await client.shutdown(deadline: .now + .seconds(5))
    return Double(requests) / seconds
}

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

func median(_ values: [Double]) -> Double? {
    guard !values.isEmpty else { return nil }
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

// --compare CURL_CEILING_BINARY: also run libcurl's ceiling and h2load against the same server, same
// request shape and a valid JWT, once per round.
let ceiling = option("compare")
let url = baseURL + "/3/device/" + token
let bodyFile = NSTemporaryDirectory() + "apns-bench-body.json"
try Data(payload).write(to: URL(fileURLWithPath: bodyFile))
var rates: [String: [Double]] = [:]
// One JWT for every round, as a provider keeps one for its window: APNs (and the simulator) refuse a
// key's new token within 20 minutes of the last (429 TooManyProviderTokenUpdates, docs/apns.md), so a
// token minted per round had every request of the later rounds refused.
let jwt = try APNsJWT.make(teamID: "TEAM123456", keyID: "KEY1234567", issuedAt: Int64(Date().timeIntervalSince1970), key: key)
for round in 1...runs {
    log("round \(round) of \(runs)")
    for transport in transports { rates[transport.rawValue, default: []].append(try await measureClient(transport)) }
    guard let ceiling else { continue }
    let curlOut = try run(ceiling, [url, caFile, String(requests), String(streams), "authorization: bearer " + jwt])
    print(curlOut.trimmingCharacters(in: .whitespacesAndNewlines))
    if let curlRate = rate(curlOut, after: " requests/s") { rates["libcurl", default: []].append(curlRate) }
    let h2Out = try run("/usr/bin/h2load", ["-n", String(requests), "-c", String(connections), "-m", String(streams), "-d", bodyFile,
                                           "-H", "authorization: bearer " + jwt, "-H", "apns-push-type: liveactivity",
                                           "-H", "apns-topic: \(bundleID).push-type.liveactivity", "-H", "apns-priority: 5",
                                           url])
    let h2Line = h2Out.split(separator: "\n").first { $0.contains("finished in") }.map(String.init) ?? "h2load: no result"
    let h2Status = h2Out.split(separator: "\n").first { $0.contains("status codes") }.map(String.init) ?? ""
    print("h2load: " + h2Line.trimmingCharacters(in: .whitespaces) + " | " + h2Status.trimmingCharacters(in: .whitespaces))
    if let h2Rate = rate(h2Line, after: " req/s") { rates["h2load", default: []].append(h2Rate) }
}

print("medians of \(runs) interleaved runs (acked sends/s):")
let names = transports.map(\.rawValue) + ["libcurl", "h2load"]
for name in names {
    if let value = median(rates[name] ?? []) { print("  " + name.padding(toLength: 8, withPad: " ", startingAt: 0) + String(format: " %8.0f", value)) }
}
let medians = rates.compactMapValues(median)
func ratio(_ a: String, _ b: String) {
    guard let x = medians[a], let y = medians[b], y > 0 else { return }
    print(String(format: "ratio %@ / %@: %.2f", a, b, x / y))
}
ratio("nghttp2", "curl")
for name in transports.map(\.rawValue) { ratio(name, "libcurl"); ratio(name, "h2load") }
ratio("libcurl", "h2load")
if holdSeconds > 0 { sleep(UInt32(holdSeconds)) }
simulator?.stop()
