import Foundation

/// Base64url without padding (RFC 7515 §2), as JWTs use it.
public enum Base64URL {
    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Nil when `text` is not base64url.
    public static func decode<S: StringProtocol>(_ text: S) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        switch base64.count % 4 {
        case 0: break
        case 2: base64 += "=="
        case 3: base64 += "="
        default: return nil
        }
        guard let data = Data(base64Encoded: base64) else { return nil }
        return [UInt8](data)
    }
}

extension Base64URL {
    /// True when `text` is non-empty standard base64 (with '+', '/' and optional '=' padding), as APNs
    /// channel ids are.
    public static func isStandardBase64(_ text: String) -> Bool {
        guard !text.isEmpty else { return false }
        var padding = 0
        for byte in text.utf8 {
            if byte == UInt8(ascii: "=") { padding += 1; continue }
            guard padding == 0 else { return false }
            guard byte.isASCIIAlphanumeric || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/") else { return false }
        }
        return padding <= 2
    }
}
