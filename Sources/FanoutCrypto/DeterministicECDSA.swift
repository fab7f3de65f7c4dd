import COpenSSL

/// ECDSA P-256 / SHA-256 with the deterministic nonce of RFC 6979 (`RFC6979Nonce`): the same key
/// and message always give the same 64-byte r‖s. OpenSSL 3.0 has no deterministic mode, so this
/// builds the signature from OpenSSL's primitives:
///
///     k    = RFC 6979 §3.2 (HMAC-SHA256 DRBG over the private scalar d and SHA-256(message))
///     r    = x(k·G) mod n                  (EC_POINT_mul on the generator)
///     s    = k⁻¹ · (z + r·d) mod n         (z = SHA-256(message) as an integer, reduced mod n)
///
/// s is not normalised to the lower half: ES256 (RFC 7518 §3.4) does not ask for it, verifiers
/// (OpenSSL's, Apple's) accept either, and RFC 6979's own vectors are not normalised.
///
/// Constant-time care, since d and k are secrets: k, k⁻¹ and d carry `BN_FLG_CONSTTIME`; k·G goes
/// through OpenSSL's generator multiplication (a constant-time ladder, or the fixed-window
/// nistz256 table on x86-64); k⁻¹ is k^(n−2) mod n with `BN_mod_exp_mont_consttime` (Fermat, no
/// extended-Euclid branches); the products are Montgomery multiplications and the sum
/// `BN_mod_add_quick`, not `BN_mod_mul`/`BN_mod_add`, which divide. All temporaries come from a
/// secure `BN_CTX` and are cleared when it is freed; d's copy is cleared with `BN_clear_free`.
/// What stays public is what the signature reveals anyway (r) and the message digest.
/// The signer for a provider token signs public text (team, key ID, `iat`), once per window.
enum DeterministicECDSA {
    /// Signs SHA-256(`message`) with the P-256 private key `pkey`; returns raw r‖s (64 bytes).
    static func sign(_ pkey: OpaquePointer, _ message: UnsafeRawBufferPointer) throws -> [UInt8] {
        try sign(pkey, digest: sha256(message))
    }

    /// Signs a SHA-256 digest (32 bytes) with the P-256 private key `pkey`; returns raw r‖s.
    static func sign(_ pkey: OpaquePointer, digest: [UInt8]) throws -> [UInt8] {
        guard digest.count == 32 else { throw P256KeyError.openSSL(operation: "ES256 signing", detail: "digest is not 32 bytes") }
        guard let context = BN_CTX_secure_new() else { throw P256OpenSSL.failure("BN_CTX_secure_new") }
        defer { BN_CTX_free(context) }
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else { throw P256OpenSSL.failure("EC_GROUP_new_by_curve_name") }
        defer { EC_GROUP_free(group) }
        guard let order = EC_GROUP_get0_order(group) else { throw P256OpenSSL.failure("EC_GROUP_get0_order") }

        // EVP_PKEY_get_bn_param allocates a copy of d that the caller frees.
        var exported: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pkey, "priv", &exported) == 1, let d = exported else {
            throw P256OpenSSL.failure("EVP_PKEY_get_bn_param(priv)")
        }
        defer { BN_clear_free(d) }
        BN_set_flags(d, BN_FLG_CONSTTIME)

        var nonces = try makeNonces(d: d, order: order, digest: digest)
        defer { nonces.wipe() }

        BN_CTX_start(context)
        defer { BN_CTX_end(context) }
        let numbers = (0..<11).compactMap { _ in BN_CTX_get(context) }
        guard numbers.count == 11 else { throw P256OpenSSL.failure("BN_CTX_get") }
        let (k, kInverse, kInverseMontgomery, dMontgomery, rd, sum, s) =
            (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4], numbers[5], numbers[6])
        let (r, z, x, orderMinus2) = (numbers[7], numbers[8], numbers[9], numbers[10])
        for secret in [k, kInverse, kInverseMontgomery, dMontgomery, rd, sum, s] { BN_set_flags(secret, BN_FLG_CONSTTIME) }

        guard let montgomery = BN_MONT_CTX_new() else { throw P256OpenSSL.failure("BN_MONT_CTX_new") }
        defer { BN_MONT_CTX_free(montgomery) }
        guard let point = EC_POINT_new(group) else { throw P256OpenSSL.failure("EC_POINT_new") }
        defer { EC_POINT_clear_free(point) }

        guard BN_MONT_CTX_set(montgomery, order, context) == 1,
              BN_copy(orderMinus2, order) != nil, BN_sub_word(orderMinus2, 2) == 1,
              BN_to_montgomery(dMontgomery, d, montgomery, context) == 1
        else { throw P256OpenSSL.failure("preparing P-256 arithmetic") }
        // z = bits2int(H(m)) mod n: the digest is as long as n, so no shift.
        guard digest.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, 32, z) }) != nil,
              BN_nnmod(z, z, order, context) == 1
        else { throw P256OpenSSL.failure("reducing the digest") }

        // A candidate k is rejected only when r or s is zero (probability ~2⁻²⁵⁶ each); the bound
        // keeps a broken library from looping forever.
        for _ in 0..<8 {
            var candidate = try nonces.next()
            let loaded = candidate.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, k) } != nil
            for index in candidate.indices { candidate[index] = 0 }
            guard loaded else { throw P256OpenSSL.failure("BN_bin2bn(k)") }

            guard EC_POINT_mul(group, point, k, nil, nil, context) == 1,
                  EC_POINT_get_affine_coordinates(group, point, x, nil, context) == 1,
                  BN_nnmod(r, x, order, context) == 1
            else { throw P256OpenSSL.failure("computing k·G") }
            if BN_is_zero(r) == 1 { continue }

            // s = k⁻¹ · (z + r·d) mod n. A Montgomery product of a plain and a Montgomery-form
            // operand is plain: r·(dR)·R⁻¹ = r·d, and (z + r·d)·(k⁻¹R)·R⁻¹ = s.
            guard BN_mod_exp_mont_consttime(kInverse, k, orderMinus2, order, context, montgomery) == 1,
                  BN_to_montgomery(kInverseMontgomery, kInverse, montgomery, context) == 1,
                  BN_mod_mul_montgomery(rd, r, dMontgomery, montgomery, context) == 1,
                  BN_mod_add_quick(sum, z, rd, order) == 1,
                  BN_mod_mul_montgomery(s, sum, kInverseMontgomery, montgomery, context) == 1
            else { throw P256OpenSSL.failure("computing s") }
            if BN_is_zero(s) == 1 { continue }

            var raw = [UInt8](repeating: 0, count: 64)
            let written = raw.withUnsafeMutableBufferPointer { out in
                BN_bn2binpad(r, out.baseAddress, 32) == 32 && BN_bn2binpad(s, out.baseAddress! + 32, 32) == 32
            }
            guard written else { throw P256OpenSSL.failure("BN_bn2binpad") }
            return raw
        }
        throw P256KeyError.openSSL(operation: "ES256 signing", detail: "no usable RFC 6979 nonce in 8 candidates")
    }

    /// The RFC 6979 generator for d (32 bytes big-endian, wiped after use) and this digest.
    private static func makeNonces(d: OpaquePointer, order: OpaquePointer, digest: [UInt8]) throws -> RFC6979Nonce {
        var scalar = [UInt8](repeating: 0, count: 32)
        var orderBytes = [UInt8](repeating: 0, count: 32)
        defer { for index in scalar.indices { scalar[index] = 0 } }
        guard BN_bn2binpad(d, &scalar, 32) == 32, BN_bn2binpad(order, &orderBytes, 32) == 32 else {
            throw P256OpenSSL.failure("BN_bn2binpad(d)")
        }
        return try RFC6979Nonce(privateKey: scalar, digest: digest, order: orderBytes)
    }

    static func sha256(_ message: UnsafeRawBufferPointer) throws -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard EVP_Digest(message.baseAddress, message.count, &digest, &length, EVP_sha256(), nil) == 1, length == 32 else {
            throw P256OpenSSL.failure("EVP_Digest(SHA-256)")
        }
        return digest
    }
}
