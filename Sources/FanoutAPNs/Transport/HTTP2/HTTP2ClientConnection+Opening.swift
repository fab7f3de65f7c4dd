import FanoutHTTP2
import Foundation

/// Opening a connection: DNS (on `HTTP2Resolver`'s threads for names), TCP connect over the host's
/// addresses, the TLS handshake with ALPN h2, then the HTTP/2 session.
extension HTTP2ClientConnection {
    func open(now: ContinuousClock.Instant) {
        connectDeadline = now + settings.connectTimeout
        lastRead = now
        if settings.endpoint.hostIsIPLiteral {
            return resolved(settings.endpoint.resolve(), now: now)
        }
        // A DNS name: looked up on a resolver thread (Apple asks for a fresh lookup per connection).
        state = .resolving
        resolveSerial += 1
        resolver.resolve(settings.endpoint, connection: index, serial: resolveSerial)
    }

    /// A lookup answer from `HTTP2Resolver`; ignored unless this connection still waits for it.
    func resolved(_ answer: HTTP2Resolver.Answer, now: ContinuousClock.Instant) {
        guard state == .resolving, answer.serial == resolveSerial else { return }
        resolved(answer.result, now: now)
    }

    private func resolved(_ result: Result<[SocketAddress], HTTP2ConnectError>, now: ContinuousClock.Instant) {
        switch result {
        case .success(let list): addresses = list
        case .failure(let error): return fail(error.text, now: now)
        }
        // Each connection starts one address further down the list, so a dead address is not tried first every time.
        attempts += 1
        addressIndex = 0
        connectNext(now: now, firstError: nil)
    }

    /// Starts a TCP connect to the next untried address; fails the connection when none is left.
    private func connectNext(now: ContinuousClock.Instant, firstError: String?) {
        var firstError = firstError
        while addressIndex < addresses.count {
            let address = addresses[(attempts - 1 + addressIndex) % addresses.count]
            addressIndex += 1
            switch address.startConnect() {
            case .success(let socket):
                descriptor = socket
                state = .connecting
                watchingWritable = true
                events.add(descriptor, token: token, writable: true)
                lastRead = now
                return
            case .failure(let error):
                firstError = firstError ?? error.text
            }
        }
        fail("connect to \(settings.endpoint.authority) failed: \(firstError ?? "no address")", now: now)
    }

    func finishConnect(now: ContinuousClock.Instant) {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
        guard error == 0 else {
            // Try the host's next address (IPv6 unreachable, one address down) within the same connect timeout.
            let text = String(cString: strerror(error))
            events.remove(descriptor)
            close(descriptor)
            descriptor = -1
            return connectNext(now: now, firstError: text)
        }
        do {
            tls = try tlsContext.makeConnection(socket: descriptor, serverName: settings.endpoint.host)
        } catch {
            return fail("\(error)", now: now)
        }
        state = .handshaking
        continueHandshake(now: now)
    }

    func continueHandshake(now: ContinuousClock.Instant) {
        guard let tls else { return }
        switch tls.handshake() {
        case .bytes:
            guard tls.negotiatedProtocol == "h2" else {
                let offered = tls.negotiatedProtocol.map { "'\($0)'" } ?? "no protocol"
                return fail("TLS: \(settings.endpoint.authority) did not select HTTP/2 in ALPN (it chose \(offered)); APNs needs h2",
                            now: now)
            }
            startSession(now: now)
        case .wantRead:
            watch(writable: false)
        case .wantWrite:
            watch(writable: true)
        case .failed(let text):
            fail("TLS handshake with \(settings.endpoint.authority) failed: \(text)", now: now)
        case .closed:
            fail("TLS handshake with \(settings.endpoint.authority) failed: connection closed", now: now)
        }
    }

    private func startSession(now: ContinuousClock.Instant) {
        let created: HTTP2Session
        do {
            // Until the server's SETTINGS arrive, assume what APNs starts with: one stream.
            created = try HTTP2Session(role: .client(peerMaxConcurrentStreams: 1), delegate: self)
        } catch {
            return fail("\(error)", now: now)
        }
        session = created
        try? created.submitSettings([HTTP2Setting(.enablePush, 0)])
        state = .ready
        connectDeadline = nil
        serverStreamLimit = 1
        let waiting = pending
        pending.removeAll(keepingCapacity: true)
        for stream in waiting { start(stream) }
        isDirty = true
        flush(now: now)
    }
}
