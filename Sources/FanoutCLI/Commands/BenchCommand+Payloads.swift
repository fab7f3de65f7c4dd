import APNsModel
import FanoutCore
import Foundation

extension EngineBenchmark {
    /// The payload half of every send: the event's Live Activity payload built and encoded to the
    /// bytes of the HTTP/2 body (what `APNsLanes` does per send before the transport takes it).
    static func payloads(count: Int) {
        let state = RawJSON(bytes: Array(#"{"status":"rendering","done":37,"total":100,"title":"Export 42"}"#.utf8))
        let alert = RawJSON(bytes: Array(#"{"title":"Export ready","body":"Tap to open"}"#.utf8))
        var events: [ActivityEvent] = []
        for index in 0..<64 {
            let kind: EventKind = index % 16 == 15 ? .end : .update
            let timestamp: Int64 = 1_772_788_000 + Int64(index)
            events.append(ActivityEvent(id: "e\(index)", app: app, lane: .activity, target: "act-\(index)", kind: kind,
                                        timestamp: timestamp, contentState: state, contentFields: [],
                                        alert: index % 8 == 0 ? alert : nil))
        }
        var bytes = 0
        let allocationsStarted = AllocationCounter.current()
        let cpuStarted = ThreadCPUClock.seconds()
        for index in 0..<count {
            bytes &+= events[index & 63].livePayload(defaultStaleAfter: 900).encoded().count
        }
        let cpu = ThreadCPUClock.seconds() - cpuStarted
        let allocations = AllocationCounter.report(since: allocationsStarted, per: count, unit: "send")
        Output.out(String(format: "payload: %d sends built and encoded (~%d bytes each): %.0f per CPU-second",
                          count, bytes / max(count, 1), Double(count) / cpu))
        Output.out("        \(allocations)")
    }
}
