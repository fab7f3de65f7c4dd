import CNghttp2

/// A call into nghttp2 that failed: the operation, nghttp2's (negative) library error code and its text.
public struct HTTP2Error: Error, Sendable, CustomStringConvertible {
    /// The nghttp2 function that failed, e.g. `nghttp2_submit_request`.
    public var operation: String
    /// nghttp2's library error code (`NGHTTP2_ERR_*`, negative).
    public var code: Int32

    /// nghttp2's text for `code`, e.g. "Out of memory".
    public var reason: String { String(cString: nghttp2_strerror(code)) }

    public var description: String { "\(operation): \(reason)" }
}

/// An HTTP/2 error code as carried by RST_STREAM and GOAWAY (RFC 9113 §7); 0 is NO_ERROR.
public struct HTTP2ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32

    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let noError = HTTP2ErrorCode(rawValue: NGHTTP2_NO_ERROR.rawValue)
    public static let internalError = HTTP2ErrorCode(rawValue: NGHTTP2_INTERNAL_ERROR.rawValue)
    public static let cancel = HTTP2ErrorCode(rawValue: NGHTTP2_CANCEL.rawValue)

    /// The code's name, e.g. "NO_ERROR" or "CANCEL" (nghttp2's text for unknown codes).
    public var name: String { String(cString: nghttp2_http2_strerror(rawValue)) }

    public var description: String { name }
}

/// One SETTINGS parameter this package sends or reads.
public struct HTTP2Setting: Sendable, Hashable {
    public enum Identifier: Sendable, Hashable {
        case enablePush
        case maxConcurrentStreams

        var nghttp2ID: nghttp2_settings_id {
            switch self {
            case .enablePush: NGHTTP2_SETTINGS_ENABLE_PUSH
            case .maxConcurrentStreams: NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS
            }
        }
    }

    public var identifier: Identifier
    public var value: UInt32

    public init(_ identifier: Identifier, _ value: UInt32) {
        self.identifier = identifier
        self.value = value
    }
}
