import Foundation
import Synchronization

/// The per-key limit on new provider tokens, across every connection: fleets whose replicas each
/// mint their own token for one key draw `429 TooManyProviderTokenUpdates` (docs/apns.md §11), although
/// Apple documents the 20-minute rule per connection (docs/apns.md §2, `ProviderTokenGate`). At most
/// `limit` distinct tokens of one key (`kid`) may be brought into use — first admitted on any
/// connection — within `intervalSeconds` (20 minutes); another new one is refused. A token once
/// admitted stays welcome on every connection until it expires, so replicas presenting the same
/// bytes never count twice.
///
/// Bounded: refused tokens are not remembered, and a token is forgotten once it can no longer be
/// admitted (older than the maximum age, and out of the counting interval). Thread-safe (one Mutex,
/// taken only when a connection moves to a token that is new to it).
final class ProviderTokenLedger: Sendable {
    private struct Admitted {
        var token: [UInt8]
        var issuedAt: Double
        var firstAdmitted: Double
    }

    /// Distinct new tokens per key per interval; 0 turns the limit off (nothing is recorded).
    let limit: Int
    let intervalSeconds: Double
    private let maxAgeSeconds: Double
    private let admitted = Mutex<[String: [Admitted]]>([:])

    init(limit: Int, intervalSeconds: Double, maxAgeSeconds: Double) {
        self.limit = limit
        self.intervalSeconds = intervalSeconds
        self.maxAgeSeconds = maxAgeSeconds
    }

    /// Admits `jwt` (verified, not expired) for `keyID` at `now`: true when it is known already, or new
    /// and the key brought fewer than `limit` new tokens into use in the last `intervalSeconds`.
    func admit(keyID: String, jwt: UnsafeBufferPointer<UInt8>, issuedAt: Double, now: Double) -> Bool {
        guard limit > 0 else { return true }
        return admitted.withLock { keys in
            var tokens = keys[keyID, default: []]
            tokens.removeAll { now - $0.issuedAt > maxAgeSeconds && now - $0.firstAdmitted >= intervalSeconds }
            defer { keys[keyID] = tokens }
            if tokens.contains(where: { Self.same($0.token, jwt) }) { return true }
            let recent = tokens.filter { now - $0.firstAdmitted < intervalSeconds }.count
            guard recent < limit else { return false }
            tokens.append(Admitted(token: Array(jwt), issuedAt: issuedAt, firstAdmitted: now))
            return true
        }
    }

    private static func same(_ stored: [UInt8], _ candidate: UnsafeBufferPointer<UInt8>) -> Bool {
        stored.count == candidate.count && stored.withUnsafeBufferPointer { memcmp($0.baseAddress!, candidate.baseAddress!, candidate.count) == 0 }
    }
}
