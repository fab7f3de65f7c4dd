import APNsModel
import APNsSimulator
import Foundation
import Testing
@testable import FanoutAPNs
import FanoutCrypto

/// TLS is always verified, peer and host name, on both transports; Apple's hosts are trusted through
/// the system's CAs only: no configuration lets a custom CA stand in for them.
@Suite struct TLSVerificationTests {
    static let appleBaseURLs = ["https://api.push.apple.com", "https://api.sandbox.push.apple.com:2197",
                                "https://api.development.push.apple.com", "https://API.Push.Apple.COM.:443",
                                "https://api-manage-broadcast.push.apple.com:2196", "https://api.push.apple.com/prefix"]

    @Test(arguments: APNsClientConfiguration.Transport.allCases)
    func aCustomCAIsRefusedForApplesHosts(transport: APNsClientConfiguration.Transport) throws {
        let credentials = TestApps.credentials(key: try P256PrivateKey.generate())
        for url in Self.appleBaseURLs {
            let configuration = APNsClientConfiguration(endpoint: .custom(baseURL: url, caFile: "/etc/hostname"), credentials: credentials,
                                                        tokenCache: ProviderTokenCache(), transport: transport)
            let error = #expect(throws: APNsClientError.self, "\(url)") { try APNsClient(configuration: configuration) }
            guard case .badConfiguration(let text) = error else { Issue.record("\(url): \(String(describing: error))"); continue }
            #expect(text.contains("system's CAs"), "\(text)")
            // Without the CA file the same URL is Apple's host verified as usual.
            let plain = APNsClientConfiguration(endpoint: .custom(baseURL: url, caFile: nil), credentials: credentials,
                                                tokenCache: ProviderTokenCache(), transport: transport)
            #expect(throws: Never.self, "\(url)") { try plain.validate() }
        }
        // A name that only contains Apple's is not Apple's: a custom endpoint like the simulator's.
        for url in ["https://push.apple.com.example.net", "https://127.0.0.1:8443", "https://apple.com.push.example"] {
            let custom = APNsClientConfiguration(endpoint: .custom(baseURL: url, caFile: "/etc/hostname"), credentials: credentials,
                                                 tokenCache: ProviderTokenCache(), transport: transport)
            #expect(throws: Never.self, "\(url)") { try custom.validate() }
        }
    }

    @Test func applesEndpointsTrustNothingButTheSystemCAs() {
        for environment in APNsEnvironment.allCases {
            for endpoint in [APNsClientConfiguration.Endpoint.apple(environment), .appleChannelManagement(environment)] {
                let configuration = APNsClientConfiguration(endpoint: endpoint, credentials: [:])
                #expect(configuration.caFile == nil, "\(endpoint)")
                #expect(APNsEnvironment.isAppleHost(environment.pushHost) && APNsEnvironment.isAppleHost(environment.channelManagementHost))
            }
        }
    }

    /// The simulator listens on every IPv4 address; its certificate names localhost, 127.0.0.1 and ::1.
    @Test(arguments: APNsClientConfiguration.Transport.allCases)
    func peerAndHostNameAreVerified(transport: APNsClientConfiguration.Transport) async throws {
        let key = try P256PrivateKey.generate()
        let simulator = try APNsSimulator.startedOnEveryAddress(key: key)
        defer { simulator.stop() }
        let otherCA = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-otherca-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: otherCA, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: otherCA) }
        let untrusted = try CertificateAuthority.generateLoopbackServerFiles(in: otherCA).caCertificatePath
        func send(host: String, caFile: String?) async throws -> APNsResult {
            let client = try APNsClient(configuration: APNsClientConfiguration(
                endpoint: .custom(baseURL: "https://\(host):\(simulator.port)", caFile: caFile),
                credentials: TestApps.credentials(key: key), connections: 1, tokenCache: ProviderTokenCache(), transport: transport))
            let result = await client.send(try TestApps.push())
            await client.shutdown(deadline: .now + .seconds(5))
            return result
        }
        #expect(try await send(host: "127.0.0.1", caFile: simulator.caCertificatePath).outcome == .delivered)
        // Another CA, the system's CAs, a name the certificate does not list: no request reaches the server.
        for (host, caFile) in [("127.0.0.1", untrusted), ("127.0.0.1", nil), ("127.0.0.2", simulator.caCertificatePath)] {
            let result = try await send(host: host, caFile: caFile)
            #expect(result.status == nil, "\(host) trusting \(caFile ?? "the system"): \(result)")
            guard case .retry = result.outcome else { Issue.record("expected retry, got \(result)"); continue }
        }
        #expect(simulator.stats().requests == 1, "only the verified connection carried a request")
    }
}
