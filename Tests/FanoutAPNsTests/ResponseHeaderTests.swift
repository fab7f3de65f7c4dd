import APNsModel
import Testing
@testable import FanoutAPNs

/// APNs response headers as both transports record them (`APNsHTTPResponse.record`), then classified.
@Suite struct ResponseHeaderTests {
    static func response(status: Int, _ headers: [(String, String)]) -> APNsHTTPResponse {
        var response = APNsHTTPResponse(status: status)
        for (name, value) in headers {
            Array(name.utf8).withUnsafeBufferPointer { name in
                Array(value.utf8).withUnsafeBufferPointer { response.record(headerName: name, value: $0) }
            }
        }
        return response
    }

    /// Found by `scripts/fuzz` (FuzzAPNsResponse, input `:status:503\nretry-after:-1`): the retry was
    /// to wait -1 s, and a 5xx with a delay of its own is not listed for the lane's early recovery.
    @Test func aNegativeRetryAfterIsNoDelay() {
        let response = Self.response(status: 503, [("retry-after", "-1")])
        #expect(response.retryAfterSeconds == nil)
        #expect(response.result().outcome == .retry(reason: "HTTP 503 without a reason", status: 503, after: nil))
    }

    @Test(arguments: ["+5", "5 ", " 5", "1e3", "0x10", "", "Wed, 21 Oct 2015 07:28:00 GMT", "99999999999999999999"])
    func aRetryAfterThatIsNotDelaySecondsIsIgnored(_ value: String) {
        #expect(Self.response(status: 429, [("retry-after", value)]).retryAfterSeconds == nil)
    }

    @Test func delaySecondsAreTheRetryDelay() {
        #expect(Self.response(status: 429, [("Retry-After", "30")]).result().outcome
            == .retry(reason: "HTTP 429 without a reason", status: 429, after: .seconds(30)))
        #expect(Self.response(status: 503, [("retry-after", "0")]).retryAfterSeconds == 0)
    }
}
