import APNsModel

/// A `SendOutcome` without its strings: what kind, and the HTTP status when there was one.
public struct OutcomeSummary: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: UInt8, Sendable, Hashable {
        case delivered, tokenGone, retry, refreshAuth, badPayload, configError
    }
    public var kind: Kind
    /// HTTP status, or 0 for transport failures.
    public var status: Int16

    init(_ outcome: SendOutcome) {
        switch outcome {
        case .delivered: (kind, status) = (.delivered, 200)
        case let .tokenGone(_, code, _): (kind, status) = (.tokenGone, Int16(clamping: code))
        case let .retry(_, code, _): (kind, status) = (.retry, Int16(clamping: code ?? 0))
        case .refreshAuth: (kind, status) = (.refreshAuth, 403)
        case let .badPayload(_, code): (kind, status) = (.badPayload, Int16(clamping: code))
        case let .configError(_, code): (kind, status) = (.configError, Int16(clamping: code))
        }
    }

    public init(kind: Kind, status: Int16) {
        self.kind = kind
        self.status = status
    }

    public var description: String { status == 0 ? "\(kind)" : "\(kind) \(status)" }
}
