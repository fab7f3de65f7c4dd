import APNsModel
import FanoutCrypto
import FanoutTestSupport
import Testing
@testable import FanoutAPNs

/// Apple's header rules (docs/apns.md §1 "HPACK", §11 "Default storage"), checked on the header blocks
/// Fanout's clients actually put on the wire, over both transports: `authorization` and a device
/// push's `:path` never enter the HPACK dynamic table, and every device push carries `apns-expiration`.
///
/// Several pushes go over one connection, so a field once added to the table would come back as an
/// index; the tests' own decoder (`HPACKDecoder`, not nghttp2) says how each field was sent.
@Suite struct RequestHeaderRulesTests {
    /// Two tokens, each sent twice, so a `:path` in the table would be found again.
    static let tokens = [TestApps.token, String(repeating: "0123456789abcdef", count: 4), TestApps.token, String(repeating: "0123456789abcdef", count: 4)]

    func capture(over transport: APNsClientConfiguration.Transport) async throws -> HeaderCaptureServer {
        let server = try HeaderCaptureServer()
        let client = try APNsClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: server.baseURL, caFile: server.caFile),
            credentials: TestApps.credentials(key: try P256PrivateKey.generate()), connections: 1,
            tokenCache: ProviderTokenCache(), transport: transport))
        for (n, token) in Self.tokens.enumerated() {
            let result = await client.send(try TestApps.push(n, token: token))
            #expect(result.outcome == .delivered, "push \(n): \(result)")
        }
        await client.shutdown(deadline: .now + .seconds(5))
        #expect(server.problems.isEmpty, "\(server.problems)")
        return server
    }

    @Test(arguments: APNsClientConfiguration.Transport.allCases)
    func authorizationAndDevicePathNeverEnterTheDynamicTable(transport: APNsClientConfiguration.Transport) async throws {
        let server = try await capture(over: transport)
        let requests = server.requests
        #expect(requests.map { $0.values(":path") } == Self.tokens.map { ["/3/device/" + $0] })
        #expect(Set(requests.map(\.connection)) == [0], "every push on one connection")
        for (n, request) in requests.enumerated() {
            let guarded = request.fields.filter { $0.name == "authorization" || $0.name == ":path" }
            #expect(guarded.count == 2, "push \(n) has one authorization and one :path: \(request.fields)")
            for field in guarded {
                #expect(field.representation == .withoutIndexing || field.representation == .neverIndexed,
                        "push \(n): \(field.name) sent as \(field.representation)")
            }
            #expect(request.values("authorization").allSatisfy { $0.hasPrefix("bearer eyJ") })
        }
        let table = server.dynamicTables[0] ?? []
        #expect(!table.contains { $0.name == "authorization" || $0.name == ":path" }, "\(table.map(\.name))")
        // The table was in use all along: the later pushes refer to fields the first one added, so an
        // authorization or path kept there would have shown the same way.
        #expect(table.contains { $0.name == "apns-topic" })
        for (n, request) in requests.enumerated().dropFirst() {
            #expect(request.fields.contains { $0.name == "apns-topic" && $0.representation == .indexed && ($0.index ?? 0) > 61 },
                    "push \(n): \(request.fields)")
        }
    }

    @Test(arguments: APNsClientConfiguration.Transport.allCases)
    func everyDevicePushCarriesAnExpiration(transport: APNsClientConfiguration.Transport) async throws {
        let server = try await capture(over: transport)
        #expect(server.requests.count == Self.tokens.count)
        for (n, request) in server.requests.enumerated() {
            let expiration = request.values("apns-expiration")
            #expect(expiration.count == 1 && expiration.allSatisfy { Int64($0).map { $0 > 0 } == true },
                    "push \(n): apns-expiration \(expiration)")
        }
    }
}
