import APNsModel
@testable import FanoutAPNs
import FanoutCrypto
import FuzzSupport
import Synchronization

/// Fuzzes what Fanout reads from an APNs answer: the response headers as both transports record them,
/// the error body, the one classification (`APNsResponseClassifier`, README's table "APNs outcome"),
/// the provider-token judgement of a 403, and a GOAWAY's debug data.
///
/// Input: `name: value` header lines, an empty line, then the body (also read as GOAWAY debug data).
/// `:status` counts only as nghttp2 delivers it (three digits, not 101); otherwise the stream failed
/// below HTTP. `x-token-clock: <signed at> <answered at> <window minutes>` (UNIX seconds) makes the
/// request carry a provider token minted at the first time, answered at the second.
enum APNsResponseTarget {
    static let credentials: APNsCredentials = {
        do {
            return APNsCredentials(teamID: "TEAM000001", keyID: "KEY0000001", key: try P256PrivateKey.generate())
        } catch {
            Property.fail("cannot make a P-256 key: \(error)")
        }
    }()

    static func run(_ input: UnsafeBufferPointer<UInt8>) {
        let (headers, body) = FuzzText.headersAndBody(Array(input))
        var response = APNsHTTPResponse(status: nil, body: body)
        var statusText: [UInt8]?
        var tokenClock: [Int64]?
        var retryAfter: [UInt8]?
        var ids: (apnsID: [UInt8]?, requestID: [UInt8]?) = (nil, nil)
        for (name, value) in headers where FuzzText.isDeliverableFieldName(name) && FuzzText.isDeliverableFieldValue(value) {
            switch String(decoding: name, as: UTF8.self) {
            case ":status": statusText = statusText ?? value
            case "x-token-clock": tokenClock = String(decoding: value, as: UTF8.self).split(separator: " ").compactMap { Int64($0) }
            case "retry-after": retryAfter = value
            case "apns-id": ids.apnsID = value
            case "apns-request-id": ids.requestID = value
            default: break
            }
            guard !name.starts(with: [UInt8(ascii: ":")]) else { continue }
            name.withUnsafeBufferPointer { name in value.withUnsafeBufferPointer { response.record(headerName: name, value: $0) } }
        }
        if let statusText, statusText.count == 3, statusText.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
           let status = Int(String(decoding: statusText, as: UTF8.self)), status >= 100, status != 101 {
            response.status = status
        } else {
            response.transportFailure = "transport: stream reset by the server [nghttp2]"
        }

        let clock = Clock()
        let cache: ProviderTokenCache
        var providerToken: ProviderTokenCache.Token?
        if let tokenClock, tokenClock.count == 3, (20...60).contains(tokenClock[2]) {
            clock.now = tokenClock[0]
            // Signing is not what is fuzzed here: a stand-in JWT keeps each input fast.
            cache = ProviderTokenCache(refreshInterval: .seconds(tokenClock[2] * 60), now: { clock.now }) { _, issuedAt in
                "header.\(issuedAt).signature"
            }
            do {
                providerToken = try cache.token(for: credentials)
            } catch {
                Property.fail("the stand-in signer cannot fail: \(error)")
            }
            clock.now = tokenClock[1]
        } else {
            cache = ProviderTokenCache(refreshInterval: .seconds(50 * 60), now: { clock.now })
        }
        let gate = ConnectionGate.Completion.response(&response, credentials: credentials, providerToken: providerToken, tokenCache: cache)
        let result = response.result()
        ResponseProperties.check(result, response: response, gate: gate, retryAfter: retryAfter, ids: ids)

        let goAway = HTTP2ClientConnection.goAwayReason(body)
        Property.require((goAway == nil) == body.isEmpty, "a GOAWAY with debug data always has a reason to report")
    }

    /// The token cache's clock, set by the input.
    final class Clock: Sendable {
        private let seconds = Atomic<Int64>(0)
        var now: Int64 {
            get { seconds.load(ordering: .relaxed) }
            set { seconds.store(newValue, ordering: .relaxed) }
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    APNsResponseTarget.run(FuzzDriver.bytes(data, size))
    return 0
}

FuzzDriver.run(testOneInput)
