/// Why a P-256 key could not be loaded, created, exported or used.
public enum P256KeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The key file could not be read (missing, permissions, a directory, ...).
    case unreadableFile(path: String, reason: String)
    /// The text is not a PEM private/public key OpenSSL can parse.
    case notPEM(detail: String)
    /// The key parsed, but is not an elliptic-curve key (e.g. RSA, Ed25519).
    case notEllipticCurve(keyType: String)
    /// The key is EC but not on P-256 (prime256v1), the only curve ES256 allows.
    case wrongCurve(curve: String)
    /// An OpenSSL call failed; `operation` names it, `detail` is OpenSSL's error queue text.
    case openSSL(operation: String, detail: String)
    /// A raw ES256 signature must be exactly 64 bytes (r‖s, 32 bytes each).
    case badSignatureLength(Int)

    public var description: String {
        switch self {
        case .unreadableFile(let path, let reason):
            return "cannot read key file '\(path)': \(reason). Check the path and its permissions."
        case .notPEM(let detail):
            return "not a PEM-encoded key (\(detail)). An APNs key is the .p8 file from developer.apple.com, starting with '-----BEGIN PRIVATE KEY-----'."
        case .notEllipticCurve(let keyType):
            return "the key is \(keyType), not an elliptic-curve key. APNs token auth needs an EC P-256 (ES256) .p8 key."
        case .wrongCurve(let curve):
            return "the EC key is on curve \(curve), not P-256. APNs token auth needs an ES256 (P-256) key."
        case .openSSL(let operation, let detail):
            return "OpenSSL \(operation) failed: \(detail)"
        case .badSignatureLength(let count):
            return "an ES256 signature is 64 bytes (r‖s), got \(count)"
        }
    }
}
