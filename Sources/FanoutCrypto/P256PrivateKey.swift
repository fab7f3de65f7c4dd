import COpenSSL
import COpenSSLShim
import Foundation

/// An EC P-256 private key (an APNs `.p8` key), used to sign ES256 JWTs.
///
/// Owns one `EVP_PKEY`, freed in `deinit`. The key is never mutated after init and signing only
/// reads it (each `sign` exports its own copy of the scalar and uses its own OpenSSL contexts), so
/// a key can be shared between threads.
public final class P256PrivateKey: @unchecked Sendable {
    /// Owned; freed in deinit. Immutable after init (see the type's doc for thread safety).
    private let pkey: OpaquePointer

    private init(owning pkey: OpaquePointer) { self.pkey = pkey }

    deinit { EVP_PKEY_free(pkey) }

    /// Loads a PEM private key (PKCS#8 `.p8` as Apple issues it; SEC1 `EC PRIVATE KEY` is accepted too).
    /// Throws `P256KeyError` for anything that is not an EC P-256 private key.
    public convenience init(pem: String) throws {
        self.init(owning: try P256OpenSSL.loadP256PEM(pem) { PEM_read_bio_PrivateKey($0, nil, nil, nil) })
    }

    /// Loads a `.p8` file. A missing or unreadable file gives `.unreadableFile` with the reason.
    public convenience init(contentsOfFile path: String) throws {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            let reason = (error as NSError).localizedFailureReason ?? (error as NSError).localizedDescription
            let trimmed = reason.hasSuffix(".") ? String(reason.dropLast()) : reason
            throw P256KeyError.unreadableFile(path: path, reason: trimmed)
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw P256KeyError.notPEM(detail: "'\(path)' is not text")
        }
        try self.init(pem: text)
    }

    /// A fresh random P-256 key, for tests and the simulator.
    public static func generate() throws -> P256PrivateKey {
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else { throw P256OpenSSL.failure("EVP_PKEY_CTX_new_id") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw P256OpenSSL.failure("EVP_PKEY_keygen_init") }
        guard EVP_PKEY_CTX_set_group_name(context, "P-256") == 1 else { throw P256OpenSSL.failure("EVP_PKEY_CTX_set_group_name") }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen(context, &key) == 1, let key else { throw P256OpenSSL.failure("EVP_PKEY_keygen") }
        return P256PrivateKey(owning: key)
    }

    /// PEM PKCS#8 (`-----BEGIN PRIVATE KEY-----`), the `.p8` format.
    public func pemPKCS8() throws -> String {
        try P256OpenSSL.writeToString("PEM_write_bio_PKCS8PrivateKey") { bio in
            PEM_write_bio_PKCS8PrivateKey(bio, pkey, nil, nil, 0, nil, nil)
        }
    }

    /// The matching public key.
    public func publicKey() throws -> P256PublicKey {
        let pem = try P256OpenSSL.writeToString("PEM_write_bio_PUBKEY") { bio in PEM_write_bio_PUBKEY(bio, pkey) }
        return try P256PublicKey(pem: pem)
    }

    /// ES256: ECDSA P-256 with SHA-256 over `message`; returns the raw 64-byte r‖s that JWS uses.
    /// Deterministic (RFC 6979, see `DeterministicECDSA`): the same key and message give the same
    /// bytes on every machine, so replicas that sign the same provider-token text present one token.
    public func sign<Message: ContiguousBytes>(_ message: Message) throws -> [UInt8] {
        try message.withUnsafeBytes { try DeterministicECDSA.sign(pkey, $0) }
    }

    /// Convenience for signing UTF-8 text (a JWT signing input).
    public func sign(_ text: String) throws -> [UInt8] {
        try sign(Array(text.utf8))
    }
}
