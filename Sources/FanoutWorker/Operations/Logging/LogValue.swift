import APNsModel

/// A typed log field value, written as the matching JSON type.
public enum LogValue: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
                      ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral, ExpressibleByStringInterpolation {
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    /// Written as seconds (a JSON number), e.g. `0.25`.
    case duration(Duration)

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(Int64(value)) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }

    public static func int(_ value: Int) -> LogValue { .int(Int64(value)) }
    /// A push token, already reduced by `Redact.token`.
    public static func token(_ token: String) -> LogValue { .string(Redact.token(token)) }
    /// A push token held as bytes: only its redacted form is ever made.
    public static func token(_ token: PushToken) -> LogValue { .string(token.redacted) }
}
