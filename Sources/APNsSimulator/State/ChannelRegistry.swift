import APNsModel
import Foundation

/// Broadcast channels per app: random base64 IDs, a storage policy fixed at creation, at most
/// `maxPerApp` per app, deleted IDs never reused.
///
/// A channel that is not there is answered as live APNs answers it: a read or delete naming it gets
/// 404 BadPath; a broadcast to a deleted channel gets 400 ChannelNotRegistered, and to an id that
/// was never created (here or for this app) 400 BadChannelId (observed on live APNs; see the README's
/// simulator notes under "Load testing and benchmarks").
struct ChannelRegistry {
    struct Channel: Equatable {
        var bundleID: String
        var storagePolicy: Int
    }

    let maxPerApp: Int
    private(set) var channels: [String: Channel] = [:]
    private var idsByApp: [String: [String]] = [:]
    /// Deleted channels, never reused: a broadcast to one is ChannelNotRegistered. One entry per
    /// delete, for the simulator's lifetime (a test or load-test run).
    private var deleted: Set<String> = []

    init(maxPerApp: Int) { self.maxPerApp = maxPerApp }

    mutating func create(bundleID: String, storagePolicy: Int, random: inout SeededRandom) -> Result<String, Refusal> {
        guard storagePolicy == 0 || storagePolicy == 1 else {
            return .failure(Refusal(.badRequestParams, "message-storage-policy is 0 or 1"))
        }
        guard idsByApp[bundleID, default: []].count < maxPerApp else { return .failure(Refusal(.cannotCreateChannelConfig)) }
        var id: String
        repeat {
            var bytes = [UInt8](repeating: 0, count: 16)
            for index in stride(from: 0, to: 16, by: 8) {
                let word = random.next()
                for offset in 0..<8 { bytes[index + offset] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(offset))) }
            }
            id = Data(bytes).base64EncodedString()
        } while channels[id] != nil || deleted.contains(id)
        channels[id] = Channel(bundleID: bundleID, storagePolicy: storagePolicy)
        idsByApp[bundleID, default: []].append(id)
        return .success(id)
    }

    func read(bundleID: String, id: String) -> Result<Channel, Refusal> {
        guard let channel = channel(id, of: bundleID) else { return .failure(Self.noSuchChannel(bundleID: bundleID, id: id)) }
        return .success(channel)
    }

    mutating func delete(bundleID: String, id: String) -> Refusal? {
        guard channel(id, of: bundleID) != nil else { return Self.noSuchChannel(bundleID: bundleID, id: id) }
        channels[id] = nil
        deleted.insert(id)
        idsByApp[bundleID]?.removeAll { $0 == id }
        return nil
    }

    func list(bundleID: String) -> [String] { idsByApp[bundleID] ?? [] }

    /// The channel `id` when it exists for this app (another app's is not there for it).
    private func channel(_ id: String, of bundleID: String) -> Channel? {
        guard let channel = channels[id], channel.bundleID == bundleID else { return nil }
        return channel
    }

    /// A read or delete of a channel this app does not have. Apple's error table has no entry for it;
    /// live APNs answers a DELETE of an unknown or already deleted channel with 404 BadPath, and the
    /// simulator answers a read the same way, so a client learns "no such channel" from one answer.
    private static func noSuchChannel(bundleID: String, id: String) -> Refusal {
        Refusal(.badPath, "no channel \(id) for \(bundleID) (never created, or deleted)")
    }

    /// Broadcast admission: the channel exists for this app, and a No-Storage channel (policy 0)
    /// accepts only `apns-expiration: 0`.
    func admit(bundleID: String, id: String, expiration: Int64) -> Refusal? {
        guard let channel = channel(id, of: bundleID) else {
            return deleted.contains(id)
                ? Refusal(.channelNotRegistered, "channel \(id) was deleted")
                : Refusal(.badChannelId, "no channel \(id) was ever created for \(bundleID)")
        }
        if channel.storagePolicy == 0, expiration != 0 {
            return Refusal(.badExpirationDate, "No-Storage channels (policy 0) accept only apns-expiration: 0")
        }
        return nil
    }
}
