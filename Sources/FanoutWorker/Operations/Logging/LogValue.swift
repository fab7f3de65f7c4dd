import APNsModel
import FanoutCore

/// A typed log field value, written as the matching JSON type.
public enum LogValue: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
                      ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral, ExpressibleByStringInterpolation {
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    /// Written as seconds (a JSON number), e.g. `0.25`.
    case duration(Duration)
    /// Parts of a W3C trace context (`TraceParent`: its header, trace id or span id), written as they
    /// are: validated hex of at most 32 digits in a run, so never a push token or a JWT, and never
    /// redacted (a redacted trace id could not be joined to its trace). Made only from a `TraceParent`.
    case traceContext(String)
    /// Several trace contexts, as a JSON array of `traceparent` headers.
    case traceContexts([String])

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(Int64(value)) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }

    public static func int(_ value: Int) -> LogValue { .int(Int64(value)) }
    /// A push token, already reduced by `Redact.token`.
    public static func token(_ token: String) -> LogValue { .string(Redact.token(token)) }
    public static func traceID(_ trace: TraceParent) -> LogValue { .traceContext(trace.traceID) }
    public static func spanID(_ trace: TraceParent) -> LogValue { .traceContext(trace.spanID) }
    public static func traceParents(_ traces: [TraceParent]) -> LogValue { .traceContexts(traces.map(\.header)) }
    /// A push token held as bytes: only its redacted form is ever made.
    public static func token(_ token: PushToken) -> LogValue { .string(token.redacted) }
}
