import Foundation
import APNsModel
import FanoutCrypto

/// Builds APNs provider tokens: `{"alg":"ES256","kid":…}.{"iss":…,"iat":…}` signed with raw r‖s.
public enum APNsJWT {
    public static func make(teamID: String, keyID: String, issuedAt: Int64, key: P256PrivateKey) throws -> String {
        let header = #"{"alg":"ES256","kid":""# + jsonEscaped(keyID) + #""}"#
        let claims = #"{"iss":""# + jsonEscaped(teamID) + #"","iat":"# + String(issuedAt) + "}"
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try key.sign(signingInput)
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Team and key ids are short ASCII ids; escape anyway so a bad config cannot break the JSON.
    private static func jsonEscaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
