import CCurl
import CCurlShim

/// One pooled, long-lived HTTP/2 connection: its own libcurl multi handle limited to a single
/// connection, so the client knows which requests share a connection (and die with it) and can
/// gate each connection's stream count.
///
/// Confined to the transport thread (the multi's `wakeup` is the only cross-thread call).
final class CurlConnection: PooledConnection {
    let index: Int
    let multi: CurlMulti
    var gate: ConnectionGate
    /// The transfers on this connection; each knows its position (`slot`) for O(1) removal.
    private(set) var transfers: [CurlTransfer] = []

    init(index: Int, configuration: APNsClientConfiguration, now: ContinuousClock.Instant) throws(APNsClientError) {
        self.index = index
        // The engine sleeps in connection 0's curl_multi_poll and passes the other connections' sockets
        // to it: those multis track their sockets (curl_multi_fdset would miss descriptors ≥ 1024).
        multi = try CurlMulti(trackSockets: index > 0)
        try multi.set(CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        // One connection per multi. (Not MAX_TOTAL_CONNECTIONS: measured no gain, and without the
        // host limit libcurl 7.88 opened extra connections under load and lost whole connections' worth
        // of streams; the plain-C ceiling program reproduces both.)
        try multi.set(CURLMOPT_MAX_HOST_CONNECTIONS, 1)
        try multi.set(CURLMOPT_MAXCONNECTS, 1)
        try multi.set(CURLMOPT_MAX_CONCURRENT_STREAMS, configuration.maxConcurrentStreamsPerConnection)
        gate = ConnectionGate(streamCap: configuration.maxConcurrentStreamsPerConnection,
                              idleReprobe: configuration.upkeepInterval,
                              backoffMinimum: configuration.reconnectBackoff.minimum,
                              backoffMaximum: configuration.reconnectBackoff.maximum, now: now)
    }

    var inFlight: Int { transfers.count }

    func capacity(now: ContinuousClock.Instant) -> Int { gate.capacity(inFlight: inFlight, now: now) }

    /// Hands `transfer` (already prepared) to libcurl on this connection.
    func add(_ transfer: CurlTransfer) throws(APNsClientError) {
        let code = curl_multi_add_handle(multi.handle, transfer.easy.handle)
        guard code == CURLM_OK else { throw .curl("curl_multi_add_handle: \(String(cString: curl_multi_strerror(code)))") }
        transfer.connectionIndex = index
        transfer.slot = transfers.count
        transfers.append(transfer)
    }

    /// Takes `transfer` back from libcurl (done or aborted).
    func remove(_ transfer: CurlTransfer) {
        _ = curl_multi_remove_handle(multi.handle, transfer.easy.handle)
        let slot = transfer.slot
        let last = transfers.removeLast()
        if slot < transfers.count {
            transfers[slot] = last
            last.slot = slot
        }
        transfer.slot = -1
    }

    /// Drives libcurl and collects finished transfers with their result codes.
    func perform(into done: inout [CurlEnd]) {
        multi.perform()
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi.handle, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            var context: UnsafeMutableRawPointer?
            _ = fanout_curl_easy_getinfo_ptr(easy, CURLINFO_PRIVATE, &context)
            guard let context else { continue }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            done.append(CurlEnd(transfer: transfer, ticket: transfer.carried.ticket, outcome: .finished(message.pointee.data.result)))
        }
    }

    /// Milliseconds until libcurl wants to be called again; nil when it has no timer.
    var curlTimeout: Int? {
        var timeout = -1
        _ = curl_multi_timeout(multi.handle, &timeout)
        return timeout < 0 ? nil : timeout
    }
}
