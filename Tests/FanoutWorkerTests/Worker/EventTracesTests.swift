import FanoutCore
import FanoutKafka
import Foundation
import Testing
@testable import FanoutWorker

/// Which trace contexts a send, dead letter or feedback record names, and how (docs/design.md §12).
@Suite struct EventTracesTests {
    static func trace(_ index: Int) -> String {
        "00-" + String(format: "%032x", 0x7000 + index) + "-" + String(format: "%016x", 0x100 + index) + "-01"
    }

    static func message(_ offset: Int64, trace: String?) -> KafkaMessage {
        KafkaMessage(topic: "activity-updates", partition: 0, offset: offset, key: Array("k".utf8), value: Array("{}".utf8),
                     headers: trace.map { [KafkaHeader(name: "traceparent", string: $0)] } ?? [KafkaHeader(name: "other", string: "x")])
    }

    @Test func oneTracedEventGivesItsIdsAndNoLinks() {
        let traces = EventTraces([Self.message(4, trace: Self.trace(1))])
        #expect(traces.logFields.map(\.0) == ["trace_id", "span_id"])
        #expect(traces.logFields.first?.1 == .traceContext(String(format: "%032x", 0x7001)))
        #expect(traces.headers == [KafkaHeader(name: "traceparent", string: Self.trace(1))])
    }

    @Test func severalAreLinkedNewestLastAndUntracedOrInvalidOnesAddNothing() {
        let messages = [Self.message(1, trace: Self.trace(1)), Self.message(2, trace: nil),
                        Self.message(3, trace: "not a traceparent"), Self.message(4, trace: Self.trace(4))]
        let traces = EventTraces(messages)
        #expect(traces.traces.map(\.header) == [Self.trace(1), Self.trace(4)])
        #expect(traces.logFields.first?.1 == .traceContext(String(format: "%032x", 0x7004)), "the newest event's trace")
        #expect(traces.logFields.map(\.0) == ["trace_id", "span_id", "trace_links"])
        #expect(traces.headers == [KafkaHeader(name: "traceparent", string: Self.trace(4)),
                                   KafkaHeader(name: "fanout-trace-links", string: Self.trace(1) + "," + Self.trace(4))])
        #expect(EventTraces([Self.message(9, trace: nil)]).isEmpty)
        #expect(EventTraces([Self.message(9, trace: nil)]).logFields.isEmpty)
        #expect(EventTraces([Self.message(9, trace: nil)]).headers.isEmpty)
    }

    @Test func aSendCoveringThousandsListsTheNewestSixteenAndLooksNoFurther() {
        var retained = RetainedMessages()
        for offset in Int64(0)..<5000 { retained.append(Self.message(offset, trace: Self.trace(Int(offset)))) }
        let traces = EventTraces(offsets: Array(0..<5000), in: retained)
        #expect(traces.traces.count == EventTraces.maxLinks)
        #expect(traces.traces.map(\.header) == (4984..<5000).map { Self.trace($0) })
        #expect(traces.unlisted == 4984)
        let fields = Dictionary(uniqueKeysWithValues: traces.logFields)
        #expect(fields["trace_links_unlisted"] == .int(4984))
        // Offsets no longer retained (revoked, pruned) give nothing.
        #expect(EventTraces(offsets: [6000, 6001], in: retained).isEmpty)
        #expect(EventTraces(offsets: [1], in: nil).isEmpty)
    }

    @Test func logLinesCarryTraceIdsUnredactedAndLinksAsAnArray() throws {
        let traces = EventTraces([Self.message(1, trace: Self.trace(1)), Self.message(2, trace: Self.trace(2))])
        let line = Log.format(time: Date(timeIntervalSince1970: 0), level: .info, message: "send completed", context: [],
                              fields: ["key": "k"], more: traces.logFields)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        // 32 hex digits would be masked as a push token in free text; a trace id must stay whole to join its trace.
        #expect(object["trace_id"] as? String == String(format: "%032x", 0x7002), "\(line)")
        #expect(object["trace_links"] as? [String] == [Self.trace(1), Self.trace(2)], "\(line)")
    }
}
