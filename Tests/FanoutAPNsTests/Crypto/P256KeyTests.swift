import Foundation
import Testing
@testable import FanoutCrypto

/// Fixed keys made with the openssl CLI, so loading and signature conversion are checked against
/// an independent implementation rather than only against ourselves.
enum KeyFixtures {
    static let p256 = """
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg7Xy/FEZPZZ13FwVu
fgj+iiA/nmQr9DpQrLgoyzgwnSShRANCAARL05T8NwD0VhYE3Rxygx9PFvbWI0JP
DaPVLc/bMaTR12E2PmZRtij7sMREj463Vtk9QmsS/jQ7T0ggMHUJKw1l
-----END PRIVATE KEY-----
"""
    static let p256Public = """
-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAES9OU/DcA9FYWBN0ccoMfTxb21iNC
Tw2j1S3P2zGk0ddhNj5mUbYo+7DERI+Ot1bZPUJrEv40O09IIDB1CSsNZQ==
-----END PUBLIC KEY-----
"""
    static let rsa = """
-----BEGIN PRIVATE KEY-----
MIICeAIBADANBgkqhkiG9w0BAQEFAASCAmIwggJeAgEAAoGBAPlbOsq81qsuh16S
2lvnQpvbo6A2MWxv9XJ3RN8v/AIMmt7WWBHrHSHdBlFT6eRzsJjEnq7vBGWMLbyE
DudQfhNvOmbUgRbVP0NVtbQ+2GL1x6ekJ4Uw3sRPz3X04ZtmW3HluqO6lPcRdSAU
n7hapw9D63japjvaBcrqwrWg+Gl3AgMBAAECgYEAne4uGmHoBJt/mWKhcjvScCx4
QeyQ+QEgD9OCh2k4z4N0Q1a2iQLEfMIkUjY3mT28x8UgS+OOgVJ7VT6+wbq1XhGw
rgZ3GBCen13KT4C8EIbfXygmvTQ7yvJhnxQDkoLsCvrW36MdhLdTZQe8pcNWlc4C
Exy8OSQhVN7h2KFVn2ECQQD/NQiNZ7LHyVJQ0zkE8FLODzJTXV7+0Daz0jAl3ugA
OH2RUjTAD0oDWJA/nGQ6zg/4/TC6vUewxmqxZdgX0nBzAkEA+iGLCMaoKwX9RwoE
8JC/lvU7hFA/JKeo7iMCOkJVanAiix1MWrpSnCLAdj7SwVwPxMBwJYnwL+Soh8WR
T4e17QJBAJRMegrJno8QAuBqzXB8QnHxTLo6wM/rqE34LvhivogaS4Vdsr+EYurs
1O3R8EBnq8pxPpbVFMq5khhB6T92jtcCQQC2HV4BUcJ3MLEr29uk237jBkIDH/oZ
Ugjo+YxRpqJSELrV1ssU87vZ+mNutGb2aXUBp6r/aeL6u90InYwi/4gxAkB1VPkk
PRpYjkvf9XqujvE/0a003dkz5XmO3ZJwEzO6JulHpmpKBIBzjR9s1yD+T5/kzicw
W/jzpGhh7Vc12GiO
-----END PRIVATE KEY-----
"""
    static let p384 = """
-----BEGIN PRIVATE KEY-----
MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDAeYlSVnUS+ADUz0SUC
ub3Acr63E78v7aOG+xfIv4j09mJJ+C+fDrz83cxgwGqNmm+hZANiAAQQIgLpURxL
FNja4vp1qWB0fOWm6IxVfcNnrfu4+DfJ8NwifVLqIzkpPoDMPK9P9cdoSurru2kX
68x9k7i7SjvZpWWaVvFXKsDWEuRPerI6Zgw7MGAF7ic9sJG846/JNfs=
-----END PRIVATE KEY-----
"""
    /// `openssl dgst -sha256 -sign p256` over `message`, DER-encoded.
    static let opensslSignatureDER = "3044022057e02632ace8e412e3836dbeb389f3ee8e6497fff90f2c5f5e52b86a59f97d96022022e6c037e4f665efe74f5e3b69005a8ceb872d86c00327cf7a0a6e7041d76df5"
    static let message = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJURUFNIn0"
}


@Suite struct P256KeyTests {
    @Test func loadsAppleStyleP8AndSignsVerifiably() throws {
        let key = try P256PrivateKey(pem: KeyFixtures.p256)
        let signature = try key.sign(KeyFixtures.message)
        #expect(signature.count == 64)
        let publicKey = try P256PublicKey(pem: KeyFixtures.p256Public)
        #expect(publicKey.verify(signature: signature, message: KeyFixtures.message))
        #expect(!publicKey.verify(signature: signature, message: KeyFixtures.message + "x"))
        var tampered = signature
        tampered[10] ^= 0x01
        #expect(!publicKey.verify(signature: tampered, message: KeyFixtures.message))
        #expect(!publicKey.verify(signature: Array(signature.prefix(63)), message: KeyFixtures.message))
    }

    @Test func verifiesAnOpenSSLCLISignatureAfterDERToRawConversion() throws {
        let raw = try ES256Signature.raw(fromDER: hexBytes(KeyFixtures.opensslSignatureDER))
        #expect(raw.count == 64)
        let publicKey = try P256PublicKey(pem: KeyFixtures.p256Public)
        #expect(publicKey.verify(signature: raw, message: KeyFixtures.message))
        // And back: raw → DER reproduces OpenSSL's encoding byte for byte.
        #expect(try ES256Signature.der(fromRaw: raw) == hexBytes(KeyFixtures.opensslSignatureDER))
    }

    @Test func generatedKeyRoundTripsThroughPEM() throws {
        let key = try P256PrivateKey.generate()
        let pem = try key.pemPKCS8()
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let reloaded = try P256PrivateKey(pem: pem)
        let publicPEM = try key.publicKey().pemSPKI()
        #expect(publicPEM.hasPrefix("-----BEGIN PUBLIC KEY-----"))
        #expect(try reloaded.publicKey().pemSPKI() == publicPEM)
        let publicKey = try P256PublicKey(pem: publicPEM)
        #expect(publicKey.verify(signature: try reloaded.sign("hello"), message: "hello"))
        let other = try P256PrivateKey.generate().publicKey()
        #expect(!other.verify(signature: try key.sign("hello"), message: "hello"))
    }

    @Test func rejectsRSAKey() {
        #expect(throws: P256KeyError.notEllipticCurve(keyType: "rsaEncryption")) { try P256PrivateKey(pem: KeyFixtures.rsa) }
    }

    @Test func rejectsWrongCurve() {
        #expect(throws: P256KeyError.wrongCurve(curve: "secp384r1")) { try P256PrivateKey(pem: KeyFixtures.p384) }
    }

    @Test func rejectsGarbage() {
        #expect(throws: P256KeyError.self) { try P256PrivateKey(pem: "hello") }
        do {
            _ = try P256PrivateKey(pem: "-----BEGIN PRIVATE KEY-----\nnotbase64!!\n-----END PRIVATE KEY-----\n")
            Issue.record("garbage PEM loaded")
        } catch let error as P256KeyError {
            guard case .notPEM = error else { Issue.record("expected notPEM, got \(error)"); return }
        } catch { Issue.record("unexpected \(error)") }
        // A public key is not a private key.
        #expect(throws: P256KeyError.self) { try P256PrivateKey(pem: KeyFixtures.p256Public) }
    }

    @Test func missingFileSaysSo() {
        do {
            _ = try P256PrivateKey(contentsOfFile: "/nonexistent/AuthKey_ABC.p8")
            Issue.record("loaded a missing file")
        } catch let error as P256KeyError {
            guard case .unreadableFile(let path, _) = error else { Issue.record("expected unreadableFile, got \(error)"); return }
            #expect(path == "/nonexistent/AuthKey_ABC.p8")
            #expect(error.description.contains("/nonexistent/AuthKey_ABC.p8"))
        } catch { Issue.record("unexpected \(error)") }
    }

    @Test func loadsFromFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-test-\(UUID().uuidString).p8").path
        try KeyFixtures.p256.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let key = try P256PrivateKey(contentsOfFile: path)
        #expect(try key.publicKey().pemSPKI() == KeyFixtures.p256Public + "\n")
    }
}
