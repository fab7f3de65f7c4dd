import APNsModel
import FanoutHTTP2
import Foundation

/// What the HTTP/2 session reports: response headers and bodies into each stream's `response`, the
/// server's SETTINGS, PING ACKs and GOAWAY, and each stream's end (to `sink`, completed by the engine).
///
/// A stream is found through its session context (an unretained `HTTP2Stream`, cleared before the
/// stream leaves `streams`).
extension HTTP2ClientConnection: HTTP2SessionDelegate {
    private func stream(_ streamID: Int32) -> HTTP2Stream? {
        guard let session, let context = session.streamContext(streamID) else { return nil }
        let stream = unsafeDowncast(context, to: HTTP2Stream.self)
        // A context nghttp2 kept after we let the object go: it may already carry another request, on
        // another connection with the same stream id. Only a stream on this connection's wire list, at
        // its slot, with this id, is this stream's request (ids are not reused within one session).
        guard stream.streamID == streamID, stream.slot >= 0, stream.slot < streams.count, streams[stream.slot] === stream else {
            return nil
        }
        return stream
    }

    func receivedHeader(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let stream = stream(streamID) else { return }
        if name.count == 7, name.elementsEqual(":status".utf8) {
            stream.response.status = Int(String(decoding: value, as: UTF8.self))
        } else {
            stream.response.record(headerName: name, value: value)
        }
    }

    func receivedData(streamID: Int32, chunk: UnsafeBufferPointer<UInt8>) {
        guard let stream = stream(streamID), stream.localFailure == nil else { return }
        guard stream.response.body.count + chunk.count <= HTTP2Stream.bodyLimit else {
            // The answer (status) is in: keep what fits and stop the rest of the body with a CANCEL.
            stream.response.body.append(contentsOf: UnsafeBufferPointer(rebasing: chunk.prefix(HTTP2Stream.bodyLimit - stream.response.body.count)))
            stream.localFailure = APNsHTTPResponse.bodyOverflowNote(limit: HTTP2Stream.bodyLimit)
            try? session?.submitReset(streamID: streamID, errorCode: .cancel)
            return
        }
        stream.response.body.append(contentsOf: chunk)
    }

    func received(_ frame: HTTP2ReceivedFrame) {
        switch frame {
        case .settings: receivedSettings()
        case .pingAck: receivedPingAck()
        case .goAway(let errorCode, let lastStreamID, let debugData):
            receivedGoAway(errorCode: errorCode, lastStreamID: lastStreamID, debugData: debugData)
        case .endOfStream: break
        }
    }

    private func receivedSettings() {
        guard let session else { return }
        let limit = session.remoteSetting(.maxConcurrentStreams)
        serverStreamLimit = Int(min(limit, UInt32(Int32.max)))
        counters.serverMaxConcurrentStreams.store(serverStreamLimit, ordering: .relaxed)
    }

    private func receivedPingAck() {
        pingSentAt = nil
        counters.pingsAcknowledged.add(1, ordering: .relaxed)
    }

    private func receivedGoAway(errorCode: HTTP2ErrorCode, lastStreamID: Int32, debugData: [UInt8]) {
        let received = APNsClient.GoAway(errorCode: errorCode.rawValue, errorName: errorCode.name,
                                         lastStreamID: lastStreamID, reason: Self.goAwayReason(debugData))
        goAway = received
        counters.lastGoAway.withLock { $0 = received }
        if state == .ready { state = .draining }
    }

    /// APNs puts `{"reason":"..."}` in the debug data; anything else is kept as text (bounded).
    static func goAwayReason(_ debug: [UInt8]) -> String? {
        guard !debug.isEmpty else { return nil }
        if let object = try? JSONSerialization.jsonObject(with: Data(debug)) as? [String: Any], let reason = object["reason"] as? String {
            return reason
        }
        return String(decoding: debug.prefix(256), as: UTF8.self)
    }

    func streamClosed(streamID: Int32, errorCode: HTTP2ErrorCode) {
        guard let stream = stream(streamID) else { return }
        session?.clearStreamContext(streamID)
        removeFromWire(stream)
        let end: HTTP2StreamEnd
        if let failure = stream.localFailure {
            // Only a body over the limit sets it, after the status arrived: answered, so a response
            // with the note (never retried blindly as a transport failure).
            if stream.response.status != nil {
                stream.response.transportFailure = failure
                end = .response
            } else {
                end = .streamFailed(failure)
            }
        } else if errorCode == .noError, stream.response.status != nil {
            end = .response
        } else if let goAway, streamID > goAway.lastStreamID {
            end = .transportFailed("not processed: the server sent \(goAway); retry on a new connection")
        } else {
            end = .streamFailed("HTTP/2 stream closed without a complete response (\(errorCode.name))")
        }
        sink.report(stream, end)
    }

    func requestNotSent(streamID: Int32, error: HTTP2Error) {
        // Rare (a GOAWAY raced our requests): a linear search is fine.
        guard let stream = streams.first(where: { $0.streamID == streamID }) else { return }
        // nghttp2 1.52 still closes this stream afterwards (REFUSED_STREAM, context attached; pinned
        // in FanoutHTTP2Tests): detach it so that close finds nothing, or the request would end twice
        // and its pooled HTTP2Stream could be ended again while serving another request.
        session?.clearStreamContext(streamID)
        removeFromWire(stream)
        if let goAway {
            sink.report(stream, .transportFailed("not sent: the server sent \(goAway); retry on a new connection"))
        } else {
            sink.report(stream, .streamFailed("HTTP/2 request not sent (\(error.reason))"))
        }
    }

    /// The request body of a stream; its bytes live in the `HTTP2Stream`.
    func readBody(streamID: Int32, into buffer: UnsafeMutableBufferPointer<UInt8>) -> HTTP2BodyRead {
        // The stream was abandoned (request timeout): reset it.
        guard let stream = stream(streamID) else { return .abandon }
        let body = stream.request.body
        let count = min(buffer.count, body.count - stream.bodyOffset)
        body.withUnsafeBufferPointer { source in
            if count > 0 { buffer.baseAddress!.update(from: source.baseAddress! + stream.bodyOffset, count: count) }
        }
        stream.bodyOffset += count
        unsentBodyBytes -= count
        return .bytes(count, endOfBody: stream.bodyOffset == body.count)
    }
}
