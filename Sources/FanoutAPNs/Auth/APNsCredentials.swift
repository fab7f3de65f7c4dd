import FanoutCrypto

/// Token-auth credentials for one app: the team and the `.p8` key that signs its JWTs.
public struct APNsCredentials: Sendable {
    /// 10-character Apple Developer Team ID (the JWT `iss`).
    public var teamID: String
    /// 10-character Key ID (the JWT header `kid`).
    public var keyID: String
    public var key: P256PrivateKey

    public init(teamID: String, keyID: String, key: P256PrivateKey) {
        self.teamID = teamID
        self.keyID = keyID
        self.key = key
    }

    /// Loads the key from a `.p8` file.
    public init(teamID: String, keyID: String, keyFile: String) throws {
        self.init(teamID: teamID, keyID: keyID, key: try P256PrivateKey(contentsOfFile: keyFile))
    }

    /// Identifies the signing identity: one JWT per (team, key) in the process.
    var identity: ProviderTokenCache.Identity { .init(teamID: teamID, keyID: keyID) }
}
