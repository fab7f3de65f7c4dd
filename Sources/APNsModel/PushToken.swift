/// A device push token (an activity's update token or a push-to-start token), held as its bytes.
///
/// Registrations and inline tokens arrive as hex text; they are decoded once, when read, and the hex
/// is made again only where an APNs request path is built (`hex`: lowercase, two digits a byte, so
/// `/3/device/<hex>` is what the text said, lowercased). APNs says token sizes vary (32 bytes is common,
/// longer ones are seen): up to `inlineCapacity` bytes are stored inline in 34 bytes, with no
/// allocation; a longer token in one array. The representation is canonical, so two tokens with the same
/// bytes are equal and hash alike.
///
/// `description` is redacted (`Redact.token`: the first 8 hex digits at most, and the hex length);
/// a token is never printed whole.
public struct PushToken: Sendable, Hashable, CustomStringConvertible {
    /// Bytes stored inline; longer tokens take one heap array.
    public static let inlineCapacity = 32
    /// The longest token accepted (the event contract allows 1024 hex digits).
    public static let maxBytes = 512

    private enum Storage: Sendable, Hashable {
        /// Byte `i` in `words[i / 8]` at bits `8 * (i % 8)`; bytes past `count` are zero.
        case inline(Inline)
        case heap([UInt8])
    }

    private struct Inline: Sendable, Hashable {
        var w0: UInt64 = 0, w1: UInt64 = 0, w2: UInt64 = 0, w3: UInt64 = 0
        var count: UInt8 = 0

        subscript(index: Int) -> UInt8 {
            get {
                let word = switch index >> 3 { case 0: w0; case 1: w1; case 2: w2; default: w3 }
                return UInt8(truncatingIfNeeded: word >> (UInt64(index & 7) * 8))
            }
            set {
                let bits = UInt64(newValue) << (UInt64(index & 7) * 8)
                switch index >> 3 {
                case 0: w0 |= bits
                case 1: w1 |= bits
                case 2: w2 |= bits
                default: w3 |= bits
                }
            }
        }
    }

    private let storage: Storage

    /// The token with these bytes (1 to `maxBytes` of them).
    public init<Bytes: Collection>(bytes: Bytes) where Bytes.Element == UInt8 {
        precondition(!bytes.isEmpty && bytes.count <= Self.maxBytes, "a push token has 1 to \(Self.maxBytes) bytes")
        if bytes.count <= Self.inlineCapacity {
            var inline = Inline(count: UInt8(bytes.count))
            for (index, byte) in bytes.enumerated() { inline[index] = byte }
            storage = .inline(inline)
        } else {
            storage = .heap(Array(bytes))
        }
    }

    /// Decodes hex text (either case); nil unless it is 2 to `2 * maxBytes` hex digits, an even number.
    public init?<Text: StringProtocol>(hex text: Text) {
        var text = String(text)
        let token = text.withUTF8 { PushToken(hexUTF8: UnsafeBufferPointer(rebasing: $0[...])) }
        guard let token else { return nil }
        self = token
    }

    /// Decodes hex digits given as UTF-8 bytes (the event decoder's path: no String is made).
    public init?(hexUTF8 digits: UnsafeBufferPointer<UInt8>) {
        guard !digits.isEmpty, digits.count % 2 == 0, digits.count <= 2 * Self.maxBytes else { return nil }
        let count = digits.count / 2
        func byte(_ index: Int) -> UInt8? {
            guard let high = Self.hexValue(digits[2 * index]), let low = Self.hexValue(digits[2 * index + 1]) else { return nil }
            return high << 4 | low
        }
        if count <= Self.inlineCapacity {
            var inline = Inline(count: UInt8(count))
            for index in 0..<count {
                guard let value = byte(index) else { return nil }
                inline[index] = value
            }
            storage = .inline(inline)
        } else {
            var bytes = [UInt8]()
            bytes.reserveCapacity(count)
            for index in 0..<count {
                guard let value = byte(index) else { return nil }
                bytes.append(value)
            }
            storage = .heap(bytes)
        }
    }

    /// Number of bytes (the hex text is twice as long).
    public var byteCount: Int {
        switch storage {
        case let .inline(inline): Int(inline.count)
        case let .heap(bytes): bytes.count
        }
    }

    public var bytes: [UInt8] {
        switch storage {
        case let .inline(inline): (0..<Int(inline.count)).map { inline[$0] }
        case let .heap(bytes): bytes
        }
    }

    /// Lowercase hex, two digits a byte: the text of an APNs `/3/device/` path.
    public var hex: String { hexPrefix(byteCount) }

    /// The lowercase hex of the first `byteLimit` bytes (all of them when the token is shorter).
    public func hexPrefix(_ byteLimit: Int) -> String { hexText(prefix: [], byteLimit: byteLimit) }

    /// `prefix` followed by the whole lowercase hex, made as one string (an APNs request path).
    public func hexPath(prefix: [UInt8]) -> String { hexText(prefix: prefix, byteLimit: byteCount) }

    private func hexText(prefix: [UInt8], byteLimit: Int) -> String {
        let count = min(byteLimit, byteCount), start = prefix.count
        return String(unsafeUninitializedCapacity: start + 2 * count) { buffer in
            for index in 0..<start { buffer[index] = prefix[index] }
            switch storage {
            case let .inline(inline):
                for index in 0..<count { Self.writeHex(inline[index], to: buffer, at: start + 2 * index) }
            case let .heap(bytes):
                for index in 0..<count { Self.writeHex(bytes[index], to: buffer, at: start + 2 * index) }
            }
            return start + 2 * count
        }
    }

    /// What logs and debug output may show: the hex as `Redact.token` reduces any token, e.g. `ab12cd34…(64)`.
    public var redacted: String { Redact.token(hex) }

    public var description: String { redacted }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Made for every push's path: computed, not looked up in a global table (a lazy global's access
    /// check and a bounds check for every digit).
    @inline(__always)
    private static func writeHex(_ byte: UInt8, to buffer: UnsafeMutableBufferPointer<UInt8>, at index: Int) {
        buffer[index] = lowercaseDigit(byte >> 4)
        buffer[index + 1] = lowercaseDigit(byte & 0x0f)
    }

    @inline(__always)
    private static func lowercaseDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? nibble &+ UInt8(ascii: "0") : nibble &+ (UInt8(ascii: "a") &- 10)
    }
}
