import APNsModel
import Foundation
import Testing
@testable import FanoutAPNs
import FanoutCrypto
import FanoutTestSupport

/// Requests end without waiting for a timeout that nothing else would enforce: a session nghttp2 ended
/// on its own, and the libcurl transport's own request deadline.
@Suite struct TransportEndTests {
    @Test func sessionNghttp2EndedIsFailedAndReplacedWithBackoff() async throws {
        let server = try ProtocolErrorServer()
        let client = try APNsClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: server.baseURL, caFile: server.caFile),
            credentials: TestApps.credentials(key: try P256PrivateKey.generate()), connections: 1,
            requestTimeout: .seconds(60), reconnectBackoff: (.milliseconds(1), .milliseconds(5)),
            tokenCache: ProviderTokenCache(), transport: .nghttp2))
        // The request timeout is a minute away (a failure without the fix, not a hang): only the session's end completes these soon.
        for n in 0..<2 {
            let result = await client.send(try TestApps.push(n))
            #expect(result.status == nil)
            guard case .retry = result.outcome else { Issue.record("expected retry, got \(result)"); continue }
            #expect(result.transportFailure?.contains("nghttp2 ended the HTTP/2 session") == true, "\(result.transportFailure ?? "")")
        }
        // Each request went over a new connection: the ended one was closed, not left "ready".
        #expect(server.accepted == 2)
        #expect(client.stats.unmatchedEnds == 0)
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test func curlRequestEndsAtItsOwnDeadline() async throws {
        // Nobody accepts: libcurl waits for the TLS handshake, and its connect timeout is far away.
        let (listening, port) = try Loopback.listen(on: .anyFree)
        defer { close(listening) }
        let client = try APNsClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: "https://127.0.0.1:\(port)", caFile: nil),
            credentials: TestApps.credentials(key: try P256PrivateKey.generate()), connections: 1,
            requestTimeout: .milliseconds(100), connectTimeout: .seconds(60),
            tokenCache: ProviderTokenCache(), transport: .curl))
        let result = await client.send(try TestApps.push())
        #expect(result.status == nil)
        guard case .retry = result.outcome else { Issue.record("expected retry, got \(result)"); return }
        #expect(result.transportFailure?.contains("(request timeout) [curl]") == true, "\(result.transportFailure ?? "")")
        #expect(client.stats.unmatchedEnds == 0)
        #expect(client.stats.inFlight == 0)
        await client.shutdown(deadline: .now + .seconds(5))
    }
}
