import COpenSSL
import COpenSSLShim

/// A TLS setup or certificate failure: what was being done, and OpenSSL's own error queue text.
public struct TLSError: Error, Sendable, CustomStringConvertible {
    public var operation: String
    public var openSSLErrors: String

    public var description: String {
        openSSLErrors.isEmpty ? "TLS: \(operation) failed" : "TLS: \(operation) failed: \(openSSLErrors)"
    }

    /// Builds the error from the current thread's OpenSSL error queue and empties it.
    static func fromQueue(_ operation: String) -> TLSError {
        TLSError(operation: operation, openSSLErrors: drainOpenSSLErrors())
    }

    static func drainOpenSSLErrors() -> String {
        var messages: [String] = []
        while true {
            let code = fanout_err_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages.joined(separator: "; ")
    }
}
