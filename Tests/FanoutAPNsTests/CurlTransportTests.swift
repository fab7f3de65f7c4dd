import APNsModel
import CCurl
import Testing
@testable import FanoutAPNs

/// The libcurl transport's own decisions, without a server.
@Suite struct CurlTransportTests {
    static func event(_ code: CURLcode, status: Int? = nil) -> ConnectionGate.Completion {
        CurlTransportEngine.gateEvent(code: code, response: APNsHTTPResponse(status: status), credentials: nil,
                                      tokenGeneration: 0, tokenCache: ProviderTokenCache())
    }

    @Test func connectionLevelHTTP2ErrorBacksOff() {
        guard case .transportFailure = Self.event(CURLE_HTTP2) else {
            Issue.record("CURLE_HTTP2 is a broken connection, not one reset stream")
            return
        }
    }

    @Test func resetStreamNeitherOpensNorBacksOff() {
        guard case .streamReset = Self.event(CURLE_HTTP2_STREAM) else {
            Issue.record("CURLE_HTTP2_STREAM is one reset stream")
            return
        }
    }

    @Test func otherFailuresBackOffAndAnswersCount() {
        guard case .transportFailure = Self.event(CURLE_OPERATION_TIMEDOUT) else { Issue.record("timeout"); return }
        guard case .transportFailure = Self.event(CURLE_RECV_ERROR) else { Issue.record("recv"); return }
        guard case .response(authenticated: true) = Self.event(CURLE_OK, status: 200) else { Issue.record("200"); return }
    }
}
