import APNsModel
import FanoutCrypto
import Foundation

/// A throwaway team, key ID and P-256 key for driving the simulator: configure the simulator with
/// `publicKeyPEM()` under `keyID`, and sign requests with `providerToken(issuedAt:)`.
/// For tests, benchmarks and local runs only; never a real APNs key.
public struct SimulatorCredentials: Sendable {
    public let teamID: String
    public let keyID: String
    public let privateKey: P256PrivateKey

    public init(teamID: String, keyID: String, privateKey: P256PrivateKey) {
        self.teamID = teamID
        self.keyID = keyID
        self.privateKey = privateKey
    }

    public static func generate(teamID: String = "TEAM000001", keyID: String = "KEY0000001") throws -> SimulatorCredentials {
        SimulatorCredentials(teamID: teamID, keyID: keyID, privateKey: try P256PrivateKey.generate())
    }

    public func publicKeyPEM() throws -> String { try privateKey.publicKey().pemSPKI() }

    /// An ES256 JWT `{"alg":"ES256","kid":keyID}.{"iss":teamID,"iat":issuedAt}`.
    public func providerToken(issuedAt: Int) throws -> String {
        let header = Base64URL.encode(Array("{\"alg\":\"ES256\",\"kid\":\"\(keyID)\"}".utf8))
        let claims = Base64URL.encode(Array("{\"iss\":\"\(teamID)\",\"iat\":\(issuedAt)}".utf8))
        let signingInput = header + "." + claims
        return signingInput + "." + Base64URL.encode(try privateKey.sign(signingInput))
    }

    public func providerToken(issuedAt: Date = Date()) throws -> String {
        try providerToken(issuedAt: Int(issuedAt.timeIntervalSince1970))
    }
}
