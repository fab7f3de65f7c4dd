import APNsModel

extension SeededRandom {
    /// Uniform in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) * (1.0 / 9_007_199_254_740_992.0) }

    /// A random version-4 UUID in canonical lowercase form (one allocation).
    mutating func uuid() -> String {
        var high = next(), low = next()
        high = (high & ~UInt64(0xF000)) | 0x4000  // version 4 (nibble 12)
        low = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000  // RFC 4122 variant
        return String(unsafeUninitializedCapacity: 36) { buffer in
            let digits: StaticString = "0123456789abcdef"
            var position = 0
            for nibble in 0..<32 {
                if nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20 {
                    buffer[position] = UInt8(ascii: "-")
                    position += 1
                }
                let word = nibble < 16 ? high : low
                let shift = UInt64(60 - 4 * (nibble % 16))
                buffer[position] = digits.utf8Start[Int((word >> shift) & 0xF)]
                position += 1
            }
            return 36
        }
    }
}
