extension APNsRequest {
    /// A Live Activity push whose body is built from typed values; the encoded size is checked
    /// against the 4096-byte limit before anything is sent.
    public static func liveActivity(deviceToken: String, bundleID: String, payload: LiveActivityPayload,
                                    priority: APNsPriority, expiration: Int64,
                                    apnsID: String? = nil) throws(APNsRequestError) -> APNsRequest {
        try liveActivity(deviceToken: deviceToken, bundleID: bundleID, payload: payload.encoded(), priority: priority,
                         expiration: expiration, apnsID: apnsID)
    }

    /// A broadcast whose body is built from typed values (checked against the 5120-byte limit).
    /// APNs cannot start an activity over a channel, so `event` must be update or end.
    public static func broadcast(channelID: String, bundleID: String, payload: LiveActivityPayload,
                                 priority: APNsPriority, expiration: Int64,
                                 requestID: String? = nil) throws(APNsRequestError) -> APNsRequest {
        guard payload.event != .start else { throw .startOverBroadcast }
        return try broadcast(channelID: channelID, bundleID: bundleID, payload: payload.encoded(), priority: priority,
                             expiration: expiration, requestID: requestID)
    }
}
