import CNghttp2
import CNghttp2Shim

/// One nghttp2 session, client or server side, that reports to an `HTTP2SessionDelegate`.
///
/// Owns the `nghttp2_session` (deleted in `deinit`; nghttp2 does not call back while it deletes).
/// Holds its delegate unowned: the delegate owns the session and outlives it. Not thread-safe: one
/// thread drives it, and the delegate is called back only from inside `receive`, the `submit…` calls
/// and `HTTP2OutputPump.flush` on that thread.
///
/// A client session allocates from a pool of its own (`CNghttp2Shim`): the ≈8 blocks nghttp2 makes
/// for each request are recycled on this thread instead of taken from and given back to the process
/// heap, whose arena locks every other worker thread takes too. At most 2 MiB is kept free per
/// session. Server sessions (the APNs simulator) use the heap, so the simulator, which the benchmark's
/// ceilings measure, is unchanged by it.
public final class HTTP2Session {
    public enum Role {
        /// A client session that assumes the server allows `peerMaxConcurrentStreams` streams until its
        /// SETTINGS arrive.
        case client(peerMaxConcurrentStreams: UInt32)
        case server
    }

    unowned(unsafe) let delegate: any HTTP2SessionDelegate
    private var session: OpaquePointer?
    /// The client session's allocator; freed after the session, which returns its last blocks on deletion.
    private var pool: OpaquePointer?

    public init(role: Role, delegate: any HTTP2SessionDelegate) throws(HTTP2Error) {
        self.delegate = delegate
        guard let callbacks = HTTP2CallbackTable.shared.pointer else {
            throw HTTP2Error(operation: "nghttp2_session_callbacks_new", code: NGHTTP2_ERR_NOMEM.rawValue)
        }
        let userData = Unmanaged.passUnretained(self).toOpaque()
        var created: OpaquePointer?
        let status: Int32
        switch role {
        case .server:
            status = nghttp2_session_server_new(&created, callbacks, userData)
            guard status == 0, created != nil else { throw HTTP2Error(operation: "nghttp2_session_server_new", code: status) }
        case .client(let peerMaxConcurrentStreams):
            var option: OpaquePointer?
            guard nghttp2_option_new(&option) == 0 else { throw HTTP2Error(operation: "nghttp2_option_new", code: NGHTTP2_ERR_NOMEM.rawValue) }
            defer { nghttp2_option_del(option) }
            nghttp2_option_set_peer_max_concurrent_streams(option, peerMaxConcurrentStreams)
            guard let pool = fanout_nghttp2_pool_new() else {
                throw HTTP2Error(operation: "fanout_nghttp2_pool_new", code: NGHTTP2_ERR_NOMEM.rawValue)
            }
            var mem = fanout_nghttp2_pool_mem(pool)
            status = nghttp2_session_client_new3(&created, callbacks, userData, option, &mem)  // copies `mem`
            guard status == 0, created != nil else {
                fanout_nghttp2_pool_free(pool)
                throw HTTP2Error(operation: "nghttp2_session_client_new3", code: status)
            }
            self.pool = pool
        }
        session = created
    }

    deinit {
        if let session { nghttp2_session_del(session) }
        if let pool { fanout_nghttp2_pool_free(pool) }
    }

    /// What the client session's allocator did (nil for a server session, which uses the heap).
    public var allocatorStats: HTTP2AllocatorStats? {
        pool.map { HTTP2AllocatorStats(fanout_nghttp2_pool_stats($0)) }
    }

    // MARK: Input and output

    /// Processes bytes received from the peer, calling the delegate back for what they contain.
    public func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2Error) {
        let consumed = nghttp2_session_mem_recv(session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        if consumed < 0 { throw HTTP2Error(operation: "nghttp2_session_mem_recv", code: Int32(consumed)) }
    }

    /// The next serialized frames to send, valid until the next call; nil when nghttp2 has nothing to send.
    func nextOutput() throws(HTTP2Error) -> UnsafeRawBufferPointer? {
        var chunk: UnsafePointer<UInt8>?
        let count = nghttp2_session_mem_send(session, &chunk)
        if count < 0 { throw HTTP2Error(operation: "nghttp2_session_mem_send", code: Int32(count)) }
        if count == 0 { return nil }
        return UnsafeRawBufferPointer(start: chunk, count: count)
    }

    /// False when nghttp2 expects no more input (after GOAWAYs both ways, or a fatal error).
    public var wantsRead: Bool { nghttp2_session_want_read(session) != 0 }
    /// False when nghttp2 has nothing more it could send.
    public var wantsWrite: Bool { nghttp2_session_want_write(session) != 0 }

    /// DATA bytes the peer's connection flow-control window still takes before it sends WINDOW_UPDATE
    /// (RFC 9113 §6.9); bodies beyond it wait inside the session.
    public var remoteWindowSize: Int { Int(nghttp2_session_get_remote_window_size(session)) }

    // MARK: Streams

    /// The highest stream id the session has processed (for a GOAWAY's last stream id).
    public var lastProcessedStreamID: Int32 { nghttp2_session_get_last_proc_stream_id(session) }

    /// Whether the stream is still open in the session.
    public func hasStream(_ streamID: Int32) -> Bool { nghttp2_session_find_stream(session, streamID) != nil }

    /// The object attached with `submitRequest` (held unretained: its owner keeps it alive while attached),
    /// or nil when none is attached any more.
    public func streamContext(_ streamID: Int32) -> AnyObject? {
        guard let pointer = nghttp2_session_get_stream_user_data(session, streamID) else { return nil }
        return Unmanaged<AnyObject>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Detaches the stream's context object: later callbacks for the stream find none.
    public func clearStreamContext(_ streamID: Int32) {
        nghttp2_session_set_stream_user_data(session, streamID, nil)
    }

    /// Queues a request and returns its stream id. `context` is attached unretained (`streamContext`);
    /// with `hasBody` the delegate's `readBody` supplies the DATA frames.
    public func submitRequest(_ headers: inout HTTP2HeaderBlock, hasBody: Bool, context: AnyObject) throws(HTTP2Error) -> Int32 {
        let pointer = Unmanaged.passUnretained(context).toOpaque()
        let streamID = headers.withNameValues { nameValues, count in
            guard hasBody else { return nghttp2_submit_request(session, nil, nameValues, count, nil, pointer) }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBodyCallback)
            return nghttp2_submit_request(session, nil, nameValues, count, &provider, pointer)
        }
        guard streamID > 0 else { throw HTTP2Error(operation: "nghttp2_submit_request", code: streamID) }
        return streamID
    }

    /// Queues the response on `streamID`; with `hasBody` the delegate's `readBody` supplies the DATA frames.
    public func submitResponse(streamID: Int32, _ headers: inout HTTP2HeaderBlock, hasBody: Bool) throws(HTTP2Error) {
        let status = headers.withNameValues { nameValues, count in
            guard hasBody else { return nghttp2_submit_response(session, streamID, nameValues, count, nil) }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBodyCallback)
            return nghttp2_submit_response(session, streamID, nameValues, count, &provider)
        }
        guard status == 0 else { throw HTTP2Error(operation: "nghttp2_submit_response", code: status) }
    }

    /// Queues a RST_STREAM.
    public func submitReset(streamID: Int32, errorCode: HTTP2ErrorCode) throws(HTTP2Error) {
        let status = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode.rawValue)
        guard status == 0 else { throw HTTP2Error(operation: "nghttp2_submit_rst_stream", code: status) }
    }

    /// Queues a GOAWAY.
    public func submitGoAway(lastStreamID: Int32, errorCode: HTTP2ErrorCode, debugData: [UInt8]) throws(HTTP2Error) {
        let status = nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID, errorCode.rawValue,
                                           debugData, debugData.count)
        guard status == 0 else { throw HTTP2Error(operation: "nghttp2_submit_goaway", code: status) }
    }

    /// Queues a PING (8 zero bytes of opaque data); its ACK arrives as `HTTP2ReceivedFrame.pingAck`.
    public func submitPing() throws(HTTP2Error) {
        let status = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
        guard status == 0 else { throw HTTP2Error(operation: "nghttp2_submit_ping", code: status) }
    }

    /// Queues a SETTINGS frame.
    public func submitSettings(_ settings: [HTTP2Setting]) throws(HTTP2Error) {
        var entries = settings.map { nghttp2_settings_entry(settings_id: Int32($0.identifier.nghttp2ID.rawValue), value: $0.value) }
        let status = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        guard status == 0 else { throw HTTP2Error(operation: "nghttp2_submit_settings", code: status) }
    }

    /// The peer's current value of a setting (the protocol default until its SETTINGS arrive).
    public func remoteSetting(_ identifier: HTTP2Setting.Identifier) -> UInt32 {
        nghttp2_session_get_remote_settings(session, identifier.nghttp2ID)
    }
}

/// Blocks nghttp2 took from a client session's pool (`HTTP2Session.allocatorStats`).
public struct HTTP2AllocatorStats: Sendable, Hashable {
    /// Blocks handed out in the session's life.
    public var allocations: Int
    /// Of them, blocks reused from the pool's free lists rather than taken from the heap.
    public var recycled: Int
    /// Blocks handed out and not yet freed.
    public var outstanding: Int
    /// Bytes held in free lists now (at most 8 × 256 KiB).
    public var cachedBytes: Int

    init(_ stats: fanout_nghttp2_pool_stats) {
        allocations = stats.allocations
        recycled = stats.recycled
        outstanding = stats.outstanding
        cachedBytes = stats.cached_bytes
    }
}
