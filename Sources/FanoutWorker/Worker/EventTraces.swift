import FanoutCore
import FanoutKafka

/// The producers' trace contexts of the events one send, dead letter or feedback record covers
/// (docs/design.md §12), read from the `traceparent` headers of their records, newest last.
///
/// Bounded: at most `maxLinks` contexts, those of the newest events; `unlisted` counts the covered
/// events not looked at beyond them. Records without a valid `traceparent` add nothing.
struct EventTraces: Sendable, Equatable {
    static let maxLinks = 16
    /// Header listing every context a record Fanout produces covers, comma-separated, when it covers more than one.
    static let linksHeader = "fanout-trace-links"

    private(set) var traces: [TraceParent] = []
    private(set) var unlisted = 0

    var isEmpty: Bool { traces.isEmpty }

    static func of(_ message: KafkaMessage) -> TraceParent? {
        guard let value = message.header(TraceParent.headerName)?.value else { return nil }
        return TraceParent(header: value)
    }

    /// From records at hand, oldest first.
    init(_ messages: [KafkaMessage]) {
        self.init(events: messages.count) { Self.of(messages[$0]) }
    }

    /// From the retained records of `offsets` (oldest first) in their partition: what a send or a
    /// pending state covers.
    init(offsets: [Int64], in retained: RetainedMessages?) {
        self.init(events: retained == nil ? 0 : offsets.count) { retained?.message(at: offsets[$0]).flatMap(Self.of) }
    }

    /// Walks `events` events newest first, reading each one's context (`trace(index)`), and stops
    /// once `maxLinks` are found: no more records are looked at than that takes.
    private init(events: Int, trace: (Int) -> TraceParent?) {
        var newestFirst: [TraceParent] = []
        for index in stride(from: events - 1, through: 0, by: -1) {
            guard newestFirst.count < Self.maxLinks else { unlisted = index + 1; break }
            if let found = trace(index) { newestFirst.append(found) }
        }
        traces = newestFirst.reversed()
    }

    /// Log fields: the newest event's `trace_id` and `span_id` (its producer's span), and, when more
    /// than one event is traced, `trace_links` with every listed context (and `trace_links_unlisted`).
    var logFields: [(String, LogValue)] {
        guard let newest = traces.last else { return [] }
        var fields: [(String, LogValue)] = [("trace_id", .traceID(newest)), ("span_id", .spanID(newest))]
        if traces.count > 1 || unlisted > 0 { fields.append(("trace_links", .traceParents(traces))) }
        if unlisted > 0 { fields.append(("trace_links_unlisted", .int(unlisted))) }
        return fields
    }

    /// Headers for a record Fanout produces on behalf of these events: `traceparent` of the newest
    /// event, so a consumer of the record continues its trace, and `fanout-trace-links` with every
    /// listed context when there are several.
    var headers: [KafkaHeader] {
        guard let newest = traces.last else { return [] }
        var headers = [KafkaHeader(name: TraceParent.headerName, string: newest.header)]
        if traces.count > 1 { headers.append(KafkaHeader(name: Self.linksHeader, string: traces.map(\.header).joined(separator: ","))) }
        return headers
    }
}
