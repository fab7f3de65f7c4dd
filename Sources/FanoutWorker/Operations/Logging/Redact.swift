/// What may be shown of secrets in logs, errors and debug output.
public enum Redact {
    /// A push token reduced to at most its first 8 hex characters, an ellipsis and its length,
    /// e.g. `ab12cd34…(64)`. Never more than half of the token is shown, so even a short token
    /// is never printed whole; a non-hex value shows no characters at all.
    public static func token(_ token: String) -> String {
        let utf8 = token.utf8
        let isHex = utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) || ($0 >= 65 && $0 <= 70) }
        let shown = isHex ? min(8, utf8.count / 2) : 0
        return String(decoding: utf8.prefix(shown), as: UTF8.self) + "…(\(utf8.count))"
    }

    /// Placeholder for a JWT: a JWT is never logged, not even in part.
    public static let jwtPlaceholder = "<jwt redacted>"

    /// True when `text` contains something shaped like a JWT (`eyJ…` header, three base64url parts).
    public static func containsJWT(_ text: String) -> Bool {
        guard text.utf8.count >= 20 else { return false }
        if let found = text.utf8.withContiguousStorageIfAvailable({ containsJWT(bytes: $0) }) { return found }
        return containsJWT(bytes: Array(text.utf8)[...])
    }

    private static func containsJWT<Bytes: RandomAccessCollection>(bytes: Bytes) -> Bool where Bytes.Element == UInt8, Bytes.Index == Int {
        var index = bytes.startIndex
        while index + 3 <= bytes.endIndex {
            if bytes[index] == UInt8(ascii: "e"), bytes[index + 1] == UInt8(ascii: "y"), bytes[index + 2] == UInt8(ascii: "J") {
                var dots = 0
                var end = index
                while end < bytes.endIndex, isBase64URL(bytes[end]) || bytes[end] == UInt8(ascii: ".") {
                    if bytes[end] == UInt8(ascii: ".") { dots += 1 }
                    end += 1
                }
                if dots >= 2 { return true }
                index = end
            } else {
                index += 1
            }
        }
        return false
    }

    /// True for a run of hex long enough to be a push token (32 hex characters or more).
    static func looksLikeToken(_ text: String) -> Bool {
        let utf8 = text.utf8
        return utf8.count >= 32 && utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) || ($0 >= 65 && $0 <= 70) }
    }

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122) || (byte >= 48 && byte <= 57) || byte == 45 || byte == 95
    }
}
