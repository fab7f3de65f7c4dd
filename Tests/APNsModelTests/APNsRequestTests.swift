import Testing
import APNsModel

@Suite struct APNsRequestTests {
    let token = String(repeating: "ab", count: 80)
    let body = Array(#"{"aps":{"event":"update","timestamp":1,"content-state":{}}}"#.utf8)

    @Test func deviceRequestWireForm() throws {
        let request = try APNsRequest.liveActivity(deviceToken: token, bundleID: "com.example.app", payload: body,
                                                   priority: .conserve, expiration: 1_700_000_000,
                                                   apnsID: "123e4567-e89b-12d3-a456-426614174000")
        let http = request.http
        #expect(http.method == .post)
        #expect(http.path == "/3/device/" + token)
        let headers = Dictionary(uniqueKeysWithValues: http.headers.map { ($0.name, $0.value) })
        #expect(headers == ["apns-push-type": "liveactivity", "apns-topic": "com.example.app.push-type.liveactivity",
                            "apns-priority": "5", "apns-expiration": "1700000000",
                            "apns-id": "123e4567-e89b-12d3-a456-426614174000"])
        #expect(http.body == body)
    }

    @Test func broadcastWireForm() throws {
        let request = try APNsRequest.broadcast(channelID: "dHN0LTEyMw==", bundleID: "com.example.app", payload: body,
                                                priority: .immediate, expiration: 0)
        let http = request.http
        #expect(http.path == "/4/broadcasts/apps/com.example.app")
        let headers = Dictionary(uniqueKeysWithValues: http.headers.map { ($0.name, $0.value) })
        #expect(headers == ["apns-channel-id": "dHN0LTEyMw==", "apns-push-type": "liveactivity",
                            "apns-priority": "10", "apns-expiration": "0"])
    }

    @Test func sizeIsCheckedBeforeSending() throws {
        let big = [UInt8](repeating: UInt8(ascii: "a"), count: 4097)
        #expect(throws: APNsRequestError.payloadTooLarge(size: 4097, limit: 4096)) {
            try APNsRequest.liveActivity(deviceToken: token, bundleID: "com.example.app", payload: big, priority: .immediate, expiration: 0)
        }
        // The same bytes fit the 5 KB broadcast limit, but not 5121.
        _ = try APNsRequest.broadcast(channelID: "YWJj", bundleID: "com.example.app", payload: big, priority: .conserve, expiration: 0)
        #expect(throws: APNsRequestError.payloadTooLarge(size: 5121, limit: 5120)) {
            try APNsRequest.broadcast(channelID: "YWJj", bundleID: "com.example.app",
                                      payload: [UInt8](repeating: 0x61, count: 5121), priority: .conserve, expiration: 0)
        }
        #expect(throws: APNsRequestError.emptyPayload) {
            try APNsRequest.liveActivity(deviceToken: token, bundleID: "com.example.app", payload: [], priority: .immediate, expiration: 0)
        }
    }

    @Test func badValuesAreRejected() {
        #expect(throws: APNsRequestError.badDeviceToken(prefix: "not-hex!")) {
            try APNsRequest.liveActivity(deviceToken: "not-hex!zz", bundleID: "com.example.app", payload: body, priority: .immediate, expiration: 0)
        }
        #expect(throws: APNsRequestError.badBundleID("com.example.app.push-type.liveactivity")) {
            try APNsRequest.liveActivity(deviceToken: token, bundleID: "com.example.app.push-type.liveactivity",
                                         payload: body, priority: .immediate, expiration: 0)
        }
        #expect(throws: APNsRequestError.badAPNsID("123E4567-E89B-12D3-A456-426614174000")) {
            try APNsRequest.liveActivity(deviceToken: token, bundleID: "com.example.app", payload: body, priority: .immediate,
                                         expiration: 0, apnsID: "123E4567-E89B-12D3-A456-426614174000")
        }
        #expect(throws: APNsRequestError.badExpiration(-1)) {
            try APNsRequest.liveActivity(deviceToken: token, bundleID: "com.example.app", payload: body, priority: .immediate, expiration: -1)
        }
        #expect(throws: APNsRequestError.priorityNotAllowed(1)) {
            try APNsRequest.liveActivity(deviceToken: token, bundleID: "com.example.app", payload: body, priority: .low, expiration: 0)
        }
        #expect(throws: APNsRequestError.badChannelID("not base64!")) {
            try APNsRequest.broadcast(channelID: "not base64!", bundleID: "com.example.app", payload: body,
                                      priority: .immediate, expiration: 0)
        }
    }
}

@Suite struct APNsRequestPayloadTests {
    @Test func typedPayloadIsEncodedAndSizeChecked() throws {
        let payload = LiveActivityPayload(event: .update, timestamp: 1_700_000_000, contentState: Array(#"{"p":1}"#.utf8))
        let request = try APNsRequest.liveActivity(deviceToken: "abcd", bundleID: "com.example.app", payload: payload,
                                                   priority: .conserve, expiration: 0)
        #expect(request.payload == payload.encoded())
        let huge = LiveActivityPayload(event: .update, timestamp: 1, contentState: Array(("{\"s\":\"" + String(repeating: "x", count: 5000) + "\"}").utf8))
        #expect(throws: APNsRequestError.payloadTooLarge(size: huge.encoded().count, limit: 4096)) {
            try APNsRequest.liveActivity(deviceToken: "abcd", bundleID: "com.example.app", payload: huge, priority: .conserve, expiration: 0)
        }
        let start = LiveActivityPayload(event: .start, timestamp: 1, contentState: Array("{}".utf8))
        #expect(throws: APNsRequestError.startOverBroadcast) {
            try APNsRequest.broadcast(channelID: "YWJj", bundleID: "com.example.app", payload: start, priority: .conserve, expiration: 0)
        }
    }
}
