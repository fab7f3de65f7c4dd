import Foundation
import APNsModel
import FanoutCrypto

/// Builds APNs provider tokens: `{"alg":"ES256","kid":…}.{"iss":…,"iat":…}` signed with raw r‖s.
///
/// The token is a pure function of (team, key ID, key, `iat`), so that every replica that signs the
/// same window's token presents the same bytes: header and claims are written in this fixed key
/// order without whitespace (`{"alg":"ES256","kid":"<kid>"}`, `{"iss":"<team>","iat":<seconds>}`,
/// strings escaped by `JSONString`), base64url without padding, and the signature is RFC 6979
/// deterministic (`P256PrivateKey.sign`).
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
