/// A device push that passed every request rule (the shared token state is checked afterwards).
struct DevicePush {
    var appIndex: Int
    var token: Range<Int>
    var priority: Int
    var expiration: Int64?
    var payload: LiveActivityPayload
}

/// The `/3/device/<token>` rules of docs/apns.md §3–§5, as a pure function of the request.
/// Authentication is checked before (per connection), token state and rate after (shared state).
enum DevicePushRules {
    static let maxBodyBytes = 4096
    static let maxCollapseIDBytes = 64
    static let pathPrefix: StaticString = "/3/device/"

    static func check(_ request: RequestHead, catalog: AppCatalog) -> Result<DevicePush, Refusal> {
        guard let pathRange = request.range(.path) else { return .failure(Refusal(.badPath)) }
        let prefixLength = pathPrefix.utf8CodeUnitCount
        let tokenRange = (pathRange.lowerBound + prefixLength)..<pathRange.upperBound
        guard !tokenRange.isEmpty else { return .failure(Refusal(.missingDeviceToken)) }
        let tokenIsHex = request.arena.withUnsafeBufferPointer { HeaderRules.isHex(UnsafeBufferPointer(rebasing: $0[tokenRange])) }
        guard tokenRange.count % 2 == 0, tokenRange.count >= 16, tokenRange.count <= 400, tokenIsHex else {
            return .failure(Refusal(.badDeviceToken, "a device token is an even number of hex digits"))
        }

        guard request.has(.pushType) else { return .failure(Refusal(.invalidPushType, "apns-push-type is required (liveactivity)")) }
        guard request.value(.pushType, equals: "liveactivity") else {
            return .failure(Refusal(.invalidPushType, "Live Activity pushes use apns-push-type: liveactivity"))
        }
        let appIndex: Int? = request.withValue(.topic) { topic in topic.flatMap { catalog.appIndex(forTopic: $0) } }
        guard let appIndex else {
            guard request.has(.topic) else { return .failure(Refusal(.missingTopic)) }
            return .failure(request.withValue(.topic) { catalog.refusal(forTopic: $0!) })
        }

        var priority = 10
        if request.has(.priority) {
            if request.value(.priority, equals: "10") { priority = 10 }
            else if request.value(.priority, equals: "5") { priority = 5 }
            else { return .failure(Refusal(.badPriority, "Live Activity pushes use apns-priority 5 or 10")) }
        }
        if request.has(.apnsID), !request.withValue(.apnsID, { HeaderRules.isCanonicalUUID($0!) }) {
            return .failure(Refusal(.badMessageId, "apns-id must be a lowercase 8-4-4-4-12 UUID"))
        }
        var expiration: Int64?
        if request.has(.expiration) {
            expiration = request.withValue(.expiration) { HeaderRules.integer($0!) }
            guard expiration != nil else { return .failure(Refusal(.badExpirationDate, "apns-expiration is UNIX seconds")) }
        }
        if let collapse = request.range(.collapseID), collapse.count > maxCollapseIDBytes {
            return .failure(Refusal(.badCollapseId))
        }

        guard request.bodyLength > 0 else { return .failure(Refusal(.payloadEmpty)) }
        guard request.bodyLength <= maxBodyBytes else {
            return .failure(Refusal(.payloadTooLarge, "device pushes are limited to \(maxBodyBytes) bytes"))
        }
        let payload = request.body.withUnsafeBufferPointer { LiveActivityPayload.parse($0, isBroadcast: false) }
        return payload.map { DevicePush(appIndex: appIndex, token: tokenRange, priority: priority, expiration: expiration, payload: $0) }
    }
}
