import FanoutCrypto

/// Moves a session's serialized frames through TLS to the socket: nghttp2's output is gathered into
/// one buffer (up to `highWater` ahead), then written with `SSL_write`, resuming at the offset a
/// partial write left.
///
/// Not thread-safe: one per connection, on the thread that drives it. Keeps its buffer across
/// sessions (`reset` when the connection closes).
public struct HTTP2OutputPump {
    /// How far nghttp2's output is gathered ahead of the socket.
    public static let highWater = 64 * 1024

    /// How a `flush` ended.
    public enum Outcome: Equatable {
        /// Everything nghttp2 had is written.
        case drained
        /// The socket is full: flush again when it is writable.
        case waitsForWritable
        /// TLS needs the peer's bytes first (e.g. the handshake is not finished): flush again after the
        /// next read. Do not watch for writability meanwhile: the socket is writable, the loop would spin.
        case waitsForReadable
        /// The peer closed the connection.
        case closed
        /// TLS or the socket failed; the connection must be dropped.
        case failed(String)
        /// nghttp2 could not produce its output (a fatal session error); the connection must be dropped.
        case sessionFailed(reason: String)
    }

    private var output: [UInt8] = []
    private var offset = 0

    public init() {
        output.reserveCapacity(Self.highWater + 16 * 1024)
    }

    /// Writes until nghttp2 has nothing more or the socket cannot take more.
    public mutating func flush(_ session: HTTP2Session, over tls: TLSConnection) -> Outcome {
        while true {
            while output.count - offset < Self.highWater {
                let chunk: UnsafeRawBufferPointer?
                do {
                    chunk = try session.nextOutput()
                } catch {
                    return .sessionFailed(reason: error.reason)
                }
                guard let chunk else { break }
                output.append(contentsOf: chunk)
            }
            if offset == output.count { return .drained }
            let result = output.withUnsafeBytes { tls.write(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
            switch result {
            case .bytes(let written):
                offset += written
                if offset == output.count {
                    output.removeAll(keepingCapacity: true)
                    offset = 0
                }
            case .wantWrite:
                return .waitsForWritable
            case .wantRead:
                return .waitsForReadable
            case .closed:
                return .closed
            case .failed(let text):
                return .failed(text)
            }
        }
    }

    /// Drops unwritten output (the connection closed).
    public mutating func reset() {
        output.removeAll(keepingCapacity: true)
        offset = 0
    }
}
