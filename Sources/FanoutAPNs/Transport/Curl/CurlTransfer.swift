import APNsModel
import CCurl
import CCurlShim

/// One reusable request slot: an easy handle configured once, plus the buffers of the request on it.
///
/// Confined to the transport thread. libcurl's callbacks receive this object through an unretained
/// pointer; the engine keeps the slot alive (in its pool or in a connection's in-flight list) for
/// as long as the easy handle can call back.
final class CurlTransfer {
    let easy: CurlEasy
    /// The request body; libcurl reads it in place (CURLOPT_POSTFIELDS), so it lives as long as the slot.
    private var body: UnsafeMutableRawBufferPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>

    // Response being received.
    var response = APNsHTTPResponse(status: nil)
    var bodyLimit = 1 << 20
    /// The response body went over `bodyLimit`: the rest was read and discarded (the request was
    /// answered, so it completes as a response with a note, never as a transport failure).
    private var bodyOverflow = false

    // The request on this slot.
    /// The request on this slot and its dispatch ticket; every end report must carry that ticket.
    var carried = CarriedRequest()
    var credentials: APNsCredentials?
    /// The provider token the request carries (the cache judges a rejection of it).
    var providerToken: ProviderTokenCache.Token?
    var connectionIndex = 0
    /// Position in the owning connection's transfer list; -1 when idle.
    var slot = -1
    /// The connection gate's epoch when this request was sent.
    var gateEpoch = 0
    /// Dispatch time + request timeout: the engine's own deadline (libcurl never times out a transfer
    /// parked waiting for its connection).
    var deadline = ContinuousClock.now

    init(configuration: APNsClientConfiguration) throws(APNsClientError) {
        easy = try CurlEasy()
        body = .allocate(byteCount: 8192, alignment: 16)
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        let context = Unmanaged.passUnretained(self).toOpaque()
        try easy.set(CURLOPT_PRIVATE, pointer: context)
        try easy.set(CURLOPT_WRITEDATA, pointer: context)
        try easy.set(CURLOPT_HEADERDATA, pointer: context)
        try easy.set(CURLOPT_ERRORBUFFER, pointer: errorBuffer)
        guard fanout_curl_easy_setopt_write_cb(easy.handle, transferWriteBody) == CURLE_OK,
              fanout_curl_easy_setopt_header_cb(easy.handle, transferWriteHeader) == CURLE_OK else {
            throw .curl("cannot install libcurl callbacks")
        }
        try easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        try easy.set(CURLOPT_PIPEWAIT, 1)
        try easy.set(CURLOPT_NOSIGNAL, 1)
        try easy.set(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        // A backstop only: the engine's own deadline (`deadline`) ends a request at requestTimeout, parked
        // or not, so libcurl's comes a second later and normally never fires.
        try easy.set(CURLOPT_TIMEOUT_MS, Int(configuration.requestTimeout.milliseconds) + 1000)
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, Int(configuration.connectTimeout.milliseconds))
        // Long-lived connections: never let libcurl retire an idle connection on its own (default 118 s).
        try easy.set(CURLOPT_MAXAGE_CONN, 7 * 24 * 3600)
        try easy.set(CURLOPT_TCP_KEEPALIVE, 1)
        let keepIdle = max(1, Int(configuration.upkeepInterval.milliseconds / 1000))
        try easy.set(CURLOPT_TCP_KEEPIDLE, keepIdle)
        try easy.set(CURLOPT_TCP_KEEPINTVL, max(1, keepIdle / 3))
        try easy.set(CURLOPT_UPKEEP_INTERVAL_MS, Int(configuration.upkeepInterval.milliseconds))
        // Apple: do an uncached DNS lookup before each new connection.
        try easy.set(CURLOPT_DNS_CACHE_TIMEOUT, 0)
        if let caFile = configuration.caFile { try easy.set(CURLOPT_CAINFO, string: caFile) }
    }

    deinit {
        if let headerList { curl_slist_free_all(headerList) }
        body.deallocate()
        errorBuffer.deallocate()
    }

    /// Points the easy handle at `request`. `authorization` is the full `authorization: bearer …` line.
    func prepare(_ request: APNsHTTPRequest, url: String, authorization: String) throws(APNsClientError) {
        response = APNsHTTPResponse(status: nil)
        bodyOverflow = false
        errorBuffer[0] = 0
        if let headerList { curl_slist_free_all(headerList); self.headerList = nil }

        var list: UnsafeMutablePointer<curl_slist>? = nil
        list = curl_slist_append(list, authorization)
        for header in request.headers {
            list = curl_slist_append(list, header.name + ": " + header.value)
        }
        // libcurl would otherwise add form content-type and Accept: */*.
        list = curl_slist_append(list, request.body.isEmpty ? "content-type:" : "content-type: application/json")
        list = curl_slist_append(list, "accept:")
        guard let list else { throw .curl("curl_slist_append failed (out of memory)") }
        headerList = list

        try easy.set(CURLOPT_URL, string: url)
        try easy.set(CURLOPT_HTTPHEADER, pointer: list)
        switch request.method {
        case .post:
            if request.body.count > body.count {
                body.deallocate()
                body = .allocate(byteCount: request.body.count, alignment: 16)
            }
            request.body.withUnsafeBytes { body.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            try easy.set(CURLOPT_CUSTOMREQUEST, pointer: nil)
            try easy.set(CURLOPT_POST, 1)
            try easy.set(CURLOPT_POSTFIELDSIZE, request.body.count)
            try easy.set(CURLOPT_POSTFIELDS, pointer: body.baseAddress)
        case .get:
            try easy.set(CURLOPT_HTTPGET, 1)
            try easy.set(CURLOPT_CUSTOMREQUEST, pointer: nil)
        case .delete:
            try easy.set(CURLOPT_HTTPGET, 1)
            try easy.set(CURLOPT_CUSTOMREQUEST, string: "DELETE")
        }
    }

    /// Fills in status or the transport failure once libcurl says the transfer is done.
    func finish(_ code: CURLcode) -> APNsHTTPResponse {
        var result = response
        if code == CURLE_OK {
            result.status = easy.long(CURLINFO_RESPONSE_CODE)
            if bodyOverflow { result.transportFailure = APNsHTTPResponse.bodyOverflowNote(limit: bodyLimit) }
        } else {
            let detail = String(cString: errorBuffer)
            let name = String(cString: curl_easy_strerror(code))
            result.status = nil
            result.transportFailure = "transport: \(name)" + (detail.isEmpty ? "" : " (\(detail))") + " [curl \(code.rawValue)]"
        }
        response = APNsHTTPResponse(status: nil)
        bodyOverflow = false
        return result
    }

    fileprivate func receiveHeader(_ line: UnsafeBufferPointer<UInt8>) {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        var start = colon + 1
        var end = line.count
        while start < end, line[start] == 0x20 || line[start] == 0x09 { start += 1 }
        while end > start, line[end - 1] == 0x0D || line[end - 1] == 0x0A || line[end - 1] == 0x20 { end -= 1 }
        response.record(headerName: UnsafeBufferPointer(rebasing: line[..<colon]), value: UnsafeBufferPointer(rebasing: line[start..<end]))
    }

    /// Keeps at most `bodyLimit` bytes and discards the rest: APNs answered, so the transfer must
    /// finish as a response (failing it would back off a healthy connection and retry an answered request).
    fileprivate func receiveBody(_ bytes: UnsafeBufferPointer<UInt8>) {
        let room = bodyLimit - response.body.count
        if bytes.count > room { bodyOverflow = true }
        if room > 0 { response.body.append(contentsOf: UnsafeBufferPointer(rebasing: bytes.prefix(room))) }
    }
}

private func transferWriteBody(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                               _ context: UnsafeMutableRawPointer?) -> Int {
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: length)
    transfer.receiveBody(bytes)
    return length
}

private func transferWriteHeader(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
                                 _ context: UnsafeMutableRawPointer?) -> Int {
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    transfer.receiveHeader(UnsafeBufferPointer(start: UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: length))
    return length
}

extension Duration {
    var milliseconds: Int64 {
        let parts = components
        return parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
    }
}
