/// One HTTP/2 request as it goes on the wire to an APNs host: method, path, APNs headers, body.
/// The transport adds `authorization` (from the credentials of `bundleID`) and content headers.
public struct APNsHTTPRequest: Sendable, Hashable {
    public enum Method: String, Sendable, Hashable { case get = "GET", post = "POST", delete = "DELETE" }

    public var method: Method
    public var path: String
    /// Lowercase header names and values, without `authorization`.
    public var headers: [Header]
    public var body: [UInt8]
    /// Selects the credentials (team, key) whose JWT signs this request.
    public var bundleID: String

    public struct Header: Sendable, Hashable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) { self.name = name; self.value = value }
    }

    public init(method: Method, path: String, headers: [Header], body: [UInt8], bundleID: String) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.bundleID = bundleID
    }
}

extension APNsRequest {
    /// `apns-topic` of a Live Activity push for `bundleID` (docs/apns.md §3).
    public static func liveActivityTopic(_ bundleID: String) -> String { bundleID + ".push-type.liveactivity" }

    /// The wire form: path and headers exactly as docs/apns.md §3 (device) and §6 (broadcast) describe.
    public var http: APNsHTTPRequest { http(liveActivityTopic: nil) }

    /// The wire form, with the device push's `apns-topic` given as `liveActivityTopic(bundleID)` made it
    /// once for the app (a client sending many pushes keeps it instead of making the string per push);
    /// nil makes it here.
    public func http(liveActivityTopic: String?) -> APNsHTTPRequest {
        var headers: [APNsHTTPRequest.Header] = []
        headers.reserveCapacity(6)
        let path: String
        switch target {
        case .device(let devicePath):
            path = devicePath
            headers.append(.init("apns-push-type", "liveactivity"))
            assert(liveActivityTopic == nil || liveActivityTopic == Self.liveActivityTopic(bundleID), "the topic of another app")
            headers.append(.init("apns-topic", liveActivityTopic ?? Self.liveActivityTopic(bundleID)))
            headers.append(.init("apns-priority", String(priority.rawValue)))
            headers.append(.init("apns-expiration", String(expiration)))
            if let apnsID { headers.append(.init("apns-id", apnsID)) }
        case .broadcast(let channelID):
            path = "/4/broadcasts/apps/" + bundleID
            headers.append(.init("apns-channel-id", channelID))
            headers.append(.init("apns-push-type", "liveactivity"))
            headers.append(.init("apns-priority", String(priority.rawValue)))
            headers.append(.init("apns-expiration", String(expiration)))
            if let apnsID { headers.append(.init("apns-request-id", apnsID)) }
        }
        return APNsHTTPRequest(method: .post, path: path, headers: headers, body: payload, bundleID: bundleID)
    }
}
