import APNsModel
import Testing
@testable import FanoutAPNs

/// The response headers both transports record (`APNsHTTPResponse.record`).
@Suite struct ResponseHeaderTests {
    static func recorded(_ headers: [(String, String)]) -> APNsHTTPResponse {
        var response = APNsHTTPResponse(status: 429)
        for (name, value) in headers {
            var name = name, value = value
            name.withUTF8 { name in value.withUTF8 { value in response.record(headerName: name, value: value) } }
        }
        return response
    }

    @Test func apnsHeadersAreRecordedWhateverTheirCase() {
        let response = Self.recorded([("apns-id", "eabeae54-14a8-11e5-b60b-1697f925ec7b"), ("APNS-Unique-ID", "u-9"),
                                      ("apns-request-id", "r-1"), ("apns-channel-id", "dHN0LXU="), ("x-other", "ignored")])
        #expect(response.apnsID == "eabeae54-14a8-11e5-b60b-1697f925ec7b")
        #expect(response.apnsUniqueID == "u-9" && response.apnsRequestID == "r-1" && response.channelID == "dHN0LXU=")
    }

    @Test func retryAfterIsReadAsWholeSecondsOnly() {
        #expect(Self.recorded([("retry-after", "120")]).retryAfterSeconds == 120)
        #expect(Self.recorded([("retry-after", "0")]).retryAfterSeconds == 0)
        for bad in ["", "-1", "1.5", "soon", "Wed, 21 Oct 2015 07:28:00 GMT", String(repeating: "9", count: 19)] {
            #expect(Self.recorded([("retry-after", bad)]).retryAfterSeconds == nil, "\(bad)")
        }
    }
}
