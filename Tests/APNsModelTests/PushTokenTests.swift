import Testing
import APNsModel

/// Tokens are held as bytes and turned back into hex only for the request path: the path must be the
/// registered text, lowercased, for every token size (inline and heap storage).
@Suite struct PushTokenTests {
    let body = Array(#"{"aps":{"event":"update","timestamp":1,"content-state":{}}}"#.utf8)

    @Test(arguments: [1, 8, 31, 32, 33, 54, 80, 100, 512])
    func hexRoundTripsToTheSameDevicePath(byteCount: Int) throws {
        let hex = (0..<byteCount).map { index in
            let byte = UInt8(truncatingIfNeeded: index &* 37 &+ 11)
            return String(byte >> 4, radix: 16) + String(byte & 0x0f, radix: 16)
        }.joined()
        let token = try #require(PushToken(hex: hex))
        #expect(token.byteCount == byteCount)
        #expect(token.hex == hex)
        #expect(PushToken(hex: hex.uppercased()) == token, "either case decodes to the same bytes")
        #expect(PushToken(bytes: token.bytes) == token && PushToken(bytes: token.bytes).hashValue == token.hashValue)
        let request = try APNsRequest.liveActivity(deviceToken: token.hex, bundleID: "com.example.app", payload: body, priority: .conserve,
                                                   expiration: 0)
        #expect(request.http.path == "/3/device/" + hex)
        // The worker's form: the path written straight from the bytes, the request otherwise the same.
        let fromBytes = try APNsRequest.liveActivity(token: token, bundleID: "com.example.app", payload: body, priority: .conserve,
                                                     expiration: 0)
        #expect(fromBytes == request)
        #expect(token.hexPath(prefix: Array("/x/".utf8)) == "/x/" + hex)
        #expect(token.hexPrefix(4) == String(hex.prefix(8)))
    }

    @Test func uppercaseHexComesOutLowercase() throws {
        let token = try #require(PushToken(hex: "AB12CDef"))
        #expect(token.hex == "ab12cdef")
        #expect(token.bytes == [0xab, 0x12, 0xcd, 0xef])
    }

    @Test(arguments: ["", "a", "abc", "zz", "ab cd", "0x12", String(repeating: "ab", count: 513)])
    func rejectsWhatIsNotEvenLengthHex(text: String) {
        #expect(PushToken(hex: text) == nil)
    }

    @Test func tokensDifferingInOneByteOrInLengthDiffer() throws {
        let base = String(repeating: "a1", count: 32)
        let a = try #require(PushToken(hex: base))
        #expect(a != PushToken(hex: String(base.dropLast(2)) + "a2"))
        #expect(a != PushToken(hex: base + "00"), "a longer token with the same prefix")
        #expect(PushToken(hex: "00") != PushToken(hex: "0000"), "zero bytes still count")
    }

    @Test func descriptionNeverShowsTheWholeToken() throws {
        let long = try #require(PushToken(hex: String(repeating: "5e", count: 32)))
        #expect(long.description == "5e5e5e5e…(64)")
        #expect("\(long)" == long.redacted)
        let short = try #require(PushToken(hex: "abcd"))
        #expect(short.redacted == "ab…(4)")
        #expect(try #require(PushToken(hex: "ab")).redacted == "a…(2)")
        // One format: a token held as bytes shows what the same token as text would.
        for hex in ["ab", "abcdef", String(repeating: "0f", count: 32), String(repeating: "a1", count: 80)] {
            #expect(try #require(PushToken(hex: hex)).redacted == Redact.token(hex))
        }
    }
}
