/// A short response header value (`apns-id`, `apns-unique-id`, `apns-request-id`: 36-character
/// UUIDs) kept in place, so reading a response allocates nothing for them; the `String` is made only
/// when somebody reads it. Longer values are kept as a `String`.
public struct HeaderText: Sendable, Hashable, CustomStringConvertible {
    static let inlineCapacity = 40

    private enum Storage: Sendable, Hashable {
        case inline(Inline)
        case text(String)
    }

    private struct Inline: Sendable, Hashable {
        var bytes: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
        var count: UInt8 = 0

        static func == (a: Inline, b: Inline) -> Bool {
            a.count == b.count && a.bytes.0 == b.bytes.0 && a.bytes.1 == b.bytes.1 && a.bytes.2 == b.bytes.2
                && a.bytes.3 == b.bytes.3 && a.bytes.4 == b.bytes.4
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(count)
            hasher.combine(bytes.0); hasher.combine(bytes.1); hasher.combine(bytes.2); hasher.combine(bytes.3); hasher.combine(bytes.4)
        }
    }

    private let storage: Storage

    /// The value's bytes as they came (UTF-8; invalid sequences are repaired when read as a `String`).
    public init(_ value: UnsafeBufferPointer<UInt8>) {
        guard value.count <= Self.inlineCapacity else {
            storage = .text(String(decoding: value, as: UTF8.self))
            return
        }
        var inline = Inline()
        inline.count = UInt8(value.count)
        withUnsafeMutableBytes(of: &inline.bytes) { raw in
            for index in 0..<value.count { raw[index] = value[index] }
        }
        storage = .inline(inline)
    }

    public init(_ value: String) {
        var value = value
        self = value.withUTF8 { HeaderText($0) }
    }

    public var description: String {
        switch storage {
        case .text(let text):
            return text
        case .inline(var inline):
            return withUnsafeBytes(of: &inline.bytes) { raw in
                String(decoding: UnsafeRawBufferPointer(rebasing: raw[0..<Int(inline.count)]), as: UTF8.self)
            }
        }
    }
}
