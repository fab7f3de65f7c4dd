/// What an error answer of the broadcast channel-management API means to whoever manages channels,
/// beyond its `SendOutcome` (which stays what the send path acts on: both answers below are
/// configuration errors or gone targets there). The one place that reads these reasons for channel
/// management; `APNsChannelClient` and `fanout channels` act on it.
public enum ChannelManagementAnswer: Sendable, Hashable {
    /// A read or delete named a channel the app does not have: never created, or deleted. Live APNs
    /// answers 404 BadPath (a DELETE of an unknown or already deleted channel); Apple's error table
    /// lists 400 ChannelNotRegistered for a channel that does not exist. Both mean the same here.
    case noSuchChannel
    /// The App ID lacks the broadcast capability: Apple's table says 400 FeatureNotEnabled, live APNs
    /// answers 400 BroadcastFeatureNotEnabled.
    case broadcastCapabilityMissing
    /// Anything else: the result's `outcome` says what kind of failure it is.
    case other

    /// `namesChannel`: the request carried an `apns-channel-id` (read, delete). On a request that
    /// names no channel, 404 BadPath keeps its plain meaning (a wrong path or method).
    public init(status: Int?, reason: APNsReason?, namesChannel: Bool) {
        switch reason {
        case .featureNotEnabled?, .broadcastFeatureNotEnabled?:
            self = .broadcastCapabilityMissing
        case .badPath? where namesChannel && status == 404, .channelNotRegistered? where namesChannel:
            self = .noSuchChannel
        default:
            self = .other
        }
    }

    public init(_ result: APNsResult, namesChannel: Bool) {
        self.init(status: result.status, reason: result.reason, namesChannel: namesChannel)
    }
}
