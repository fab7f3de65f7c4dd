import Foundation
import Testing
@testable import FanoutCrypto

/// RFC 6979 Appendix A.2.5 (ECDSA, 256 bits, prime field: P-256), SHA-256 cases. Every signature is
/// also checked with OpenSSL's ordinary verifier (EVP_DigestVerify), so a mistyped vector cannot
/// make a wrong implementation pass, and the key is checked against the RFC's public key U.
enum RFC6979Vectors {
    static let privateKey = "C9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721"
    static let publicX = "60FED4BA255A9D31C961EB74C6356D68C049B8923B61FA6CE669622E60F29FB6"
    static let publicY = "7903FE1008B8BC99A41AE9E95628BC64F2F1B20C2D7E9F5177A3C294D4462299"
    static let order = "FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551"

    struct Case: Sendable, CustomTestStringConvertible {
        var message: String
        var k: String
        var r: String
        var s: String
        var testDescription: String { "message \"\(message)\"" }
    }

    static let sha256: [Case] = [
        Case(message: "sample",
             k: "A6E3C57DD01ABE90086538398355DD4C3B17AA873382B0F24D6129493D8AAD60",
             r: "EFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716",
             s: "F7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8"),
        Case(message: "test",
             k: "D16B6AE827F17175E040871A1C7EC3500192C4C92677336EC2537ACAEE0008E0",
             r: "F1ABB023518351CD71D881567B1EA663ED3EFCF6C5132B354F28D3B0B7D38367",
             s: "019F4113742A2B14BD25926B49C649155F267E60D3814B4C0CC84250E46F0083"),
    ]

    /// The RFC's key as SEC1 `EC PRIVATE KEY` PEM: SEQUENCE { version 1, OCTET STRING x,
    /// [0] prime256v1 }, without the public key, which OpenSSL derives on load.
    static var privateKeyPEM: String {
        let der = hexBytes("30310201010420" + privateKey + "A00A06082A8648CE3D030107")
        return "-----BEGIN EC PRIVATE KEY-----\n" + Data(der).base64EncodedString() + "\n-----END EC PRIVATE KEY-----\n"
    }
}


@Suite struct DeterministicECDSATests {
    let key: P256PrivateKey
    let publicKey: P256PublicKey

    init() throws {
        key = try P256PrivateKey(pem: RFC6979Vectors.privateKeyPEM)
        publicKey = try key.publicKey()
    }

    @Test func theKeyIsTheRFCKey() throws {
        // SubjectPublicKeyInfo DER ends with the uncompressed point 04 ‖ Ux ‖ Uy.
        let pem = try publicKey.pemSPKI()
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let der = [UInt8](try #require(Data(base64Encoded: body)))
        #expect(Array(der.suffix(65)) == [0x04] + hexBytes(RFC6979Vectors.publicX) + hexBytes(RFC6979Vectors.publicY))
    }

    @Test(arguments: RFC6979Vectors.sha256) func nonceIsAppendixA25(vector: RFC6979Vectors.Case) throws {
        let digest = try Array(vector.message.utf8).withUnsafeBytes { try DeterministicECDSA.sha256($0) }
        var nonces = try RFC6979Nonce(privateKey: hexBytes(RFC6979Vectors.privateKey), digest: digest, order: hexBytes(RFC6979Vectors.order))
        #expect(try nonces.next() == hexBytes(vector.k))
    }

    @Test(arguments: RFC6979Vectors.sha256) func signatureIsAppendixA25AndVerifies(vector: RFC6979Vectors.Case) throws {
        let signature = try key.sign(vector.message)
        #expect(signature == hexBytes(vector.r) + hexBytes(vector.s))
        #expect(publicKey.verify(signature: signature, message: vector.message), "OpenSSL's EVP_DigestVerify accepts it")
        #expect(!publicKey.verify(signature: signature, message: vector.message + "!"))
        var flipped = signature
        flipped[63] ^= 0x01
        #expect(!publicKey.verify(signature: flipped, message: vector.message))
    }

    /// Step h's continuation (a rejected k) gives a different, still valid candidate.
    @Test func laterCandidatesDifferAndStayBelowTheOrder() throws {
        let digest = try Array("sample".utf8).withUnsafeBytes { try DeterministicECDSA.sha256($0) }
        var nonces = try RFC6979Nonce(privateKey: hexBytes(RFC6979Vectors.privateKey), digest: digest, order: hexBytes(RFC6979Vectors.order))
        let candidates = try (0..<4).map { _ in try nonces.next() }
        #expect(Set(candidates).count == 4)
        for candidate in candidates { #expect(RFC6979Nonce.isBelow(candidate, hexBytes(RFC6979Vectors.order))) }
    }

    @Test func constantTimeComparisonOrdersBigEndianNumbers() {
        let order = hexBytes(RFC6979Vectors.order)
        var below = order
        below[31] -= 1
        var above = order
        above[0] = 0xFF; above[1] = 0xFF; above[2] = 0xFF; above[3] = 0xFF; above[4] = 0x01
        #expect(RFC6979Nonce.isBelow(below, order))
        #expect(!RFC6979Nonce.isBelow(order, order))
        #expect(!RFC6979Nonce.isBelow(above, order))
        #expect(RFC6979Nonce.isBelow([UInt8](repeating: 0, count: 32), order))
    }

    /// Random keys and messages: each signature verifies with OpenSSL, and signing is a function
    /// of (key, message) only; r or s with leading zero bytes are padded to 32 bytes each.
    @Test func signaturesOfRandomKeysAreDeterministicAndVerify() throws {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<64 {
            let key = try P256PrivateKey.generate()
            let publicKey = try key.publicKey()
            let message = (0..<(round * 7 % 200)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let signature = try key.sign(message)
            #expect(signature.count == 64)
            #expect(publicKey.verify(signature: signature, message: message), "round \(round)")
            #expect(try key.sign(message) == signature, "round \(round)")
            #expect(try key.sign(message + [0]) != signature, "round \(round)")
            // A key loaded again from its PEM (another process, another replica) signs identically.
            #expect(try P256PrivateKey(pem: key.pemPKCS8()).sign(message) == signature, "round \(round)")
        }
    }

    @Test func concurrentSigningWithOneKeyAgrees() async throws {
        let key = self.key
        let signatures = try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<16 { group.addTask { try key.sign("sample") } }
            return try await group.reduce(into: Set<[UInt8]>()) { $0.insert($1) }
        }
        #expect(signatures == [hexBytes(RFC6979Vectors.sha256[0].r) + hexBytes(RFC6979Vectors.sha256[0].s)])
    }
}
