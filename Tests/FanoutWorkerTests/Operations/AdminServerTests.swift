import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
@testable import FanoutWorker
import FanoutTestSupport

/// A raw HTTP/1.1 exchange over loopback: sends `request` bytes, reads until the server closes.
func rawExchange(port: Int, host: String = "127.0.0.1", _ request: [UInt8]) throws -> String {
    let fd = try #require(Loopback.connect(port: port, host: host, receiveTimeoutSeconds: 10))
    defer { close(fd) }
    var offset = 0
    while offset < request.count {
        let sent = request.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
        if sent <= 0 { break }  // the server may close early on an oversize request; read what it said
        offset += sent
    }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count <= 0 { break }
        response.append(contentsOf: buffer[0..<count])
    }
    return String(decoding: response, as: UTF8.self)
}

func canConnect(port: Int, host: String = "127.0.0.1") -> Bool {
    guard let fd = Loopback.connect(port: port, host: host) else { return false }
    close(fd)
    return true
}

func get(port: Int, host: String = "127.0.0.1", _ path: String, method: String = "GET") throws -> (status: Int, headers: String, body: String) {
    let text = try rawExchange(port: port, host: host, Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
    let parts = text.components(separatedBy: "\r\n\r\n")
    let statusLine = parts[0].prefix { $0 != "\r" }
    let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") ?? -1
    return (status, parts[0], parts.dropFirst().joined(separator: "\r\n\r\n"))
}

final class ReadinessBox: Sendable {
    let state = Mutex(Readiness(isReady: false, reasons: ["no partitions assigned", "app \"com.example.a\": InvalidProviderToken"]))
    let liveness = Mutex(Liveness.stuck("12 record(s) uncommitted and no committed offset advanced for 601 s"))
}

final class Fixture: Sendable {
    let metrics = FanoutMetrics()
    let ready = ReadinessBox()
    let server: AdminServer

    init(limits: AdminServer.Limits = .init()) {
        let metrics = self.metrics
        let ready = self.ready
        server = AdminServer(host: "127.0.0.1", port: 0, routes: AdminRoutes(
            metrics: { metrics.registry.render() },
            readiness: { ready.state.withLock { $0 } },
            liveness: { ready.liveness.withLock { $0 } },
            target: { key in key == "export 42/a" ? #"{"key":"export 42/a","pending":true}"# : nil }),
            limits: limits)
    }
}

@Suite(.serialized) struct AdminServerTests {
    @Test func servesEveryRoute() throws {
        let fixture = Fixture()
        let port = try fixture.server.start()
        defer { fixture.server.stop() }
        #expect(port > 0)
        #expect(fixture.server.boundPort == port)
        fixture.metrics.eventsConsumed.labels("activity-updates").increment(by: 3)

        let metrics = try get(port: port, "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.headers.contains("Content-Type: text/plain; version=0.0.4"))
        let parsed = try ExpositionParser(metrics.body)
        #expect(parsed.value("fanout_events_consumed_total", ["topic": "activity-updates"]) == 3)

        let health = try get(port: port, "/healthz")
        #expect(health.status == 200)
        #expect(health.body == #"{"status":"ok"}"#)

        let notReady = try get(port: port, "/readyz")
        #expect(notReady.status == 503)
        let reasons = try #require(try JSONSerialization.jsonObject(with: Data(notReady.body.utf8)) as? [String: Any])
        #expect(reasons["ready"] as? Bool == false)
        #expect(reasons["reasons"] as? [String] == ["no partitions assigned", "app \"com.example.a\": InvalidProviderToken"])
        fixture.ready.state.withLock { $0 = .ready }
        let nowReady = try get(port: port, "/readyz")
        #expect(nowReady.status == 200)
        #expect(nowReady.body == #"{"ready":true,"reasons":[]}"#)

        let stuck = try get(port: port, "/livez")
        #expect(stuck.status == 503)
        #expect(stuck.body == #"{"alive":false,"reason":"12 record(s) uncommitted and no committed offset advanced for 601 s"}"#)
        fixture.ready.liveness.withLock { $0 = .alive("nothing waits to be committed") }
        let alive = try get(port: port, "/livez")
        #expect(alive.status == 200)
        #expect(alive.body == #"{"alive":true,"reason":"nothing waits to be committed"}"#)

        let target = try get(port: port, "/debug/targets/export%2042%2Fa")
        #expect(target.status == 200)
        #expect(target.body == #"{"key":"export 42/a","pending":true}"#)
        let unknown = try get(port: port, "/debug/targets/nobody")
        #expect(unknown.status == 404)
        #expect(unknown.body == #"{"error":"unknown target","key":"nobody"}"#)
        #expect(try get(port: port, "/debug/targets/").status == 400)
        #expect(try get(port: port, "/nothing-here").status == 404)
        let post = try get(port: port, "/metrics", method: "POST")
        #expect(post.status == 405)
        #expect(post.headers.contains("Allow: GET, HEAD"))
        let head = try get(port: port, "/healthz", method: "HEAD")
        #expect(head.status == 200)
        #expect(head.body.isEmpty)
        #expect(head.headers.contains("Content-Length: 15"))
    }

    @Test func rejectsOversizeAndMalformedRequests() throws {
        let fixture = Fixture(limits: .init(maxConnections: 4, readTimeout: .seconds(5), maxRequestBytes: 1024))
        let port = try fixture.server.start()
        defer { fixture.server.stop() }
        let hugeHeader = "GET /metrics HTTP/1.1\r\nX-Fill: " + String(repeating: "a", count: 4000) + "\r\n\r\n"
        let huge = try rawExchange(port: port, Array(hugeHeader.utf8))
        #expect(huge.hasPrefix("HTTP/1.1 413 "))
        let bigBody = "GET /healthz HTTP/1.1\r\nContent-Length: 100000\r\n\r\n"
        #expect(try rawExchange(port: port, Array(bigBody.utf8)).hasPrefix("HTTP/1.1 413 "))
        #expect(try rawExchange(port: port, Array("BLAH\r\n\r\n".utf8)).hasPrefix("HTTP/1.1 400 "))
        // The server is still healthy afterwards.
        #expect(try get(port: port, "/healthz").status == 200)
    }

    @Test func slowClientTimesOut() throws {
        let fixture = Fixture(limits: .init(maxConnections: 4, readTimeout: .milliseconds(200), maxRequestBytes: 1024))
        let port = try fixture.server.start()
        defer { fixture.server.stop() }
        // Half a request head and then silence: the server answers 408 and closes instead of waiting forever.
        let response = try rawExchange(port: port, Array("GET /healthz HTTP/1.1\r\n".utf8))
        #expect(response.hasPrefix("HTTP/1.1 408 "))
    }

    @Test func connectionsBeyondTheBoundGet503() throws {
        let fixture = Fixture(limits: .init(maxConnections: 1, readTimeout: .seconds(30), maxRequestBytes: 1024))
        let port = try fixture.server.start()
        defer { fixture.server.stop() }
        // Occupy the only slot with a connection that has sent nothing yet.
        let holder = try #require(Loopback.connect(port: port))
        #expect(try get(port: port, "/healthz").status == 503)
        close(holder)  // the server sees EOF and frees the slot
        var status = 503
        for _ in 0..<1000 where status == 503 { status = try get(port: port, "/healthz").status }
        #expect(status == 200)
    }

    @Test func worksWithURLSession() async throws {
        let fixture = Fixture()
        let port = try fixture.server.start()
        defer { fixture.server.stop() }
        let url = try #require(URL(string: "http://127.0.0.1:\(port)/healthz"))
        let (data, response) = try await URLSession.shared.data(from: url)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self) == #"{"status":"ok"}"#)
    }

    @Test func stopReleasesThePortAndStartTwiceFails() throws {
        // A loopback address of its own (all of 127/8 is loopback on Linux): on 127.0.0.1 the port this
        // test frees is an ephemeral port that a parallel test's listener or outgoing connection can take
        // in the instant between stop and the rebind (CI failed that way once).
        let host = "127.77.\(UInt8.random(in: 1...254)).\(UInt8.random(in: 1...254))"
        let routes = AdminRoutes(metrics: { "" }, readiness: { .ready }, liveness: { .alive("idle") }, target: { _ in nil })
        // And a port from `TestPorts`, below the kernel's ephemeral range, which no bind to port 0 hands
        // out: a freed ephemeral port was taken once in CI by a parallel test's listener on 0.0.0.0, port 0
        // (SimulatorOnEveryAddress), which accepts on every loopback address, this one included.
        var started: (server: AdminServer, port: Int)?
        for _ in 0..<50 where started == nil {
            let candidate = TestPorts.draw()
            let server = AdminServer(host: host, port: candidate, routes: routes)
            if let port = try? server.start() { started = (server, port) }
        }
        let (server, port) = try #require(started, "no free port below the ephemeral range on \(host)")
        #expect(try get(port: port, host: host, "/healthz").status == 200)
        #expect(throws: AdminServer.StartError.self) { try server.start() }
        server.stop()
        server.stop()  // idempotent
        #expect(!canConnect(port: port, host: host))
        // The same port can be bound again right away.
        let again = AdminServer(host: host, port: port, routes: routes)
        #expect(try again.start() == port)
        #expect(try get(port: port, host: host, "/healthz").status == 200)
        again.stop()
    }

    @Test func unusableHostIsAClearError() {
        let server = AdminServer(host: "not a host name", port: 0, routes: AdminRoutes(metrics: { "" }, readiness: { .ready }, liveness: { .alive("idle") }, target: { _ in nil }))
        #expect(throws: AdminServer.StartError.self) { try server.start() }
    }
}

@Suite struct AdminRequestParseTests {
    @Test func parsesRequestLine() {
        let bytes = Array("GET /debug/targets/a%20b?x=1 HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        #expect(AdminRequestParse.parse(bytes, limit: 1024) == .complete(AdminRequest(method: "GET", path: "/debug/targets/a b")))
        #expect(AdminRequestParse.parse(Array("GET / HTTP/1.1\r\nHost".utf8), limit: 1024) == .incomplete)
        #expect(AdminRequestParse.parse(Array(repeating: 65, count: 2000), limit: 1024) == .tooLarge)
        #expect(AdminRequestParse.parse(Array("GET /%zz HTTP/1.1\r\n\r\n".utf8), limit: 1024) == .invalid("bad percent-encoding in path"))
        #expect(AdminRequestParse.parse(Array("GET / SPDY/3\r\n\r\n".utf8), limit: 1024) == .invalid("malformed request line"))
        #expect(AdminRequestParse.parse(Array("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".utf8), limit: 1024) == .tooLarge)
    }
}
