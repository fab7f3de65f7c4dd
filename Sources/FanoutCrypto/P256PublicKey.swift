import COpenSSL
import COpenSSLShim
import Foundation

/// An EC P-256 public key, used to verify ES256 signatures (the APNs simulator checks JWTs with it).
///
/// Owns one `EVP_PKEY`, freed in `deinit`; immutable after init and safe to verify with from
/// several threads (each `verify` uses its own `EVP_MD_CTX`).
public final class P256PublicKey: @unchecked Sendable {
    /// Owned; freed in deinit. Immutable after init.
    private let pkey: OpaquePointer

    deinit { EVP_PKEY_free(pkey) }

    /// Loads a PEM SubjectPublicKeyInfo (`-----BEGIN PUBLIC KEY-----`) for an EC P-256 key.
    public init(pem: String) throws {
        pkey = try P256OpenSSL.loadP256PEM(pem) { PEM_read_bio_PUBKEY($0, nil, nil, nil) }
    }

    /// PEM SubjectPublicKeyInfo (`-----BEGIN PUBLIC KEY-----`).
    public func pemSPKI() throws -> String {
        try P256OpenSSL.writeToString("PEM_write_bio_PUBKEY") { bio in PEM_write_bio_PUBKEY(bio, pkey) }
    }

    /// True when `signature` (raw 64-byte r‖s) is a valid ES256 signature of `message` by this key.
    /// A signature of the wrong length, or with r/s out of range, is simply not valid (false).
    public func verify<Message: ContiguousBytes>(signature: [UInt8], message: Message) -> Bool {
        guard let der = try? ES256Signature.der(fromRaw: signature) else { return false }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, pkey) == 1 else {
            _ = P256OpenSSL.drainErrors()
            return false
        }
        let result = message.withUnsafeBytes { raw in
            EVP_DigestVerify(context, der, der.count, raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count)
        }
        if result != 1 { _ = P256OpenSSL.drainErrors() }
        return result == 1
    }

    /// Convenience for verifying a UTF-8 signing input (a JWT's `header.claims`).
    public func verify(signature: [UInt8], message text: String) -> Bool {
        verify(signature: signature, message: Array(text.utf8))
    }
}
