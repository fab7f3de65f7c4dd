public enum LogLevel: String, Sendable, Hashable, CaseIterable, Comparable {
    case trace, debug, info, warning, error

    var rank: Int {
        switch self {
        case .trace: 0
        case .debug: 1
        case .info: 2
        case .warning: 3
        case .error: 4
        }
    }

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rank < rhs.rank }
}
