import Foundation
import APNsModel
import FanoutCrypto

/// Builds APNs provider tokens: `{"alg":"ES256","kid":…}.{"iss":…,"iat":…}` signed with raw r‖s.
public enum APNsJWT {
    public static func make(teamID: String, keyID: String, issuedAt: Int64, key: P256PrivateKey) throws -> String {
        var header = #"{"alg":"ES256","kid":"#
        JSONString.append(keyID, to: &header)
        header += "}"
        var claims = #"{"iss":"#
        JSONString.append(teamID, to: &claims)
        claims += #","iat":"# + String(issuedAt) + "}"
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try key.sign(signingInput)
        return signingInput + "." + Base64URL.encode(signature)
    }
}
