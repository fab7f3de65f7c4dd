import APNsModel
import Foundation

/// Broadcast channel management (iOS 18): create, read, delete, list.
///
/// A read of a channel that is not there throws `.noSuchChannel`; a delete of one returns
/// `.alreadyGone`, so deleting is idempotent and a script that deletes can be run again
/// (`ChannelManagementAnswer` says which answers mean that).
///
/// Runs on its own `APNsClient` pointed at the management host (`api-manage-broadcast.*`, ports
/// 2195/2196, or a custom base URL such as the simulator's management port), sharing the provider
/// token cache with everything else.
public final class APNsChannelClient: Sendable {
    public enum StoragePolicy: Int, Sendable, Hashable, CaseIterable {
        /// 0: nothing stored for offline devices; allows a higher publishing budget; expiration must be 0.
        case noMessageStored = 0
        /// 1: the most recent message is stored (at most 8 hours).
        case mostRecentMessageStored = 1
    }

    /// What a delete came to.
    public enum DeleteOutcome: Sendable, Hashable {
        /// APNs deleted the channel (204).
        case deleted
        /// The channel was not there (deleted before, or never created); `result` is APNs's answer.
        case alreadyGone(APNsResult)
    }

    public struct Channel: Sendable, Hashable {
        public var channelID: String
        public var storagePolicy: StoragePolicy?
        public var pushType: String?
    }

    public let client: APNsClient

    /// `configuration.endpoint` should be `.appleChannelManagement(env)` or `.custom(managementURL, ca)`.
    public init(configuration: APNsClientConfiguration) throws {
        client = try APNsClient(configuration: configuration)
    }

    /// Creates a channel; returns its id (APNs chooses it: the `apns-channel-id` response header).
    public func create(bundleID: String, storagePolicy: StoragePolicy) async throws -> String {
        let body = #"{"message-storage-policy":\#(storagePolicy.rawValue),"push-type":"LiveActivity"}"#
        let response = try await exchange(.post, path: "/1/apps/\(bundleID)/channels", bundleID: bundleID,
                                          channelID: nil, body: Array(body.utf8), expect: [200, 201])
        if let id = response.channelID, !id.isEmpty { return id }
        // One implementer saw the id in the body instead of the header: accept that too.
        if let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
           let id = (object["channelId"] ?? object["channel-id"] ?? object["apns-channel-id"]) as? String {
            return id
        }
        throw APNsChannelError.malformedResponse("create answered \(response.status ?? 0) without an apns-channel-id")
    }

    public func read(bundleID: String, channelID: String) async throws -> Channel {
        let response = try await exchange(.get, path: "/1/apps/\(bundleID)/channels", bundleID: bundleID,
                                          channelID: channelID, body: [], expect: [200])
        guard let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] else {
            throw APNsChannelError.malformedResponse("read answered a body that is not a JSON object")
        }
        let policy = (object["message-storage-policy"] ?? object["messageStoragePolicy"]) as? Int
        let pushType = (object["push-type"] ?? object["pushType"]) as? String
        return Channel(channelID: channelID, storagePolicy: policy.flatMap(StoragePolicy.init(rawValue:)), pushType: pushType)
    }

    @discardableResult
    public func delete(bundleID: String, channelID: String) async throws -> DeleteOutcome {
        do {
            _ = try await exchange(.delete, path: "/1/apps/\(bundleID)/channels", bundleID: bundleID,
                                   channelID: channelID, body: [], expect: [200, 204])
            return .deleted
        } catch APNsChannelError.noSuchChannel(_, let result) {
            return .alreadyGone(result)
        }
    }

    public func list(bundleID: String) async throws -> [String] {
        let response = try await exchange(.get, path: "/1/apps/\(bundleID)/all-channels", bundleID: bundleID,
                                          channelID: nil, body: [], expect: [200])
        guard let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
              let channels = object["channels"] as? [String] else {
            throw APNsChannelError.malformedResponse("list answered without a \"channels\" array")
        }
        return channels
    }

    public func shutdown(deadline: ContinuousClock.Instant) async { await client.shutdown(deadline: deadline) }

    private func exchange(_ method: APNsHTTPRequest.Method, path: String, bundleID: String, channelID: String?,
                          body: [UInt8], expect: Set<Int>) async throws -> APNsHTTPResponse {
        guard APNsRequestValidation.isBundleID(bundleID) else { throw APNsChannelError.badArgument("bad bundle id '\(bundleID)'") }
        var headers: [APNsHTTPRequest.Header] = []
        if let channelID {
            guard Base64URL.isStandardBase64(channelID) else { throw APNsChannelError.badArgument("channel id '\(channelID)' is not base64") }
            headers.append(.init("apns-channel-id", channelID))
        }
        let request = APNsHTTPRequest(method: method, path: path, headers: headers, body: body, bundleID: bundleID)
        let response = try await client.perform(request)
        guard let status = response.status else {
            throw APNsChannelError.transport(response.transportFailure ?? "no response")
        }
        guard expect.contains(status) else {
            let result = response.result()
            if let channelID, ChannelManagementAnswer(result, namesChannel: true) == .noSuchChannel {
                throw APNsChannelError.noSuchChannel(channelID: channelID, result)
            }
            throw APNsChannelError.rejected(result)
        }
        return response
    }
}

/// Why a channel-management call failed.
public enum APNsChannelError: Error, Sendable, CustomStringConvertible {
    /// APNs answered with an error; `result` has status, reason and its classification.
    case rejected(APNsResult)
    /// A read or delete named a channel the app does not have (never created, or deleted);
    /// `result` is APNs's answer (404 BadPath from live APNs).
    case noSuchChannel(channelID: String, APNsResult)
    case transport(String)
    case malformedResponse(String)
    case badArgument(String)

    public var description: String {
        switch self {
        case .rejected(let result):
            "APNs rejected the request: \(result.status.map(String.init) ?? "-") \(result.reason?.rawValue ?? "(no reason)")"
        case .noSuchChannel(let channelID, let result):
            "channel \(channelID) does not exist (or was deleted): APNs answered \(result.status.map(String.init) ?? "-") \(result.reason?.rawValue ?? "(no reason)")"
        case .transport(let text): "could not reach APNs: \(text)"
        case .malformedResponse(let text): "unexpected APNs response: \(text)"
        case .badArgument(let text): text
        }
    }
}
