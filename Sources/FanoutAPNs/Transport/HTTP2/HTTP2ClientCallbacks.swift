import CNghttp2

/// The nghttp2 callback table every client session of one engine shares. Owned; freed in `deinit`.
///
/// Each callback is a free function with nghttp2's C signature that turns `user_data` back into the
/// `HTTP2ClientConnection` (unretained: the engine keeps its connections for its whole life and
/// deletes a session before it lets its connection go) and does the minimum work there.
final class HTTP2ClientCallbacks {
    let pointer: OpaquePointer

    init() throws(APNsClientError) {
        var created: OpaquePointer?
        guard nghttp2_session_callbacks_new(&created) == 0, let created else { throw .transportSetup("nghttp2_session_callbacks_new failed") }
        pointer = created
        nghttp2_session_callbacks_set_on_header_callback(pointer, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(pointer, onDataChunk)
        nghttp2_session_callbacks_set_on_frame_recv_callback(pointer, onFrameReceived)
        nghttp2_session_callbacks_set_on_stream_close_callback(pointer, onStreamClose)
        nghttp2_session_callbacks_set_on_frame_not_send_callback(pointer, onFrameNotSent)
    }

    deinit { nghttp2_session_callbacks_del(pointer) }
}

private func connection(_ userData: UnsafeMutableRawPointer?) -> HTTP2ClientConnection {
    Unmanaged<HTTP2ClientConnection>.fromOpaque(userData!).takeUnretainedValue()
}

private func onHeader(
    _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ name: UnsafePointer<UInt8>?, _ nameLength: Int,
    _ value: UnsafePointer<UInt8>?, _ valueLength: Int, _ flags: UInt8, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let frame, let name, let value, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    connection(userData).receivedHeader(streamID: frame.pointee.hd.stream_id, name: UnsafeBufferPointer(start: name, count: nameLength),
                                        value: UnsafeBufferPointer(start: value, count: valueLength))
    return 0
}

private func onDataChunk(
    _ session: OpaquePointer?, _ flags: UInt8, _ streamID: Int32, _ data: UnsafePointer<UInt8>?, _ length: Int,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let data else { return 0 }
    connection(userData).receivedData(streamID: streamID, chunk: UnsafeBufferPointer(start: data, count: length))
    return 0
}

private func onFrameReceived(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame else { return 0 }
    let type = frame.pointee.hd.type
    let ack = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0
    switch UInt32(type) {
    case NGHTTP2_SETTINGS.rawValue where !ack:
        connection(userData).receivedSettings()
    case NGHTTP2_PING.rawValue where ack:
        connection(userData).receivedPingAck()
    case NGHTTP2_GOAWAY.rawValue:
        let goAway = frame.pointee.goaway
        let debug = goAway.opaque_data.map { Array(UnsafeBufferPointer(start: $0, count: goAway.opaque_data_len)) } ?? []
        connection(userData).receivedGoAway(errorCode: goAway.error_code, lastStreamID: goAway.last_stream_id, debugData: debug)
    default:
        break
    }
    return 0
}

private func onStreamClose(_ session: OpaquePointer?, _ streamID: Int32, _ errorCode: UInt32, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    connection(userData).streamClosed(streamID: streamID, errorCode: errorCode)
    return 0
}

/// A request whose HEADERS nghttp2 could not send (after a GOAWAY: START_STREAM_NOT_ALLOWED). Its
/// stream was never opened, so no stream-close callback follows: this is the only notice.
private func onFrameNotSent(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ libErrorCode: Int32,
                            _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue), frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else {
        return 0
    }
    connection(userData).requestNotSent(streamID: frame.pointee.hd.stream_id, libErrorCode: libErrorCode)
    return 0
}

/// The request body of a stream; its bytes live in the `HTTP2Stream` found through the stream user data.
func readRequestBody(
    _ session: OpaquePointer?, _ streamID: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int,
    _ flags: UnsafeMutablePointer<UInt32>?, _ source: UnsafeMutablePointer<nghttp2_data_source>?, _ userData: UnsafeMutableRawPointer?
) -> Int {
    guard let buffer, let flags, let session, let pointer = nghttp2_session_get_stream_user_data(session, streamID) else {
        // The stream was abandoned (request timeout): reset it.
        return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    }
    let stream = Unmanaged<HTTP2Stream>.fromOpaque(pointer).takeUnretainedValue()
    let body = stream.request.body
    let count = min(length, body.count - stream.bodyOffset)
    body.withUnsafeBufferPointer { source in
        if count > 0 { buffer.update(from: source.baseAddress! + stream.bodyOffset, count: count) }
    }
    stream.bodyOffset += count
    if stream.bodyOffset == body.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
    return count
}
