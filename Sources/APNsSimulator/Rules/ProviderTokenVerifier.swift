import APNsModel
import FanoutCrypto
import Foundation

/// Checks a provider JWT's structure, ES256 signature (by `kid`) and `iss`, as APNs does.
/// Expiry and per-connection rules live in `ProviderTokenGate`.
///
/// Immutable after init; the public keys are safe to verify with from any thread.
final class ProviderTokenVerifier: Sendable {
    struct Verified: Equatable {
        var keyID: String
        var issuedAt: Double
    }

    private let teamID: String
    private let keys: [String: P256PublicKey]

    init(teamID: String, keys: [String: String]) throws {
        self.teamID = teamID
        var parsed: [String: P256PublicKey] = [:]
        for (kid, pem) in keys {
            do {
                parsed[kid] = try P256PublicKey(pem: pem)
            } catch {
                throw APNsSimulatorError.configuration("public key for kid \(kid) is not a P-256 PEM key: \(error)")
            }
        }
        self.keys = parsed
    }

    /// `jwt` is the text after "bearer ".
    func verify(_ jwt: UnsafeBufferPointer<UInt8>) -> Result<Verified, Refusal> {
        let dot = UInt8(ascii: ".")
        guard let firstDot = jwt.firstIndex(of: dot),
              let secondDot = jwt[(firstDot + 1)...].firstIndex(of: dot),
              jwt[(secondDot + 1)...].firstIndex(of: dot) == nil
        else { return .failure(Refusal(.invalidProviderToken, "a JWT has three dot-separated parts")) }
        let headerText = String(decoding: UnsafeBufferPointer(rebasing: jwt[..<firstDot]), as: UTF8.self)
        let claimsText = String(decoding: UnsafeBufferPointer(rebasing: jwt[(firstDot + 1)..<secondDot]), as: UTF8.self)
        let signatureText = String(decoding: UnsafeBufferPointer(rebasing: jwt[(secondDot + 1)...]), as: UTF8.self)
        guard let headerBytes = Base64URL.decode(headerText), let claimsBytes = Base64URL.decode(claimsText),
              let signature = Base64URL.decode(signatureText)
        else { return .failure(Refusal(.invalidProviderToken, "JWT parts are not base64url")) }
        guard let header = try? JSONDecoder().decode(JWTHeader.self, from: Data(headerBytes)) else {
            return .failure(Refusal(.invalidProviderToken, "JWT header must be a JSON object with string alg and kid"))
        }
        guard let claims = try? JSONDecoder().decode(JWTClaims.self, from: Data(claimsBytes)) else {
            return .failure(Refusal(.invalidProviderToken, "JWT claims must be a JSON object with string iss and numeric iat"))
        }
        guard header.alg == "ES256" else { return .failure(Refusal(.invalidProviderToken, "JWT alg must be ES256")) }
        guard let key = keys[header.kid] else { return .failure(Refusal(.invalidProviderToken, "unknown kid")) }
        guard claims.iss == teamID else {
            return .failure(Refusal(.invalidProviderToken, "JWT iss is not the configured team"))
        }
        guard signature.count == 64 else {
            return .failure(Refusal(.invalidProviderToken, "ES256 signature must be 64 bytes (raw r||s)"))
        }
        let signed = UnsafeBufferPointer(rebasing: jwt[..<secondDot])
        guard key.verify(signature: signature, message: UnsafeRawBufferPointer(signed)) else {
            return .failure(Refusal(.invalidProviderToken, "JWT signature does not verify"))
        }
        return .success(Verified(keyID: header.kid, issuedAt: claims.iat))
    }
}

private struct JWTHeader: Decodable {
    var alg: String
    var kid: String
}

private struct JWTClaims: Decodable {
    var iss: String
    var iat: Double
}

/// Configuration or startup failure of the simulator.
public enum APNsSimulatorError: Error, Sendable, CustomStringConvertible, Equatable {
    case configuration(String)
    case socket(String)
    case tls(String)

    public var description: String {
        switch self {
        case .configuration(let text): "APNs simulator configuration: \(text)"
        case .socket(let text): "APNs simulator socket: \(text)"
        case .tls(let text): "APNs simulator TLS: \(text)"
        }
    }
}
