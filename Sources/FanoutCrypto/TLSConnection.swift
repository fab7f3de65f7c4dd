import COpenSSL
import COpenSSLShim
import Glibc

/// One TLS session (server side from `TLSServerContext`, client side from `TLSClientContext`) over a
/// non-blocking socket.
///
/// Owns the `SSL` object (freed in `deinit`), not the socket. Not thread-safe: exactly one event-loop
/// thread drives it, which is why it is not `Sendable`.
public final class TLSConnection {
    private let ssl: OpaquePointer

    /// What one read or write attempt came to.
    public enum IOResult: Equatable {
        /// This many bytes were read or written.
        case bytes(Int)
        /// Nothing more until the socket is readable.
        case wantRead
        /// Nothing more until the socket is writable.
        case wantWrite
        /// The peer closed the TLS session (close_notify) or the TCP connection.
        case closed
        /// A protocol or socket error; the connection must be dropped.
        case failed(String)
    }

    enum Role { case server, client }

    init(owning ssl: OpaquePointer, socket: Int32, role: Role = .server) throws {
        _ = Self.sigpipeIgnored
        self.ssl = ssl
        guard SSL_set_fd(ssl, socket) == 1 else { throw TLSError.fromQueue("SSL_set_fd") }
        switch role {
        case .server: SSL_set_accept_state(ssl)
        case .client: SSL_set_connect_state(ssl)
        }
    }

    deinit { SSL_free(ssl) }

    /// OpenSSL writes to the socket with write(2): a peer that has closed or reset the connection
    /// raises SIGPIPE, whose default action kills the process (the simulator, or a worker in its APNs
    /// client). Once per process, before the first TLS session exists, SIGPIPE is ignored, unless
    /// the application installed a handler of its own; the write then fails with EPIPE, which both
    /// sides handle as a closed connection.
    private static let sigpipeIgnored: Bool = {
        var current = sigaction()
        guard sigaction(SIGPIPE, nil, &current) == 0 else { return false }
        guard current.__sigaction_handler.sa_handler == nil else { return false }   // SIG_DFL is nil here
        var ignore = sigaction()
        ignore.__sigaction_handler.sa_handler = SIG_IGN
        sigemptyset(&ignore.sa_mask)
        return sigaction(SIGPIPE, &ignore, nil) == 0
    }()

    /// Reads decrypted bytes (running the handshake first when needed).
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        let count = SSL_read(ssl, buffer.baseAddress, Int32(min(buffer.count, Int(Int32.max))))
        if count > 0 { return .bytes(Int(count)) }
        return classify(count, operation: "SSL_read")
    }

    /// Encrypts and writes; with partial writes enabled this may write fewer bytes than given.
    public func write(_ bytes: UnsafeRawBufferPointer) -> IOResult {
        guard bytes.count > 0 else { return .bytes(0) }
        let count = SSL_write(ssl, bytes.baseAddress, Int32(min(bytes.count, Int(Int32.max))))
        if count > 0 { return .bytes(Int(count)) }
        return classify(count, operation: "SSL_write")
    }

    /// The ALPN protocol agreed in the handshake, e.g. "h2"; nil before or without ALPN.
    public var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    public var isHandshakeDone: Bool { SSL_is_init_finished(ssl) == 1 }

    /// Advances the handshake: `.bytes(0)` once it is complete, `.wantRead`/`.wantWrite` while it
    /// waits for the socket, `.failed` with the reason (a failed certificate check names the check).
    public func handshake() -> IOResult {
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .bytes(0) }
        let outcome = classify(result, operation: "TLS handshake")
        switch outcome {
        case .failed, .closed:
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK {
                return .failed("certificate verification failed: \(String(cString: X509_verify_cert_error_string(verify)))")
            }
            if case .closed = outcome { return .failed("TLS handshake: the server closed the connection") }
            return outcome
        default:
            return outcome
        }
    }

    /// Sends close_notify without waiting for the peer's (best effort; the socket closes next).
    public func shutdown() {
        if isHandshakeDone { _ = SSL_shutdown(ssl) }
    }

    private func classify(_ result: Int32, operation: String) -> IOResult {
        let code = SSL_get_error(ssl, result)
        switch code {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN: return .closed
        case SSL_ERROR_SYSCALL:
            let queued = TLSError.drainOpenSSLErrors()
            return queued.isEmpty ? .closed : .failed("\(operation): \(queued)")
        default:
            return .failed("\(operation): error \(code) \(TLSError.drainOpenSSLErrors())")
        }
    }
}
