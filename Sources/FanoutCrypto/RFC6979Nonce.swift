import COpenSSL

/// The deterministic ECDSA nonce `k` of RFC 6979 §3.2 for a 256-bit group order and SHA-256
/// (qlen = hlen = 256 bits): HMAC_DRBG with HMAC-SHA256, seeded with the private key and the
/// message digest. The same key and digest always give the same sequence of candidates.
///
/// `next()` returns the first candidate in [1, q−1] (step h); each further call continues step h
/// ("K = HMAC_K(V || 0x00), V = HMAC_K(V)") for when the signer had to reject a `k` because r or s
/// came out zero (RFC 6979 §3.4). For P-256 the chance that any candidate is rejected is about 2⁻³²,
/// so the first one is the nonce in practice.
///
/// Secret state (K, V) lives in Swift arrays: `wipe()` zeroes them when the signature is made; a
/// copy the optimiser made cannot be reached from here (best effort, as with any managed memory).
/// The range check runs in constant time; HMAC-SHA256 is OpenSSL's.
struct RFC6979Nonce {
    private var key: [UInt8]
    private var value: [UInt8]
    private let order: [UInt8]
    private var started = false

    /// - Parameters:
    ///   - privateKey: the private scalar x, 32 bytes big-endian (int2octets(x)).
    ///   - digest: SHA-256 of the message, 32 bytes (h1).
    ///   - order: the group order q, 32 bytes big-endian.
    init(privateKey: [UInt8], digest: [UInt8], order: [UInt8]) throws {
        precondition(privateKey.count == 32 && digest.count == 32 && order.count == 32, "RFC6979Nonce is for 256-bit groups")
        self.order = order
        // bits2octets(h1): with hlen = qlen, bits2int(h1) is h1 itself, reduced once modulo q (h1 < 2²⁵⁶ < 2q).
        let reduced = Self.isBelow(digest, order) ? digest : Self.subtract(order, from: digest)
        value = [UInt8](repeating: 0x01, count: 32)                       // step b
        key = [UInt8](repeating: 0x00, count: 32)                         // step c
        key = try Self.hmac(key, value + [0x00] + privateKey + reduced)  // step d
        value = try Self.hmac(key, value)                                 // step e
        key = try Self.hmac(key, value + [0x01] + privateKey + reduced)  // step f
        value = try Self.hmac(key, value)                                 // step g
    }

    /// The next candidate k in [1, q−1], 32 bytes big-endian (step h).
    mutating func next() throws -> [UInt8] {
        if started { try reseed() }
        started = true
        while true {
            // tlen = qlen = hlen: one HMAC block is T, and bits2int(T) is T.
            value = try Self.hmac(key, value)
            if Self.isNonZero(value) && Self.isBelow(value, order) { return value }
            try reseed()
        }
    }

    /// Zeroes K and V.
    mutating func wipe() {
        for index in key.indices { key[index] = 0 }
        for index in value.indices { value[index] = 0 }
    }

    private mutating func reseed() throws {
        key = try Self.hmac(key, value + [0x00])
        value = try Self.hmac(key, value)
    }

    private static func hmac(_ key: [UInt8], _ data: [UInt8]) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = key.withUnsafeBytes { keyBytes in
            data.withUnsafeBufferPointer { dataBytes in
                out.withUnsafeMutableBufferPointer { outBytes in
                    HMAC(EVP_sha256(), keyBytes.baseAddress, Int32(keyBytes.count), dataBytes.baseAddress, dataBytes.count,
                         outBytes.baseAddress, &length) != nil
                }
            }
        }
        guard ok, length == 32 else { throw P256OpenSSL.failure("HMAC-SHA256 (RFC 6979 nonce)") }
        return out
    }

    /// a < b for equal-length big-endian numbers, without branching on their bytes.
    static func isBelow(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var borrow: Int = 0
        for index in stride(from: a.count - 1, through: 0, by: -1) {
            borrow = (Int(a[index]) - Int(b[index]) - borrow) >> 8 & 1
        }
        return borrow == 1
    }

    private static func isNonZero(_ bytes: [UInt8]) -> Bool {
        bytes.reduce(0 as UInt8) { $0 | $1 } != 0
    }

    /// a − b for equal-length big-endian numbers with a ≥ b.
    private static func subtract(_ b: [UInt8], from a: [UInt8]) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: a.count)
        var borrow = 0
        for index in stride(from: a.count - 1, through: 0, by: -1) {
            let difference = Int(a[index]) - Int(b[index]) - borrow
            result[index] = UInt8(truncatingIfNeeded: difference)
            borrow = difference < 0 ? 1 : 0
        }
        return result
    }
}
