import COpenSSL
import COpenSSLShim

/// Converts ECDSA P-256 signatures between OpenSSL's DER form and JWS's raw 64-byte r‖s.
public enum ES256Signature {
    /// DER `SEQUENCE { r INTEGER, s INTEGER }` → 32-byte big-endian r followed by 32-byte s.
    public static func raw(fromDER der: [UInt8]) throws -> [UInt8] {
        try der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let signature = d2i_ECDSA_SIG(nil, &cursor, buffer.count) else {
                throw P256OpenSSL.failure("d2i_ECDSA_SIG")
            }
            defer { ECDSA_SIG_free(signature) }
            var raw = [UInt8](repeating: 0, count: 64)
            let ok = raw.withUnsafeMutableBufferPointer { out in
                BN_bn2binpad(ECDSA_SIG_get0_r(signature), out.baseAddress, 32) == 32
                    && BN_bn2binpad(ECDSA_SIG_get0_s(signature), out.baseAddress! + 32, 32) == 32
            }
            guard ok else { throw P256OpenSSL.failure("BN_bn2binpad") }
            return raw
        }
    }

    /// Raw 64-byte r‖s → DER, as OpenSSL's verifier wants it.
    public static func der(fromRaw raw: [UInt8]) throws -> [UInt8] {
        guard raw.count == 64 else { throw P256KeyError.badSignatureLength(raw.count) }
        guard let signature = ECDSA_SIG_new() else { throw P256OpenSSL.failure("ECDSA_SIG_new") }
        defer { ECDSA_SIG_free(signature) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s else {
            BN_free(r); BN_free(s)
            throw P256OpenSSL.failure("BN_bin2bn")
        }
        // ECDSA_SIG_set0 takes ownership of r and s on success only.
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r); BN_free(s)
            throw P256OpenSSL.failure("ECDSA_SIG_set0")
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { throw P256OpenSSL.failure("i2d_ECDSA_SIG") }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        guard written == length else { throw P256OpenSSL.failure("i2d_ECDSA_SIG") }
        return der
    }
}
