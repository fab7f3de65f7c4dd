import APNsModel

/// One value of the compacted `activity-tokens` topic (docs/design.md §2):
/// `{"token":"<hex>","app":"…","environment":"production"|"sandbox","at":<seconds>}`,
/// keyed by the activity key (or push-to-start key). A `nil` value is a tombstone.
public struct TokenRecord: Sendable, Hashable {
    public enum Environment: String, Sendable, Hashable, CaseIterable {
        case production, sandbox
    }

    /// Decoded from the record's hex.
    public var token: PushToken
    public var app: String
    public var environment: Environment
    /// UNIX seconds when the app registered the token; a newer registration replaces an older one.
    public var at: Int64

    public init(token: PushToken, app: String, environment: Environment, at: Int64) {
        self.token = token
        self.app = app
        self.environment = environment
        self.at = at
    }

    /// What one activity-tokens message means.
    public enum Update: Sendable, Hashable {
        case register(TokenRecord)
        /// Kafka tombstone (null value): forget the key's token.
        case tombstone
        case rejected(EventRejection)
    }

    /// Whether a message value is a tombstone: Kafka's null value, which is not the same as empty bytes.
    public static func isTombstone(_ value: [UInt8]?) -> Bool { value == nil }

    /// Interprets one activity-tokens message value. `apps` as in `EventPolicy.apps` (empty: any bundle id;
    /// one app: `app` may be omitted).
    public static func update(from value: [UInt8]?, apps: Set<String>, maxBytes: Int = 4096) -> Update {
        guard let value else { return .tombstone }
        switch decode(value, apps: apps, maxBytes: maxBytes) {
        case let .success(record): return .register(record)
        case let .failure(rejection): return .rejected(rejection)
        }
    }

    private static let fieldNames = ["token", "app", "environment", "at"].map { Array($0.utf8) }

    public static func decode(_ value: [UInt8], apps: Set<String>, maxBytes: Int = 4096) -> Result<TokenRecord, EventRejection> {
        guard value.count <= maxBytes else {
            return .failure(EventRejection(.eventTooLarge, "the token record is \(value.count) bytes, over the \(maxBytes)-byte limit"))
        }
        return value.withUnsafeBufferPointer { bytes -> Result<TokenRecord, EventRejection> in
            do throws(EventRejection) {
                return .success(try decode(bytes, apps: apps))
            } catch {
                return .failure(error)
            }
        }
    }

    private static func decode(_ bytes: UnsafeBufferPointer<UInt8>, apps: Set<String>) throws(EventRejection) -> TokenRecord {
        let reader = try EventReader(bytes: bytes, policy: EventPolicy(apps: apps, maxEventBytes: bytes.count, maxDepth: 2))
        let document = reader.document
        guard document[0].kind == .object else {
            throw EventRejection(.notAnObject, "the token record is \(reader.kindName(0)); it must be a JSON object")
        }
        var slots: [Int?] = [nil, nil, nil, nil]
        try document.forEachMember(of: 0) { (name, value) throws(EventRejection) in
            guard let field = fieldNames.firstIndex(where: { document.stringEquals(name, $0, in: bytes) }) else {
                throw EventRejection(.unknownField, "unknown field \(EventReader.quoted(reader.string(name))) in a token record; allowed: token, app, environment, at")
            }
            if document[value].kind != .null { slots[field] = value }
        }
        guard let tokenNode = slots[0] else {
            throw EventRejection(.missingToken, "missing \"token\"; publish the activity's push token as hex")
        }
        let token = try reader.hexToken(tokenNode, field: "token")

        let app: String
        if let node = slots[1], let known = reader.known(node, in: apps) {
            app = known
        } else if let node = slots[1] {
            app = try reader.boundedString(node, maxBytes: 155, reason: .unknownApp, field: "app")
            if apps.isEmpty ? !EventReader.isBundleID(app) : !apps.contains(app) {
                throw EventRejection(.unknownApp, "\"app\" \(EventReader.quoted(app)) is not a configured bundle id")
            }
        } else if apps.count == 1, let only = apps.first {
            app = only
        } else {
            throw EventRejection(.missingApp, "missing \"app\"; set it to the bundle id the token belongs to")
        }

        guard let environmentNode = slots[2], reader.kind(environmentNode) == .string,
              let environment = Environment(rawValue: reader.string(environmentNode)) else {
            throw EventRejection(.invalidEnvironment, "\"environment\" must be \"production\" (TestFlight and App Store builds) or \"sandbox\" (development builds)")
        }

        guard let atNode = slots[3] else {
            throw EventRejection(.missingTimestamp, "missing \"at\"; set it to the UNIX seconds when the app registered the token")
        }
        let at = try reader.seconds(atNode, field: "at", invalid: .invalidTimestamp, milliseconds: .timestampInMilliseconds,
                                    latest: Int64.max, now: 0)
        return TokenRecord(token: token, app: app, environment: environment, at: at)
    }
}
