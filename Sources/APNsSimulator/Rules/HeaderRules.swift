/// Checks of single header values shared by device pushes and broadcasts.
enum HeaderRules {
    /// 8-4-4-4-12 lowercase hex (Apple: "canonical form … lowercase hexadecimal digits").
    static func isCanonicalUUID(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        guard value.count == 36 else { return false }
        for (offset, byte) in value.enumerated() {
            switch offset {
            case 8, 13, 18, 23: if byte != UInt8(ascii: "-") { return false }
            default:
                let lowerHex = byte.isDigit || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
                if !lowerHex { return false }
            }
        }
        return true
    }

    /// A non-negative decimal integer without sign or leading junk; nil otherwise.
    static func integer(_ value: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard !value.isEmpty, value.count <= 18 else { return nil }
        var result: Int64 = 0
        for byte in value {
            guard byte.isDigit else { return nil }
            result = result * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return result
    }

    static func isHex(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        for byte in value where !byte.isHexDigit { return false }
        return true
    }
}
