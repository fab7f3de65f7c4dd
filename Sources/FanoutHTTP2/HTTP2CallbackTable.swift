import CNghttp2

/// The nghttp2 callback table every session of the process uses. Each callback is a file-private free
/// function with nghttp2's C signature: it turns `user_data` back into the `HTTP2Session` (unretained:
/// a session is deleted before it is freed), does the minimum, and hands Swift values to the delegate.
///
/// `@unchecked Sendable`: the table is filled once in `init` and never changed; nghttp2 only reads it
/// (it copies it into each new session). Never freed: it lives as long as the process.
final class HTTP2CallbackTable: @unchecked Sendable {
    static let shared = HTTP2CallbackTable()

    /// Nil only when nghttp2 could not allocate the table.
    let pointer: OpaquePointer?

    private init() {
        var created: OpaquePointer?
        guard nghttp2_session_callbacks_new(&created) == 0, let created else {
            pointer = nil
            return
        }
        pointer = created
        nghttp2_session_callbacks_set_on_begin_headers_callback(created, onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(created, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(created, onDataChunk)
        nghttp2_session_callbacks_set_on_frame_recv_callback(created, onFrameReceived)
        nghttp2_session_callbacks_set_on_stream_close_callback(created, onStreamClose)
        nghttp2_session_callbacks_set_on_frame_not_send_callback(created, onFrameNotSent)
    }
}

private func delegate(_ userData: UnsafeMutableRawPointer?) -> any HTTP2SessionDelegate {
    Unmanaged<HTTP2Session>.fromOpaque(userData!).takeUnretainedValue().delegate
}

private func onBeginHeaders(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
          frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
    delegate(userData).beganRequest(streamID: frame.pointee.hd.stream_id)
    return 0
}

private func onHeader(
    _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ name: UnsafePointer<UInt8>?, _ nameLength: Int,
    _ value: UnsafePointer<UInt8>?, _ valueLength: Int, _ flags: UInt8, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let frame, let name, let value, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    delegate(userData).receivedHeader(streamID: frame.pointee.hd.stream_id, name: UnsafeBufferPointer(start: name, count: nameLength),
                                      value: UnsafeBufferPointer(start: value, count: valueLength))
    return 0
}

private func onDataChunk(
    _ session: OpaquePointer?, _ flags: UInt8, _ streamID: Int32, _ data: UnsafePointer<UInt8>?, _ length: Int,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let data else { return 0 }
    delegate(userData).receivedData(streamID: streamID, chunk: UnsafeBufferPointer(start: data, count: length))
    return 0
}

private func onFrameReceived(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame else { return 0 }
    let type = UInt32(frame.pointee.hd.type)
    let flags = frame.pointee.hd.flags
    switch type {
    case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
        if flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 {
            delegate(userData).received(.endOfStream(streamID: frame.pointee.hd.stream_id))
        }
    case NGHTTP2_SETTINGS.rawValue where flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0:
        delegate(userData).received(.settings)
    case NGHTTP2_PING.rawValue where flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0:
        delegate(userData).received(.pingAck)
    case NGHTTP2_GOAWAY.rawValue:
        let goAway = frame.pointee.goaway
        let debug = goAway.opaque_data.map { Array(UnsafeBufferPointer(start: $0, count: goAway.opaque_data_len)) } ?? []
        delegate(userData).received(.goAway(errorCode: HTTP2ErrorCode(rawValue: goAway.error_code), lastStreamID: goAway.last_stream_id,
                                            debugData: debug))
    default:
        break
    }
    return 0
}

private func onStreamClose(_ session: OpaquePointer?, _ streamID: Int32, _ errorCode: UInt32, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    delegate(userData).streamClosed(streamID: streamID, errorCode: HTTP2ErrorCode(rawValue: errorCode))
    return 0
}

/// A request whose HEADERS nghttp2 could not send (after a GOAWAY: START_STREAM_NOT_ALLOWED).
private func onFrameNotSent(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ libErrorCode: Int32,
                            _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue), frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else {
        return 0
    }
    delegate(userData).requestNotSent(streamID: frame.pointee.hd.stream_id,
                                      error: HTTP2Error(operation: "HEADERS not sent", code: libErrorCode))
    return 0
}

/// The data provider of every body submitted through `HTTP2Session`: the delegate fills nghttp2's buffer.
func readBodyCallback(
    _ session: OpaquePointer?, _ streamID: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int,
    _ flags: UnsafeMutablePointer<UInt32>?, _ source: UnsafeMutablePointer<nghttp2_data_source>?, _ userData: UnsafeMutableRawPointer?
) -> Int {
    guard let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    switch delegate(userData).readBody(streamID: streamID, into: UnsafeMutableBufferPointer(start: buffer, count: length)) {
    case .bytes(let count, let endOfBody):
        if endOfBody { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return count
    case .abandon:
        // Resets the stream (nghttp2's answer to a temporal failure of a data source).
        return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    }
}
