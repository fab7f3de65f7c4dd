import APNsModel
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The admin HTTP/1.1 server: `/metrics`, `/healthz`, `/readyz`, `/livez`, `/debug/targets/<key>`.
///
/// Threading: one dedicated accept thread (blocking `poll`/`accept`, never Swift's cooperative pool)
/// and a private concurrent queue for connections. At most `maxConnections` are served at once;
/// beyond that a connection gets `503` immediately. Each connection has a request-size limit and is
/// closed after one response (`Connection: close`). Its timeouts are deadlines for the whole exchange,
/// not for each read: the request must arrive within `readTimeout` of the accept (else `408`), and the
/// response and the close within `readTimeout` more, so a client that sends or reads one byte at a
/// time (slowloris) holds its slot for at most twice the read timeout.
/// `stop()` wakes the accept thread through a pipe, closes the socket, and waits (bounded by the read
/// timeout) for connections being served.
public final class AdminServer: Sendable {
    public struct Limits: Sendable {
        public var maxConnections: Int
        public var readTimeout: Duration
        public var maxRequestBytes: Int

        public init(maxConnections: Int = 16, readTimeout: Duration = .seconds(5), maxRequestBytes: Int = 8192) {
            self.maxConnections = maxConnections
            self.readTimeout = readTimeout
            self.maxRequestBytes = maxRequestBytes
        }
    }

    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    private struct State {
        var listenFD: Int32 = -1
        var wakeRead: Int32 = -1
        var wakeWrite: Int32 = -1
        var port: Int = 0
        var running = false
    }

    public let host: String
    public let requestedPort: Int
    private let routes: AdminRoutes
    private let limits: Limits
    private let log: Log?
    private let state = Mutex(State())
    private let active = Atomic<Int>(0)
    private let connections = DispatchGroup()
    private let acceptDone = DispatchSemaphore(value: 0)
    private let queue = DispatchQueue(label: "fanout.admin.connections", attributes: .concurrent)

    public init(host: String, port: Int, routes: AdminRoutes, limits: Limits = Limits(), log: Log? = nil) {
        self.host = host
        self.requestedPort = port
        self.routes = routes
        self.limits = limits
        self.log = log
    }

    public convenience init(settings: FanoutConfiguration.Admin, routes: AdminRoutes, log: Log? = nil) {
        self.init(host: settings.host, port: settings.port, routes: routes,
                  limits: Limits(maxConnections: settings.maxConnections, readTimeout: settings.readTimeout,
                                 maxRequestBytes: settings.maxRequestBytes), log: log)
    }

    /// The port actually bound (useful with port 0); 0 before `start()`.
    public var boundPort: Int { state.withLock { $0.port } }

    /// Binds, listens and starts the accept thread. Returns the bound port.
    @discardableResult
    public func start() throws -> Int {
        let fd = try Self.bindListener(host: host, port: requestedPort)
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else {
            close(fd)
            throw StartError(description: "admin server: pipe failed: \(String(cString: strerror(errno)))")
        }
        _ = fcntl(pipeFDs[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(pipeFDs[1], F_SETFD, FD_CLOEXEC)
        let wakeRead = pipeFDs[0], wakeWrite = pipeFDs[1]
        let port = Self.localPort(fd)
        let started = state.withLock { state -> Bool in
            guard !state.running else { return false }
            state = State(listenFD: fd, wakeRead: wakeRead, wakeWrite: wakeWrite, port: port, running: true)
            return true
        }
        guard started else {
            close(fd); close(wakeRead); close(wakeWrite)
            throw StartError(description: "admin server: already running")
        }
        let thread = Thread.named("fanout-admin") { [self] in acceptLoop(listenFD: fd, wakeFD: wakeRead) }
        thread.start()
        log?.info("admin server listening", ["host": .string(host), "port": .int(port)])
        return port
    }

    /// Stops accepting, waits for connections in progress (at most the read timeout plus a second),
    /// and closes the socket. Safe to call more than once.
    public func stop() {
        let wake = state.withLock { state -> Int32? in
            guard state.running else { return nil }
            state.running = false
            return state.wakeWrite
        }
        guard let wake else { return }
        var byte: UInt8 = 1
        _ = write(wake, &byte, 1)
        acceptDone.wait()
        let fds = state.withLock { ($0.listenFD, $0.wakeRead, $0.wakeWrite) }
        close(fds.0); close(fds.1); close(fds.2)
        let deadline = DispatchTime.now() + .milliseconds(Int(DurationText.seconds(limits.readTimeout) * 1000) + 1000)
        if connections.wait(timeout: deadline) == .timedOut {
            log?.warning("admin server stopped with connections still open", ["active": .int(active.load(ordering: .relaxed))])
        }
    }

    // MARK: Accept loop (own thread)

    private func acceptLoop(listenFD: Int32, wakeFD: Int32) {
        defer { acceptDone.signal() }
        var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
        while true {
            fds[0].revents = 0
            fds[1].revents = 0
            let ready = poll(&fds, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                log?.error("admin server poll failed; no longer accepting", ["error": .string(String(cString: strerror(errno)))])
                return
            }
            if fds[1].revents != 0 { return }
            guard fds[0].revents != 0 else { continue }
            let client = accept(listenFD, nil, nil)
            if client < 0 {
                if errno != EINTR && errno != EAGAIN && errno != ECONNABORTED {
                    log?.warning("admin server accept failed", ["error": .string(String(cString: strerror(errno)))])
                }
                continue
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            if active.add(1, ordering: .relaxed).newValue > limits.maxConnections {
                active.subtract(1, ordering: .relaxed)
                // Answered on this thread, so the whole exchange is kept within 100 ms.
                let deadline = ConnectionDeadline(after: .milliseconds(100))
                deadline.send(client, AdminResponse.json(503, "{\"error\":\"too many admin connections\"}").serialized())
                deadline.lingerClose(client)
                continue
            }
            let readTimeout = limits.readTimeout
            connections.enter()
            queue.async { [self] in
                serve(client, deadline: ConnectionDeadline(after: readTimeout)).lingerClose(client)
                active.subtract(1, ordering: .relaxed)
                connections.leave()
            }
        }
    }

    /// Reads one request before `deadline` and answers it. Returns the deadline of the answer (a read
    /// timeout from when the request was complete, or from when the wait for it ended), which also
    /// bounds the close.
    private func serve(_ fd: Int32, deadline: ConnectionDeadline) -> ConnectionDeadline {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = deadline.receive(fd, into: &buffer)
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                let respond = ConnectionDeadline(after: limits.readTimeout)
                respond.send(fd, AdminResponse.json(408, "{\"error\":\"request not received in time\"}").serialized())
                return respond
            }
            guard count > 0 else { return ConnectionDeadline(after: limits.readTimeout) }
            received.append(contentsOf: buffer[0..<count])
            let respond = ConnectionDeadline(after: limits.readTimeout)
            switch AdminRequestParse.parse(received, limit: limits.maxRequestBytes) {
            case .incomplete:
                continue
            case .tooLarge:
                respond.send(fd, AdminResponse.json(413, "{\"error\":\"request larger than \(limits.maxRequestBytes) bytes\"}").serialized())
                return respond
            case .invalid(let why):
                var body = "{\"error\":"
                JSONString.append(why, to: &body)
                body += "}"
                respond.send(fd, AdminResponse.json(400, body).serialized())
                return respond
            case .complete(let request):
                let response = routes.respond(to: request)
                respond.send(fd, response.serialized(includeBody: request.method != "HEAD"))
                return respond
            }
        }
    }

    // MARK: Sockets

    private static func bindListener(host: String, port: Int) throws -> Int32 {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw StartError(description: "admin server: cannot resolve admin.host \"\(host)\": \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var lastError = "no address"
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let info = candidate {
            candidate = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), info.pointee.ai_protocol)
            if fd < 0 { lastError = String(cString: strerror(errno)); continue }
            var one: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            if bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 && listen(fd, 64) == 0 {
                return fd
            }
            lastError = String(cString: strerror(errno))
            close(fd)
        }
        throw StartError(description: "admin server: cannot listen on \(host):\(port): \(lastError)")
    }

    private static func localPort(_ fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return 0 }
        let family = Int32(storage.ss_family)
        return withUnsafePointer(to: &storage) { pointer -> Int in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }
}
