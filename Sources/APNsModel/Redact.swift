/// What may be shown of APNs secrets (push tokens, provider tokens) wherever text leaves the process:
/// logs, metric labels, `/debug` and `/readyz` output, dead-letter headers. One format for a token
/// everywhere (`token`, also `PushToken.redacted`), and one pass for free text (`text`) that finds
/// them inside whatever a server, librdkafka or a producer's event put there.
public enum Redact {
    /// A push token reduced to at most its first 8 hex characters, an ellipsis and its length,
    /// e.g. `ab12cd34…(64)`. Never more than half of the token is shown, so even a short token
    /// is never printed whole; a non-hex value shows no characters at all.
    public static func token(_ token: String) -> String {
        let utf8 = token.utf8
        let shown = utf8.allSatisfy(isHexDigit) ? min(8, utf8.count / 2) : 0
        return String(decoding: utf8.prefix(shown), as: UTF8.self) + "…(\(utf8.count))"
    }

    /// Placeholder for a JWT: a JWT is never shown, not even in part.
    public static let jwtPlaceholder = "<jwt redacted>"

    /// The shortest hex run taken for a push token (tokens are 64 hex digits and more; 32 leaves room).
    public static let tokenRunLength = 32

    /// `text` with every JWT-shaped part (three or more base64url segments joined by dots, the first
    /// starting `eyJ`, as a JWT's `{"` header does) replaced by `jwtPlaceholder`, and then every run
    /// of `tokenRunLength` or more hex digits reduced as `token` reduces a push token. Everything else
    /// is kept, so the text still says what happened. Text with neither comes back as it was, without
    /// copying.
    public static func text(_ text: String) -> String { masked(text) ?? text }

    /// `text(_:)`, or nil when `text` holds nothing to mask (for callers that keep the original then).
    public static func masked(_ text: String) -> String? {
        var scanned = text
        let masked: [UInt8]? = scanned.withUTF8 { bytes in
            guard let jwtFree = maskingJWTs(bytes) else { return maskingTokenRuns(bytes) }
            return jwtFree.withUnsafeBufferPointer { maskingTokenRuns($0) } ?? jwtFree
        }
        return masked.map { String(decoding: $0, as: UTF8.self) }
    }

    /// True when `text` contains something JWT-shaped (see `text`).
    public static func containsJWT(_ text: String) -> Bool {
        var scanned = text
        return scanned.withUTF8 { nextJWT(in: $0, from: 0) != nil }
    }

    // MARK: Scanning (UTF-8 bytes: every byte looked for is ASCII, so multi-byte characters pass through)

    /// The bytes with JWT-shaped spans replaced; nil when there are none.
    private static func maskingJWTs(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var out: [UInt8]?
        var copied = 0
        var position = 0
        while let span = nextJWT(in: bytes, from: position) {
            if out == nil { out = []; out!.reserveCapacity(bytes.count) }
            out!.append(contentsOf: bytes[copied..<span.lowerBound])
            out!.append(contentsOf: jwtPlaceholder.utf8)
            copied = span.upperBound
            position = span.upperBound
        }
        out?.append(contentsOf: bytes[copied...])
        return out
    }

    /// The first JWT-shaped span at or after `start`: from an `eyJ` over base64url characters and dots,
    /// holding at least two dots with a non-empty segment between the first two; trailing dots beyond
    /// the second are left out (a sentence's full stop).
    private static func nextJWT(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Range<Int>? {
        var index = start
        while index + 2 < bytes.count {
            guard bytes[index] == UInt8(ascii: "e"), bytes[index + 1] == UInt8(ascii: "y"), bytes[index + 2] == UInt8(ascii: "J") else {
                index += 1
                continue
            }
            var end = index
            var dots: [Int] = []
            while end < bytes.count, isBase64URL(bytes[end]) || bytes[end] == UInt8(ascii: ".") {
                if bytes[end] == UInt8(ascii: ".") { dots.append(end) }
                end += 1
            }
            if dots.count >= 2, dots[1] > dots[0] + 1 {
                while dots.count > 2, dots.last == end - 1 {
                    dots.removeLast()
                    end -= 1
                }
                return index..<end
            }
            index = end
        }
        return nil
    }

    /// The bytes with every run of `tokenRunLength`+ hex digits reduced by `token`; nil when there are none.
    private static func maskingTokenRuns(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var out: [UInt8]?
        var copied = 0
        var index = 0
        while index < bytes.count {
            guard isHexDigit(bytes[index]) else { index += 1; continue }
            let start = index
            while index < bytes.count, isHexDigit(bytes[index]) { index += 1 }
            guard index - start >= tokenRunLength else { continue }
            if out == nil { out = []; out!.reserveCapacity(bytes.count) }
            out!.append(contentsOf: bytes[copied..<start])
            out!.append(contentsOf: token(String(decoding: bytes[start..<index], as: UTF8.self)).utf8)
            copied = index
        }
        out?.append(contentsOf: bytes[copied...])
        return out
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= 48 && byte <= 57) || (byte >= 97 && byte <= 102) || (byte >= 65 && byte <= 70)
    }

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122) || (byte >= 48 && byte <= 57) || byte == 45 || byte == 95
    }
}
