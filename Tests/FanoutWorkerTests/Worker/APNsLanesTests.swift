import APNsModel
import FanoutAPNs
import FanoutCore
import FanoutCrypto
import Foundation
import Testing
@testable import FanoutWorker

/// Which APNs client (host) a send goes to. Nothing connects here: clients connect on first use.
@Suite struct APNsLanesTests {
    func lanes(environment: String, baseURL: String? = nil) throws -> APNsLanes {
        let fixture = try ConfigFixture()
        let key = try P256PrivateKey.generate()
        var json = #"{"apps": [{"bundle_id": "com.example.exports", "team_id": "TEAM123456", "key_id": "ABCDE12345", "key_path": "\#(fixture.keyPath)", "environment": "\#(environment)"}]"#
        if let baseURL { json += #", "apns": {"base_url": "\#(baseURL)"}"# }
        let configuration = try FanoutConfiguration.load(path: try fixture.write(json + "}"), environment: [:])
        let settings = WorkerSettings(configuration: configuration, options: WorkerOptions())
        return try APNsLanes(settings: settings, credentials: ["com.example.exports": APNsCredentials(teamID: "TEAM123456", keyID: "ABCDE12345", key: key)],
                             tokenCache: ProviderTokenCache(refreshInterval: .seconds(3000)), options: WorkerOptions())
    }

    func endpoint(_ client: APNsClient?) -> APNsClientConfiguration.Endpoint? { client?.configuration.endpoint }

    /// A token registered as sandbox (a development build) goes to the sandbox host even when the app
    /// is configured for production, and the other way round: sent to the other environment, Apple
    /// answers BadDeviceToken and Fanout would drop a good token.
    @Test func aTokenGoesToTheEnvironmentItWasRegisteredFor() async throws {
        for (app, other) in [("production", APNsEnvironment.sandbox), ("sandbox", APNsEnvironment.production)] {
            let lanes = try lanes(environment: app)
            let appEnvironment: APNsEnvironment = app == "sandbox" ? .sandbox : .production
            #expect(endpoint(lanes.client(lane: .activity, app: "com.example.exports", environment: other)) == .apple(other))
            #expect(endpoint(lanes.client(lane: .activity, app: "com.example.exports", environment: appEnvironment)) == .apple(appEnvironment))
            // No environment on the registration: the app's.
            #expect(endpoint(lanes.client(lane: .activity, app: "com.example.exports", environment: nil)) == .apple(appEnvironment))
            // Broadcasts have no token: always the app's environment.
            #expect(endpoint(lanes.client(lane: .broadcast, app: "com.example.exports", environment: nil)) == .apple(appEnvironment))
            await lanes.shutdown(deadline: .now + .seconds(5))
        }
    }

    /// Apps signed by different keys never share a connection (APNs: 403 UnrelatedKeyIdInToken);
    /// apps of one key do.
    @Test func eachSigningKeyHasItsOwnClients() async throws {
        let fixture = try ConfigFixture()
        let apps = [("com.example.a", "KEYAAAAAAA"), ("com.example.b", "KEYBBBBBBB"), ("com.example.c", "KEYAAAAAAA")]
        let list = apps.map { #"{"bundle_id": "\#($0.0)", "team_id": "TEAM123456", "key_id": "\#($0.1)", "key_path": "\#(fixture.keyPath)"}"# }
        let json = #"{"apps": ["# + list.joined(separator: ",") + #"], "apns": {"base_url": "https://127.0.0.1:9443"}}"#
        let configuration = try FanoutConfiguration.load(path: try fixture.write(json), environment: [:])
        var credentials: [String: APNsCredentials] = [:]
        for (app, keyID) in apps { credentials[app] = APNsCredentials(teamID: "TEAM123456", keyID: keyID, key: try P256PrivateKey.generate()) }
        let lanes = try APNsLanes(settings: WorkerSettings(configuration: configuration, options: WorkerOptions()), credentials: credentials,
                                  tokenCache: ProviderTokenCache(refreshInterval: .seconds(3000)), options: WorkerOptions())
        for lane in Lane.allCases {
            let a = try #require(lanes.client(lane: lane, app: "com.example.a", environment: nil))
            let b = try #require(lanes.client(lane: lane, app: "com.example.b", environment: nil))
            let c = try #require(lanes.client(lane: lane, app: "com.example.c", environment: nil))
            #expect(a !== b && a === c)
            #expect(Set(a.configuration.credentials.keys) == ["com.example.a", "com.example.c"])
            #expect(Set(b.configuration.credentials.keys) == ["com.example.b"])
        }
        #expect(lanes.client(lane: .activity, app: "com.example.unknown", environment: nil) == nil)
        await lanes.shutdown(deadline: .now + .seconds(5))
    }

    @Test func aClientRefusesCredentialsOfSeveralKeys() throws {
        let credentials = ["com.example.a": APNsCredentials(teamID: "TEAM123456", keyID: "KEYAAAAAAA", key: try P256PrivateKey.generate()),
                           "com.example.b": APNsCredentials(teamID: "TEAM123456", keyID: "KEYBBBBBBB", key: try P256PrivateKey.generate())]
        #expect(throws: APNsClientError.self) {
            _ = try APNsClient(configuration: APNsClientConfiguration(endpoint: .apple(.production), credentials: credentials))
        }
    }

    @Test func aCustomBaseURLServesEveryEnvironment() async throws {
        let lanes = try lanes(environment: "production", baseURL: "https://127.0.0.1:9443")
        let sandbox = try #require(lanes.client(lane: .activity, app: "com.example.exports", environment: .sandbox))
        let production = try #require(lanes.client(lane: .activity, app: "com.example.exports", environment: .production))
        #expect(sandbox === production)
        await lanes.shutdown(deadline: .now + .seconds(5))
    }
}
