import COpenSSL
import COpenSSLShim
import Foundation

/// A TLS 1.2+ client configuration for HTTP/2 hosts: peer verification always on (system CA paths,
/// or only the given CA file), ALPN offering exactly "h2".
///
/// Owns one `SSL_CTX`, freed in `deinit`. Configured completely in `init` and never mutated
/// afterwards; `SSL_new` on a shared, unchanging `SSL_CTX` is thread-safe (OpenSSL documents it),
/// which is why this wrapper is `@unchecked Sendable`.
public final class TLSClientContext: @unchecked Sendable {
    private let context: OpaquePointer

    /// - Parameter caFile: PEM bundle to trust instead of the system's default CA paths (for test
    ///   servers and private endpoints); nil trusts the system's CAs (Apple's hosts).
    public init(caFile: String?) throws {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw TLSError.fromQueue("SSL_CTX_new") }
        self.context = context
        guard fanout_ssl_ctx_set_min_tls12(context) == 1 else { throw TLSError.fromQueue("set minimum TLS 1.2") }
        if let caFile {
            guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                throw TLSError.fromQueue("load CA file \(caFile)")
            }
        } else {
            guard SSL_CTX_set_default_verify_paths(context) == 1 else { throw TLSError.fromQueue("load the system CA paths") }
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        // ALPN wire format: length-prefixed names. SSL_CTX_set_alpn_protos returns 0 on success.
        let alpn: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        guard SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count)) == 0 else { throw TLSError.fromQueue("set ALPN h2") }
        _ = fanout_ssl_ctx_set_mode_partial_write(context)
    }

    deinit { SSL_CTX_free(context) }

    /// A client TLS session on a connected (or connecting), non-blocking socket, verifying that the
    /// certificate names `serverName` (a DNS name, checked with SNI; or an IP literal, checked against
    /// the certificate's IP addresses). The socket stays owned by the caller.
    public func makeConnection(socket: Int32, serverName: String) throws -> TLSConnection {
        guard let ssl = SSL_new(context) else { throw TLSError.fromQueue("SSL_new") }
        let connection = try TLSConnection(owning: ssl, socket: socket, role: .client)
        if Self.isIPLiteral(serverName) {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1 else {
                throw TLSError.fromQueue("set the expected IP address \(serverName)")
            }
        } else {
            guard fanout_ssl_set_tlsext_host_name(ssl, serverName) == 1 else { throw TLSError.fromQueue("set SNI \(serverName)") }
            SSL_set_hostflags(ssl, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
            guard SSL_set1_host(ssl, serverName) == 1 else { throw TLSError.fromQueue("set the expected host name \(serverName)") }
        }
        return connection
    }

    /// Whether `name` is a numeric IPv4 or IPv6 address (IPv6 without brackets).
    public static func isIPLiteral(_ name: String) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16)
        return inet_pton(AF_INET, name, &buffer) == 1 || inet_pton(AF_INET6, name, &buffer) == 1
    }
}
