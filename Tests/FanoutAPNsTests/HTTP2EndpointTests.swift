import Testing
@testable import FanoutAPNs
import FanoutCrypto

@Suite struct HTTP2EndpointTests {
    @Test func appleHostsAndCustomURLs() throws {
        let apple = try HTTP2Endpoint(baseURL: APNsClientConfiguration(endpoint: .apple(.production), credentials: [:], port: 2197).baseURL)
        #expect(apple.host == "api.push.apple.com")
        #expect(apple.port == 2197)
        #expect(apple.authority == "api.push.apple.com:2197")
        let defaultPort = try HTTP2Endpoint(baseURL: "https://api.sandbox.push.apple.com:443")
        #expect(defaultPort.authority == "api.sandbox.push.apple.com", "443 is left out of :authority")
        let noPort = try HTTP2Endpoint(baseURL: "https://example.com")
        #expect(noPort.port == 443)
        let v6 = try HTTP2Endpoint(baseURL: "https://[::1]:8443")
        #expect(v6.host == "::1")
        #expect(v6.port == 8443)
        #expect(v6.authority == "[::1]:8443")
        let prefixed = try HTTP2Endpoint(baseURL: "https://127.0.0.1:9000/apns/")
        #expect(prefixed.pathPrefix == "/apns")
        #expect(prefixed.authority == "127.0.0.1:9000")
    }

    @Test func ipLiteralsNeedNoLookup() throws {
        #expect(try HTTP2Endpoint(baseURL: "https://127.0.0.1:1").hostIsIPLiteral)
        #expect(try HTTP2Endpoint(baseURL: "https://[::1]:1").hostIsIPLiteral)
        #expect(try !HTTP2Endpoint(baseURL: "https://api.push.apple.com").hostIsIPLiteral)
        #expect(!TLSClientContext.isIPLiteral("1.2.3"))
        #expect(!TLSClientContext.isIPLiteral("localhost"))
    }

    @Test func unresolvableHostFailsAsRetry() async throws {
        // .invalid never resolves (RFC 6761); the lookup runs off the transport thread, bounded by the connect timeout.
        let client = try APNsClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: "https://fanout-test.invalid", caFile: nil), credentials: TestApps.credentials(key: try .generate()),
            connections: 1, connectTimeout: .seconds(3), tokenCache: ProviderTokenCache(), transport: .nghttp2))
        let result = await client.send(try TestApps.push())
        #expect(result.status == nil)
        guard case .retry = result.outcome, let failure = result.transportFailure else { Issue.record("expected retry, got \(result)"); return }
        #expect(failure.contains("cannot resolve fanout-test.invalid") || failure.contains("timed out"), "\(failure)")
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test func badURLsAreConfigurationErrors() {
        for url in ["http://127.0.0.1:1", "https://127.0.0.1:99999", "https://:443", "https://[::1", "https://host:port"] {
            #expect(throws: APNsClientError.self, "\(url)") { try HTTP2Endpoint(baseURL: url) }
        }
    }

    @Test func transportSettingsAreValidated() throws {
        var configuration = APNsClientConfiguration(endpoint: .custom(baseURL: "https://127.0.0.1:1", caFile: nil),
                                                    credentials: TestApps.credentials(key: try .generate()), transport: .nghttp2)
        configuration.pingTimeout = .zero
        #expect(throws: APNsClientError.self) { try APNsClient(configuration: configuration) }
        configuration.pingTimeout = .seconds(1)
        configuration.reconnectBackoff = (.seconds(2), .seconds(1))
        #expect(throws: APNsClientError.self) { try APNsClient(configuration: configuration) }
    }
}
