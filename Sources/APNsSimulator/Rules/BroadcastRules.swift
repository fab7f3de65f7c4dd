import Foundation

/// A broadcast that passed the request rules; the channel's existence and storage policy are checked
/// against the shared channel registry afterwards (`ChannelRegistry.admit`).
struct BroadcastPush {
    var appIndex: Int
    var channelID: String
    var priority: Int
    var expiration: Int64
    var payload: LiveActivityPayload
}

/// The `/4/broadcasts/apps/<bundle>` rules of docs/apns.md §6, as a pure function of the request.
enum BroadcastRules {
    static let maxBodyBytes = 5120
    static let pathPrefix: StaticString = "/4/broadcasts/apps/"
    /// Longest channel ID accepted before 400 BadChannelId (generated IDs are 24 characters).
    static let maxChannelIDLength = 128

    static func check(_ request: RequestHead, catalog: AppCatalog) -> Result<BroadcastPush, Refusal> {
        guard let pathRange = request.range(.path) else { return .failure(Refusal(.badPath)) }
        let bundle = String(decoding: request.arena[(pathRange.lowerBound + pathPrefix.utf8CodeUnitCount)..<pathRange.upperBound], as: UTF8.self)
        let appIndex: Int
        switch app(bundle, catalog: catalog) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let index): appIndex = index
        }
        guard catalog.apps[appIndex].broadcastEnabled else { return .failure(AppCatalog.broadcastNotEnabled) }

        guard let pushType = request.string(.pushType) else { return .failure(Refusal(.missingPushType)) }
        guard pushType.lowercased() == "liveactivity" else {
            return .failure(Refusal(.invalidPushType, "broadcasts use apns-push-type: liveactivity"))
        }
        guard let channelID = request.string(.channelID) else { return .failure(Refusal(.missingChannelId)) }
        guard isWellFormedChannelID(channelID) else { return .failure(Refusal(.badChannelId)) }

        guard request.has(.priority) else { return .failure(Refusal(.badPriority, "apns-priority is required on broadcasts")) }
        let priority: Int
        if request.value(.priority, equals: "10") { priority = 10 }
        else if request.value(.priority, equals: "5") { priority = 5 }
        else if request.value(.priority, equals: "1") { priority = 1 }
        else { return .failure(Refusal(.badPriority, "broadcast apns-priority is 1, 5 or 10")) }

        guard request.has(.expiration) else {
            return .failure(Refusal(.badExpirationDate, "apns-expiration is required on broadcasts"))
        }
        guard let expiration = request.withValue(.expiration, { HeaderRules.integer($0!) }) else {
            return .failure(Refusal(.badExpirationDate, "apns-expiration is UNIX seconds"))
        }
        if request.has(.requestID), !request.withValue(.requestID, { HeaderRules.isCanonicalUUID($0!) }) {
            return .failure(Refusal(.badMessageId, "apns-request-id must be a lowercase 8-4-4-4-12 UUID"))
        }

        guard request.bodyLength > 0 else { return .failure(Refusal(.payloadEmpty)) }
        guard request.bodyLength <= maxBodyBytes else {
            return .failure(Refusal(.payloadTooLarge, "broadcasts are limited to \(maxBodyBytes) bytes"))
        }
        let payload = request.body.withUnsafeBufferPointer { LiveActivityPayload.parse($0, isBroadcast: true) }
        return payload.map {
            BroadcastPush(appIndex: appIndex, channelID: channelID, priority: priority, expiration: expiration, payload: $0)
        }
    }

    /// Resolves a path bundle ID: a push-type suffix → 400 TopicDisallowed; not one of the team's apps → 403 TopicMismatch.
    static func app(_ bundle: String, catalog: AppCatalog) -> Result<Int, Refusal> {
        if bundle.contains(".push-type.") {
            return .failure(Refusal(.topicDisallowed, "use the bare bundle ID, with no push-type suffix"))
        }
        guard let index = catalog.appIndex(forBundle: bundle) else {
            return .failure(Refusal(.topicMismatch, "the bundle ID is not one of the team's configured apps"))
        }
        return .success(index)
    }

    static func isWellFormedChannelID(_ id: String) -> Bool {
        guard !id.isEmpty, id.utf8.count <= maxChannelIDLength, id.utf8.count % 4 == 0 else { return false }
        return Data(base64Encoded: id) != nil
    }
}
