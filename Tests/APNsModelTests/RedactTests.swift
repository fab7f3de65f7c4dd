import APNsModel
import Testing

@Suite struct RedactTests {
    static let jwt = "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQ0RFMTIzNDUifQ.eyJpc3MiOiJURUFNMTIzNDU2IiwiaWF0IjoxNzcyNzg4MjAwfQ.MEUCIQDx-sig_nature"
    static let token = String(repeating: "ab12cd34", count: 8)

    // MARK: One token

    @Test func neverShowsWholeToken() {
        for length in [0, 1, 2, 7, 8, 9, 16, 17, 32, 64, 100, 160] {
            let token = String((0..<length).map { _ in "0123456789abcdef".randomElement()! })
            let shown = Redact.token(token)
            #expect(shown.hasSuffix("…(\(length))"))
            let prefix = shown.prefix { $0 != "…" }
            #expect(prefix.count <= 8)
            if length > 0 { #expect(prefix.count < length, "token of \(length) shown as \(shown)") }
            #expect(token.hasPrefix(prefix))
        }
        #expect(Redact.token(String(repeating: "f", count: 64)) == "ffffffff…(64)")
    }

    @Test func nonHexShowsNothing() {
        #expect(Redact.token("not-a-token-but-secret") == "…(22)")
    }

    @Test func detectsJWTShapes() {
        #expect(Redact.containsJWT("bearer eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJYIn0.sig_sig-sig"))
        #expect(!Redact.containsJWT("eyJust a sentence. Not a token."))
        #expect(!Redact.containsJWT("evt-01HZX"))
        #expect(!Redact.containsJWT("eyJ..x"), "an empty claims segment is no JWT")
    }

    // MARK: Free text

    @Test func freeTextLosesTokensAndJWTsAndKeepsItsWords() {
        let text = "APNs 400 BadDeviceToken for /3/device/\(Self.token) (authorization: bearer \(Self.jwt)). Next: é ✓"
        #expect(Redact.text(text) == "APNs 400 BadDeviceToken for /3/device/ab12cd34…(64) (authorization: bearer <jwt redacted>). Next: é ✓")
        // Several of each, upper-case hex, a token glued to other characters.
        let many = "a=\(Self.token.uppercased());b=\(Self.jwt);c=x\(Self.token)y;d=\(Self.jwt)"
        #expect(Redact.text(many) == "a=AB12CD34…(64);b=<jwt redacted>;c=xab12cd34…(64)y;d=<jwt redacted>")
    }

    @Test func shortHexAndOrdinaryTextAreKept() {
        let uuid = "apns-id 123e4567-e89b-12d3-a456-426614174000, offset 1234567890123456789"
        #expect(Redact.text(uuid) == uuid)
        #expect(Redact.masked(uuid) == nil)
        let thirtyOne = String(repeating: "a", count: 31)
        #expect(Redact.text(thirtyOne) == thirtyOne)
        #expect(Redact.text(thirtyOne + "b") == "aaaaaaaa…(32)")
        #expect(Redact.text("eyJust a sentence. Not a token.") == "eyJust a sentence. Not a token.")
    }

    @Test func aJWTEndingASentenceKeepsTheFullStop() {
        #expect(Redact.text("minted \(Self.jwt).") == "minted <jwt redacted>.")
        // An unsigned JWT's trailing dot is part of it.
        #expect(Redact.text("eyJhbGciOiJub25lIn0.eyJpc3MiOiJYIn0.") == "<jwt redacted>")
    }

    /// Whatever surrounds them, no whole token or JWT survives, and a token keeps its debugging prefix.
    @Test func noSecretSurvivesInRandomText() {
        var random = SystemRandomNumberGenerator()
        let fillers = ["", " ", "/", "=", "\"", "é", "reason: ", "{\"t\":\"", "g", ".", "-"]
        for _ in 0..<500 {
            let length = [32, 33, 64, 65, 160, 1024].randomElement(using: &random)!
            let token = String((0..<length).map { _ in "0123456789abcdefABCDEF".randomElement(using: &random)! })
            let text = fillers.randomElement(using: &random)! + token + fillers.randomElement(using: &random)! + Self.jwt
                + fillers.randomElement(using: &random)!
            let masked = Redact.text(text)
            #expect(!masked.contains(token) && !masked.contains(Self.jwt) && !masked.contains("eyJpc3Mi"), "\(text) → \(masked)")
            #expect(masked.contains(token.prefix(8) + "…("), "\(masked)")
        }
    }
}
