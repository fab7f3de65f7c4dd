import Foundation
import Synchronization

/// The control endpoint: plain HTTP/1.1 on loopback, one request per connection, served sequentially
/// on its own thread. Routes:
/// - `GET /health`, `GET /stats`, `GET /deliveries`, `GET /device?token=…` / `GET /device?channel=…`
/// - `GET /metrics`: `/stats` as Prometheus text (`StatsExposition`)
/// - `GET /faults`, `PUT /faults` (an `APNsSimulatorFaults` JSON; keys optional; `"outageForSeconds": n` starts an outage now)
/// - `PUT /tokens/<token>` with `{"state": "valid" | "bad" | "unregistered", "timestamp": <ms>}`
/// - `POST /channels` with `{"bundle-id": …, "message-storage-policy": 0 | 1}` → 201 `{"channel-id": …}`
/// - `POST /flush` writes the delivery log file now.
final class ControlServer: Sendable {
    private let socket: ListeningSocket
    /// Weak: the simulator's deinit stops this server and waits for a request in progress, which must then
    /// find the simulator gone (503) rather than read a half-destroyed object.
    private weak let simulator: APNsSimulator?
    private let running = Atomic<Bool>(true)
    private let finished = DispatchSemaphore(value: 0)
    /// pthread_self() of the serving thread, so `stop` called on it (the last reference to the simulator
    /// dropped there, at the end of a request) does not wait for itself.
    private let servingThread = Atomic<UInt>(0)
    static let maxRequestBytes = 1 << 20
    /// One request (reading it and writing the answer) gets at most this long, so a client that trickles its
    /// request or never reads the answer cannot hold the only serving thread, or `stop`, for longer.
    static let requestDeadlineNanos: UInt64 = 5_000_000_000

    init(socket: ListeningSocket, simulator: APNsSimulator) {
        self.socket = socket
        self.simulator = simulator
    }

    func start() {
        let thread = Thread.named("apns-sim-ctl") { [self] in
            servingThread.store(UInt(pthread_self()), ordering: .releasing)
            while running.load(ordering: .acquiring) {
                var descriptor = pollfd(fd: socket.descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 100) > 0 else { continue }
                accepting: while true {
                    switch socket.accept() {
                    case .connection(let client): serve(client)
                    case .none: break accepting
                    case .failed:
                        // Out of descriptors (or similar): the socket stays readable, so wait instead of spinning.
                        Thread.sleep(forTimeInterval: 0.1)
                        break accepting
                    }
                }
            }
            finished.signal()
        }
        thread.start()
    }

    /// Stops accepting and waits for a request in progress (unless called from the serving thread itself).
    func stop() {
        running.store(false, ordering: .releasing)
        if servingThread.load(ordering: .acquiring) == UInt(pthread_self()) { return }
        finished.wait()
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        // The socket stays non-blocking: every wait is a poll bounded by the deadline and by `stop`.
        let deadline = DispatchTime.now().uptimeNanoseconds + Self.requestDeadlineNanos
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var headerEnd: Int?
        var contentLength = 0
        while received.count < Self.maxRequestBytes {
            if let end = headerEnd, received.count >= end + contentLength { break }
            let count = read(client, &buffer, buffer.count)
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                guard waitUntilReady(client, events: POLLIN, deadline: deadline) else { return }
                continue
            }
            guard count > 0 else { return }
            received.append(contentsOf: buffer[..<count])
            if headerEnd == nil, let range = received.firstRange(of: Array("\r\n\r\n".utf8)) {
                headerEnd = range.upperBound
                let head = String(decoding: received[..<range.lowerBound], as: UTF8.self).lowercased()
                for line in head.split(separator: "\r\n") where line.hasPrefix("content-length:") {
                    // Digits only: a sign or junk would make the body range below invalid (a crash) or wrap around.
                    let text = line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)
                    guard !text.isEmpty, text.utf8.count <= 10, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let length = Int(text) else {
                        return respond(client, 400, text: "bad content-length", deadline: deadline)
                    }
                    contentLength = length
                }
                guard range.upperBound + contentLength <= Self.maxRequestBytes else {
                    return respond(client, 413, text: "requests are limited to \(Self.maxRequestBytes) bytes", deadline: deadline)
                }
            }
        }
        guard let end = headerEnd else { return respond(client, 400, text: "incomplete request", deadline: deadline) }
        let requestLine = String(decoding: received[..<end], as: UTF8.self).split(separator: "\r\n").first ?? ""
        let parts = requestLine.split(separator: " ")
        guard parts.count >= 2 else { return respond(client, 400, text: "bad request line", deadline: deadline) }
        let body = Data(received[end..<min(received.count, end + contentLength)])
        if parts[0] == "GET", parts[1] == "/metrics" || parts[1].hasPrefix("/metrics?"), let simulator {
            let text = StatsExposition.render(simulator.stats())
            return respond(client, 200, body: Data(text.utf8), contentType: StatsExposition.contentType, deadline: deadline)
        }
        let (status, payload) = route(method: String(parts[0]), target: String(parts[1]), body: body)
        respond(client, status, body: payload, deadline: deadline)
    }

    /// Waits until `client` is ready for `events`; false once the deadline passed, `stop` was called or poll failed.
    private func waitUntilReady(_ client: Int32, events: Int32, deadline: UInt64) -> Bool {
        while running.load(ordering: .acquiring) {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { return false }
            var descriptor = pollfd(fd: client, events: Int16(events), revents: 0)
            let ready = poll(&descriptor, 1, Int32(min(100, (deadline - now) / 1_000_000 + 1)))
            if ready > 0 { return true }
            if ready < 0, errno != EINTR { return false }
        }
        return false
    }

    private func route(method: String, target: String, body: Data) -> (Int, Data) {
        guard let simulator else { return self.error(503, "the simulator is shutting down") }
        let components = URLComponents(string: target)
        let path = components?.path ?? target
        let query = Dictionary((components?.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        func json<T: Encodable>(_ value: T) -> Data { (try? encoder.encode(value)) ?? Data("{}".utf8) }
        func error(_ status: Int, _ message: String) -> (Int, Data) { (status, json(["error": message])) }

        switch (method, path) {
        case ("GET", "/health"): return (200, json(["status": "ok"]))
        case ("GET", "/stats"): return (200, json(simulator.stats()))
        case ("GET", "/deliveries"):
            var records = simulator.deliveries()
            if let token = query["token"] { records = records.filter { $0.token == token } }
            if let channel = query["channel"] { records = records.filter { $0.channel == channel } }
            return (200, json(records))
        case ("GET", "/device"):
            let view = query["token"].flatMap { simulator.deviceView(token: $0) } ?? query["channel"].flatMap { simulator.deviceView(channel: $0) }
            guard let view else { return error(404, "no accepted push for that token or channel") }
            return (200, json(view))
        case ("GET", "/faults"): return (200, json(simulator.faults()))
        case ("PUT", "/faults"):
            do {
                var faults = try JSONDecoder().decode(APNsSimulatorFaults.self, from: body)
                if let object = try JSONSerialization.jsonObject(with: body) as? [String: Any],
                   let seconds = object["outageForSeconds"] as? Double {
                    let now = simulator.configuration.clock()
                    faults.outageStart = now
                    faults.outageEnd = now + seconds
                }
                try simulator.setFaults(faults)
                return (200, json(faults))
            } catch {
                return self.error(400, "\(error)")
            }
        case ("POST", "/flush"):
            do {
                try simulator.flushDeliveryLog()
                return (200, json(["status": "flushed"]))
            } catch {
                return self.error(500, "\(error)")
            }
        case ("POST", "/channels"):
            guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any],
                  let bundle = object["bundle-id"] as? String, let policy = object["message-storage-policy"] as? Int
            else { return error(400, "expected {\"bundle-id\": string, \"message-storage-policy\": 0|1}") }
            do {
                return (201, json(["channel-id": try simulator.createChannel(bundleID: bundle, storagePolicy: policy)]))
            } catch {
                return self.error(400, "\(error)")
            }
        case ("PUT", _) where path.hasPrefix("/tokens/"):
            let token = String(path.dropFirst("/tokens/".count))
            guard !token.isEmpty, let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any],
                  let state = object["state"] as? String
            else { return error(400, "expected {\"state\": \"valid\"|\"bad\"|\"unregistered\", \"timestamp\": ms, \"app\": bundle id (valid only)}") }
            switch state {
            case "valid":
                if let app = object["app"] as? String {
                    simulator.registerToken(token, state: .validFor(bundleID: app))
                } else {
                    simulator.registerToken(token, state: .valid)
                }
            case "bad": simulator.registerToken(token, state: .bad)
            case "unregistered":
                let millis = (object["timestamp"] as? NSNumber)?.int64Value ?? Int64(simulator.configuration.clock() * 1000)
                simulator.registerToken(token, state: .unregistered(timestampMillis: millis))
            default: return error(400, "state must be valid, bad or unregistered")
            }
            return (200, json(["token": token, "state": state]))
        default:
            return error(404, "no route \(method) \(path)")
        }
    }

    private func error(_ status: Int, _ message: String) -> (Int, Data) {
        (status, (try? JSONEncoder().encode(["error": message])) ?? Data())
    }

    private func respond(_ client: Int32, _ status: Int, text: String, deadline: UInt64) {
        respond(client, status, body: (try? JSONEncoder().encode(["error": text])) ?? Data(), deadline: deadline)
    }

    private func respond(_ client: Int32, _ status: Int, body: Data, contentType: String = "application/json", deadline: UInt64) {
        let reason = [200: "OK", 201: "Created", 400: "Bad Request", 404: "Not Found", 413: "Content Too Large", 500: "Internal Server Error",
                      503: "Service Unavailable"][status] ?? "Status"
        var message = Data("HTTP/1.1 \(status) \(reason)\r\ncontent-type: \(contentType)\r\ncontent-length: \(body.count)\r\nconnection: close\r\n\r\n".utf8)
        message.append(body)
        message.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                // MSG_NOSIGNAL: a client that already went away must not raise SIGPIPE (which ends the process).
                let written = send(client, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                if written > 0 {
                    offset += written
                } else if written < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR,
                          waitUntilReady(client, events: POLLOUT, deadline: deadline) {
                    continue
                } else {
                    return
                }
            }
        }
    }
}
