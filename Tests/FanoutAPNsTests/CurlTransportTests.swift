import APNsModel
import CCurl
import FanoutCrypto
import Foundation
import FanoutTestSupport
import Testing
@testable import FanoutAPNs

/// The libcurl transport's own decisions, without a server.
@Suite struct CurlTransportTests {
    static func event(_ code: CURLcode, status: Int? = nil) -> ConnectionGate.Completion {
        var response = APNsHTTPResponse(status: status)
        return CurlTransportEngine.gateEvent(code: code, response: &response, credentials: nil,
                                             providerToken: nil, tokenCache: ProviderTokenCache())
    }

    @Test func connectionLevelHTTP2ErrorBacksOff() {
        guard case .transportFailure = Self.event(CURLE_HTTP2) else {
            Issue.record("CURLE_HTTP2 is a broken connection, not one reset stream")
            return
        }
    }

    @Test func resetStreamNeitherOpensNorBacksOff() {
        guard case .streamReset = Self.event(CURLE_HTTP2_STREAM) else {
            Issue.record("CURLE_HTTP2_STREAM is one reset stream")
            return
        }
    }

    @Test func otherFailuresBackOffAndAnswersCount() {
        guard case .transportFailure = Self.event(CURLE_OPERATION_TIMEDOUT) else { Issue.record("timeout"); return }
        guard case .transportFailure = Self.event(CURLE_RECV_ERROR) else { Issue.record("recv"); return }
        guard case .response(authenticated: true) = Self.event(CURLE_OK, status: 200) else { Issue.record("200"); return }
    }
}

/// The engine sleeps in connection 0's curl_multi_poll and hands it the other connections' sockets.
/// Those must be found whatever their descriptor number: curl_multi_fdset (FD_SETSIZE = 1024) silently
/// skipped sockets ≥ 1024, so in a process with many descriptors those connections were never polled.
@Suite struct CurlSocketTrackingTests {
    @Test func socketsAboveFDSetSizeAreWatched() throws {
        var limits = rlimit()
        #expect(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limits) == 0)
        let saved = limits
        guard limits.rlim_max >= 2048 else { return }   // cannot open that many here; nothing to test
        limits.rlim_cur = max(limits.rlim_cur, 2048)
        #expect(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limits) == 0)
        defer {
            var restore = saved
            _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &restore)
        }
        // A loopback listener nobody accepts from: the connect completes into its backlog, and libcurl then
        // waits for the TLS handshake on the socket.
        let (listening, port) = try Loopback.listen(on: .anyFree)
        defer { close(listening) }
        // Tests running beside this one close descriptors of their own, so libcurl's socket can land on a
        // number one of them just freed, below FD_SETSIZE. Such an attempt proves nothing; it is tried again
        // (bounded), and the test requires one attempt whose socket is above FD_SETSIZE.
        var highest: [Int32] = []
        for _ in 0..<8 where !highest.contains(where: { $0 >= 1024 }) {
            highest = try watchedSocket(port: port)
            #expect(highest.count == 1, "the connection's socket: \(highest)")
        }
        #expect(highest.contains { $0 >= 1024 }, "socket numbers \(highest): above FD_SETSIZE, as this test arranged")
    }

    /// One attempt: occupies every free descriptor below 1100 (bounded) right before libcurl opens its
    /// socket, and returns the sockets the connection asks to be watched, each checked to be connected to
    /// the listener.
    private func watchedSocket(port: Int) throws -> [Int32] {
        let configuration = try APNsClientConfiguration(
            endpoint: .custom(baseURL: "https://127.0.0.1:\(port)", caFile: nil),
            credentials: TestApps.credentials(key: try P256PrivateKey.generate()), connections: 2, transport: .curl)
        let connection = try CurlConnection(index: 1, configuration: configuration, now: .now)
        let transfer = try CurlTransfer(configuration: configuration)
        try transfer.prepare(try TestApps.push().http, url: configuration.baseURL + "/3/device/" + TestApps.token,
                             authorization: "authorization: bearer test")
        var filler: [Int32] = []
        defer { for descriptor in filler { close(descriptor) } }
        while filler.count < 1200 {
            let descriptor = open("/dev/null", O_RDONLY)
            guard descriptor >= 0 else { break }
            filler.append(descriptor)
            if descriptor >= 1100 { break }
        }
        try connection.add(transfer)
        defer { connection.remove(transfer) }

        let waitFDs = UnsafeMutablePointer<curl_waitfd>.allocate(capacity: 16)
        defer { waitFDs.deallocate() }
        var done: [CurlEnd] = []
        var watched: [Int32] = []
        for _ in 0..<50 where watched.isEmpty {
            connection.perform(into: &done)
            watched = (0..<connection.multi.watchedSockets(into: waitFDs, capacity: 16)).map { waitFDs[$0].fd }
            if watched.isEmpty { _ = curl_multi_wait(connection.multi.handle, nil, 0, 100, nil) }
        }
        #expect(done.isEmpty, "nobody answers: the transfer is still waiting for the TLS handshake")
        // The socket is the one connected to our listener, whatever its number.
        for descriptor in watched {
            var peer = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &peer) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) } }
            #expect(named == 0 && Int(UInt16(bigEndian: peer.sin_port)) == port)
        }
        return watched
    }
}
