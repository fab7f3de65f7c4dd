/// What an `HTTP2Session` reports while it processes input or produces output.
///
/// Called on the thread that drives the session, synchronously from inside `HTTP2Session.receive`,
/// the `submit…` calls and `HTTP2OutputPump.flush`. The buffers lent to these methods are valid only
/// during the call: copy what must outlive it. Do the minimum here; never call `receive` re-entrantly.
public protocol HTTP2SessionDelegate: AnyObject {
    /// The HEADERS of a new request began on `streamID` (server sessions).
    func beganRequest(streamID: Int32)
    /// One header field of a HEADERS frame (request or response, trailers included).
    func receivedHeader(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>)
    /// A chunk of a DATA frame's payload.
    func receivedData(streamID: Int32, chunk: UnsafeBufferPointer<UInt8>)
    /// A frame that completed: see `HTTP2ReceivedFrame` for the kinds reported.
    func received(_ frame: HTTP2ReceivedFrame)
    /// The stream closed (answered, reset by either side, or refused by a GOAWAY) with this error code.
    func streamClosed(streamID: Int32, errorCode: HTTP2ErrorCode)
    /// The HEADERS of a request could not be sent (e.g. after a GOAWAY). Its stream never opened, so no
    /// `streamClosed` follows: this is the only notice (client sessions).
    func requestNotSent(streamID: Int32, error: HTTP2Error)
    /// Fills `buffer` with the next bytes of the body submitted with `hasBody: true` on `streamID`.
    func readBody(streamID: Int32, into buffer: UnsafeMutableBufferPointer<UInt8>) -> HTTP2BodyRead
}

extension HTTP2SessionDelegate {
    public func beganRequest(streamID: Int32) {}
    public func requestNotSent(streamID: Int32, error: HTTP2Error) {}
}

/// The frames a delegate hears about (everything else nghttp2 handles itself).
public enum HTTP2ReceivedFrame {
    /// A HEADERS or DATA frame with END_STREAM: the peer finished sending on this stream.
    case endOfStream(streamID: Int32)
    /// The peer's SETTINGS (not an ACK); read them with `HTTP2Session.remoteSetting`.
    case settings
    /// The ACK of a PING we sent.
    case pingAck
    /// A GOAWAY, with its debug data copied.
    case goAway(errorCode: HTTP2ErrorCode, lastStreamID: Int32, debugData: [UInt8])
}

/// What `HTTP2SessionDelegate.readBody` produced.
public enum HTTP2BodyRead {
    /// This many bytes were written to the buffer; `endOfBody` when they are the last.
    case bytes(Int, endOfBody: Bool)
    /// The stream's body is gone (the stream was abandoned): nghttp2 resets the stream.
    case abandon
}
