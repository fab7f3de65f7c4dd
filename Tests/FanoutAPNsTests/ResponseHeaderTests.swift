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

    @Test func apnsHeadersAreRecordedWhateverTheirCase() {
        let response = Self.response(status: 200, [("apns-id", "eabeae54-14a8-11e5-b60b-1697f925ec7b"), ("APNS-Unique-ID", "u-9"),
                                                   ("apns-request-id", "r-1"), ("apns-channel-id", "dHN0LXU="), ("x-other", "ignored")])
        #expect(response.apnsID == "eabeae54-14a8-11e5-b60b-1697f925ec7b")
        #expect(response.apnsUniqueID == "u-9" && response.apnsRequestID == "r-1" && response.channelID == "dHN0LXU=")
    }

    /// Found by `scripts/fuzz` in CI (FuzzAPNsResponse): delay-seconds with many leading zeros is still
    /// a number of seconds; only a value past Int is dropped.
    @Test func leadingZerosAreStillDelaySeconds() {
        let zeros = String(repeating: "0", count: 45)
        #expect(Self.response(status: 503, [("retry-after", zeros + "544435154953233294")]).retryAfterSeconds == 544_435_154_953_233_294)
        #expect(Self.response(status: 503, [("retry-after", "9223372036854775807")]).retryAfterSeconds == Int.max)
        #expect(Self.response(status: 503, [("retry-after", "9223372036854775808")]).retryAfterSeconds == nil)
    }

    @Test func largeButValidDelaysAreRead() {
        #expect(Self.response(status: 429, [("retry-after", "120")]).retryAfterSeconds == 120)
        #expect(Self.response(status: 429, [("retry-after", "999999999999999999")]).retryAfterSeconds == 999_999_999_999_999_999)
    }
}
