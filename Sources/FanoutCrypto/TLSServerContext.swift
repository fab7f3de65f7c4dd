import COpenSSL
import COpenSSLShim

/// A TLS 1.2+ server configuration (certificate chain, private key, ALPN) shared by every
/// connection a listener accepts.
///
/// Owns one `SSL_CTX`, freed in `deinit`. It is configured completely in `init` and never mutated
/// afterwards; OpenSSL documents `SSL_new` on a shared, unchanging `SSL_CTX` as thread-safe, which
/// is why this wrapper is `@unchecked Sendable`.
public final class TLSServerContext: @unchecked Sendable {
    private let context: OpaquePointer

    /// The ALPN protocol the server insists on; a client offering none of these fails the handshake.
    public let alpnProtocol: String?

    /// - Parameters:
    ///   - certificateChainPath: PEM file, leaf first, then intermediates.
    ///   - privateKeyPath: PEM file with the leaf's private key.
    ///   - alpnProtocol: e.g. `"h2"`; nil accepts clients without ALPN.
    public init(certificateChainPath: String, privateKeyPath: String, alpnProtocol: String?) throws {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw TLSError.fromQueue("SSL_CTX_new") }
        self.context = context
        self.alpnProtocol = alpnProtocol
        guard fanout_ssl_ctx_set_min_tls12(context) == 1 else { throw TLSError.fromQueue("set minimum TLS 1.2") }
        guard SSL_CTX_use_certificate_chain_file(context, certificateChainPath) == 1 else {
            throw TLSError.fromQueue("load certificate chain \(certificateChainPath)")
        }
        guard SSL_CTX_use_PrivateKey_file(context, privateKeyPath, SSL_FILETYPE_PEM) == 1 else {
            throw TLSError.fromQueue("load private key \(privateKeyPath)")
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw TLSError.fromQueue("private key \(privateKeyPath) does not match certificate \(certificateChainPath)")
        }
        _ = fanout_ssl_ctx_set_mode_partial_write(context)
        if alpnProtocol == "h2" {
            SSL_CTX_set_alpn_select_cb(context, selectH2, nil)
        } else if alpnProtocol != nil {
            throw TLSError(operation: "configure ALPN", openSSLErrors: "only h2 is supported, got \(alpnProtocol!)")
        }
    }

    deinit { SSL_CTX_free(context) }

    /// A server-side TLS session on an accepted, non-blocking socket. The socket stays owned by the caller.
    public func makeConnection(socket: Int32) throws -> TLSConnection {
        guard let ssl = SSL_new(context) else { throw TLSError.fromQueue("SSL_new") }
        return try TLSConnection(owning: ssl, socket: socket)
    }
}

/// ALPN: pick "h2" from the client's list, or end the handshake with no_application_protocol,
/// as APNs (HTTP/2 only) does.
private func selectH2(
    _ ssl: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?, _ outLength: UnsafeMutablePointer<UInt8>?,
    _ input: UnsafePointer<UInt8>?, _ inputLength: UInt32, _ argument: UnsafeMutableRawPointer?
) -> Int32 {
    guard let input, let out, let outLength else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    var index = 0
    let total = Int(inputLength)
    while index < total {
        let length = Int(input[index])
        let start = index + 1
        if start + length > total { break }
        if length == 2, input[start] == UInt8(ascii: "h"), input[start + 1] == UInt8(ascii: "2") {
            out.pointee = input + start
            outLength.pointee = 2
            return SSL_TLSEXT_ERR_OK
        }
        index = start + length
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL
}
