/// Where pushes go. docs/apns.md §1: production and sandbox hosts, port 443 or 2197; channel management
/// on its own hosts and ports.
public enum APNsEnvironment: String, Sendable, Hashable, CaseIterable {
    case production
    case sandbox

    public var pushHost: String {
        switch self {
        case .production: "api.push.apple.com"
        case .sandbox: "api.sandbox.push.apple.com"
        }
    }

    public var channelManagementHost: String {
        switch self {
        case .production: "api-manage-broadcast.push.apple.com"
        case .sandbox: "api-manage-broadcast.sandbox.push.apple.com"
        }
    }

    public var channelManagementPort: Int {
        switch self {
        case .production: 2196
        case .sandbox: 2195
        }
    }

    /// Whether `host` is one of Apple's push hosts (any name under `push.apple.com`: push, sandbox and
    /// development hosts, channel management, broadcast), case and a trailing dot aside. These are only
    /// ever verified against the system's CAs: no configuration may trust a custom CA for them.
    public static func isAppleHost(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        return name == "push.apple.com" || name.hasSuffix(".push.apple.com")
    }
}
