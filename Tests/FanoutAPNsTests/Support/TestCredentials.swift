import APNsModel
import FanoutAPNs
import FanoutCrypto

enum TestApps {
    static let bundleID = "com.example.fanout"
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let token = String(repeating: "ab", count: 80)
    /// `apns-expiration` of the test pushes (UNIX seconds, after every payload timestamp).
    static let expiration: Int64 = 1_700_003_600

    static func credentials(key: P256PrivateKey) -> [String: APNsCredentials] {
        [bundleID: APNsCredentials(teamID: teamID, keyID: keyID, key: key)]
    }

    static func updatePayload(_ n: Int = 0) -> [UInt8] {
        Array(#"{"aps":{"event":"update","timestamp":\#(1_700_000_000 + n),"content-state":{"n":\#(n)}}}"#.utf8)
    }

    static func push(_ n: Int = 0, token: String = TestApps.token, priority: APNsPriority = .conserve) throws -> APNsRequest {
        try APNsRequest.liveActivity(deviceToken: token, bundleID: bundleID, payload: updatePayload(n), priority: priority,
                                     expiration: expiration)
    }
}
