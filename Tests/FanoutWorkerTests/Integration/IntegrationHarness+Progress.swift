import APNsSimulator
import FanoutKafka
import Foundation
import Synchronization

/// A stream of numbered states per activity ("progress": n), and checks of what the device got
/// against what the group committed.
struct ProgressEvent: Sendable {
    var key: String
    var token: String
    var progress: Int
    var partition: Int32
    var offset: Int64
}

extension IntegrationHarness {
    /// Produces state number `progress` of activity `key` (timestamps rise with `progress`).
    func produceProgress(key: String, token: String, progress: Int, base: Int64) async throws -> ProgressEvent {
        let report = try await produceEvent(key: key, Self.event(id: "\(key)-\(progress)", key: key, timestamp: base + Int64(progress),
                                                                 state: "{\"phase\":\"run\",\"progress\":\(progress)}"))
        return ProgressEvent(key: key, token: token, progress: progress, partition: report.partition, offset: report.offset)
    }

    /// Per device token, the arrival times (UNIX s) and progress numbers the simulator accepted, in arrival order.
    func progressDeliveries() -> [String: [(time: Double, progress: Int)]] {
        var result: [String: [(time: Double, progress: Int)]] = [:]
        for record in simulator.deliveries() {
            guard let token = record.token,
                  let aps = try? JSONSerialization.jsonObject(with: Data(record.aps.utf8)) as? [String: Any],
                  let state = aps["content-state"] as? [String: Any],
                  let progress = (state["progress"] as? NSNumber)?.intValue else { continue }
            result[token, default: []].append((record.time, progress))
        }
        return result
    }

    /// True when every activity's device view shows its state number `progress`.
    func devicesShow(_ tokens: [String], progress: [String: Int]) -> Bool {
        tokens.allSatisfy { token in
            simulator.deviceView(token: token)?.contentState.contains("\"progress\":\(progress[token] ?? -1)") == true
        }
    }

    /// Partitions whose committed offset passes an event that was neither delivered nor resolved
    /// (a later state of the same activity delivered), with that offset: must be empty.
    func commitsPastUndelivered(_ events: [ProgressEvent]) throws -> [String] {
        let delivered = progressDeliveries().mapValues { $0.map(\.progress).max() ?? -1 }
        var firstUndelivered: [Int32: Int64] = [:]
        for event in events where (delivered[event.token] ?? -1) < event.progress {
            firstUndelivered[event.partition] = min(event.offset, firstUndelivered[event.partition] ?? .max)
        }
        let committed = try committed()
        return firstUndelivered.compactMap { partition, offset in
            guard let done = committed[partition] ?? nil, done > offset else { return nil }
            return "partition \(partition) committed at \(done), past undelivered offset \(offset)"
        }
    }
}

/// Seconds since `start`, for "measured:" lines.
func seconds(since start: ContinuousClock.Instant) -> String {
    let elapsed = ContinuousClock.now - start
    return String(format: "%.2f s", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

/// Set once by a test to end a loop running in a task.
final class StopFlag: Sendable {
    private let value = Atomic(false)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func set() { value.store(true, ordering: .relaxed) }
}
