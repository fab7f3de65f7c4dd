import APNsModel

/// Typed, rejection-producing reads over one parsed event. Lives only for one `decode` call:
/// it borrows the caller's buffer.
struct EventReader {
    let bytes: UnsafeBufferPointer<UInt8>
    let document: JSONDocument

    /// Node index of each top-level field that is present and not `null`.
    struct Fields {
        fileprivate var slots = InlineArray<18, Int32>(repeating: -1)

        subscript(_ field: EventField) -> Int? {
            let slot = slots[field.rawValue]
            return slot < 0 ? nil : Int(slot)
        }
    }

    init(bytes: UnsafeBufferPointer<UInt8>, policy: EventPolicy) throws(EventRejection) {
        self.bytes = bytes
        do {
            document = try JSONReader.read(bytes, limits: .init(maxDepth: policy.maxDepth, maxStringBytes: policy.maxEventBytes))
        } catch {
            throw Self.rejection(for: error)
        }
    }

    static func rejection(for error: JSONReadError) -> EventRejection {
        let at = "at byte \(error.offset)"
        switch error.code {
        case .malformed, .numberOutOfRange, .stringTooLong:
            return EventRejection(.malformedJSON, "not valid JSON \(at): \(error.message)")
        case .invalidUTF8:
            return EventRejection(.invalidUTF8, "not valid UTF-8 \(at): \(error.message); events must be UTF-8 JSON")
        case .tooDeep:
            return EventRejection(.tooDeep, "JSON \(at) is \(error.message); flatten content_state or attributes")
        case .duplicateKey:
            return EventRejection(.duplicateKey, "\(error.message) \(at); each member may appear once per object")
        }
    }

    func topLevelFields() throws(EventRejection) -> Fields {
        guard document[0].kind == .object else {
            throw EventRejection(.notAnObject, "the event is \(kindName(0)); it must be a JSON object")
        }
        var fields = Fields()
        try document.forEachMember(of: 0) { (name, value) throws(EventRejection) in
            let nameNode = document[name]
            let field: EventField?
            if nameNode.flag {
                field = EventField.allCases.first { document.stringEquals(name, EventField.names[$0.rawValue], in: bytes) }
            } else {
                field = EventField.match(bytes, (Int(nameNode.start) + 1)..<(Int(nameNode.end) - 1))
            }
            guard let field else {
                throw EventRejection(.unknownField, "unknown field \(Self.quoted(document.string(name, in: bytes))); v1 events accept only \(EventField.allCases.map(\.name).joined(separator: ", ")). Check the spelling or remove it")
            }
            if document[value].kind != .null { fields.slots[field.rawValue] = Int32(truncatingIfNeeded: value) }
        }
        return fields
    }

    func kind(_ node: Int) -> JSONNode.Kind { document[node].kind }
    func string(_ node: Int) -> String { document.string(node, in: bytes) }
    func integer(_ node: Int) -> Int64? { document.integer(node, in: bytes) }
    func double(_ node: Int) -> Double { document.double(node, in: bytes) }
    func raw(_ node: Int) -> [UInt8] { document.raw(node, in: bytes) }

    /// The one of `names` equal to the string at `node` (written without escapes), so a known value is
    /// reused instead of decoded into a new `String`; nil when none is, or the string has escapes.
    func known(_ node: Int, in names: Set<String>) -> String? {
        let value = document[node]
        guard value.kind == .string, !value.flag else { return nil }
        let text = UnsafeBufferPointer(rebasing: bytes[(Int(value.start) + 1)..<(Int(value.end) - 1)])
        for name in names {
            var name = name
            if name.withUTF8({ $0.elementsEqual(text) }) { return name }
        }
        return nil
    }

    /// The value paired with the string at `node`, when the string equals one of the names.
    func oneOf<Value>(_ node: Int, _ choices: [(name: [UInt8], value: Value)]) -> Value? {
        guard kind(node) == .string else { return nil }
        for choice in choices where document.stringEquals(node, choice.name, in: bytes) { return choice.value }
        return nil
    }

    func kindName(_ node: Int) -> String {
        switch document[node].kind {
        case .object: "an object"
        case .array: "an array"
        case .string: "a string"
        case .number: "a number"
        case .true, .false: "a boolean"
        case .null: "null"
        }
    }

    /// The value's raw text, shortened, for messages.
    func excerpt(_ node: Int) -> String {
        let range = document[node].range
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[range.lowerBound..<min(range.upperBound, range.lowerBound + 40)]), as: UTF8.self)
        return range.count > 40 ? text + "…" : text
    }

    static func quoted(_ text: String) -> String {
        let shortened = text.utf8.count > 64 ? String(text.prefix(48)) + "…" : text
        return "\"" + shortened + "\""
    }

    func boundedString(_ node: Int, maxBytes: Int, reason: RejectionReason, field: String) throws(EventRejection) -> String {
        guard kind(node) == .string else {
            throw EventRejection(reason, "\"\(field)\" is \(kindName(node)); it must be a non-empty string")
        }
        let value = string(node)
        guard !value.isEmpty, value.utf8.count <= maxBytes else {
            throw EventRejection(reason, "\"\(field)\" must be a non-empty string of at most \(maxBytes) bytes")
        }
        return value
    }

    /// A UNIX-seconds date: a positive integer, not milliseconds, not later than `latest`.
    func seconds(_ node: Int, field: String, invalid: RejectionReason, milliseconds: RejectionReason,
                 latest: Int64, now: Int64) throws(EventRejection) -> Int64 {
        guard kind(node) == .number, document[node].flag else {
            throw EventRejection(invalid, "\"\(field)\" is \(excerpt(node)); it must be a whole number of UNIX seconds")
        }
        // Integers too long for Int64 are far past any seconds value, so they fall in the same bucket.
        let value = integer(node) ?? Int64.max
        if value > 100_000_000_000 {
            throw EventRejection(milliseconds, "\"\(field)\" \(excerpt(node)) looks like milliseconds; send UNIX seconds (divide by 1000)")
        }
        guard value > 0 else {
            throw EventRejection(invalid, "\"\(field)\" is \(value); it must be a positive number of UNIX seconds")
        }
        if value > latest {
            throw EventRejection(.dateTooFarAhead, "\"\(field)\" \(value) is more than \(latest.subtractingReportingOverflow(now).partialValue) s after now (\(now)); iOS drops Live Activity dates more than 8 h out, so send the time the state changed")
        }
        return value
    }

    /// A push token: even-length hex (at most 1024 digits), decoded to its bytes here, once.
    func hexToken(_ node: Int, field: String) throws(EventRejection) -> PushToken {
        guard kind(node) == .string, !document[node].flag else {
            throw EventRejection(.invalidToken, "\"\(field)\" must be the push token as a hex string")
        }
        let range = (Int(document[node].start) + 1)..<(Int(document[node].end) - 1)
        guard !range.isEmpty, range.count % 2 == 0, range.count <= 2 * PushToken.maxBytes else {
            throw EventRejection(.invalidToken, "\"\(field)\" has \(range.count) characters; a push token is an even number of hex digits (at most \(2 * PushToken.maxBytes))")
        }
        // Decoding checks every digit; the scan for the offending one runs only when it fails.
        if let token = PushToken(hexUTF8: UnsafeBufferPointer(rebasing: bytes[range])) { return token }
        let position = range.first { JSONDocument.hexValue(bytes[$0]) == nil }.map { $0 - range.lowerBound } ?? 0
        throw EventRejection(.invalidToken, "\"\(field)\" contains a non-hex character at position \(position); send the token as hex, not base64")
    }

    private static let title = Array("title".utf8), body = Array("body".utf8), sound = Array("sound".utf8)
    private static let locKey = Array("loc-key".utf8), locArgs = Array("loc-args".utf8)

    /// `alert`: an object with `title` and `body` (each a string or `{"loc-key", "loc-args"}`) and
    /// an optional `sound` (a name, or the critical-sound object); nothing else.
    func validateAlert(_ node: Int) throws(EventRejection) {
        guard kind(node) == .object else {
            throw EventRejection(.invalidAlert, "\"alert\" is \(kindName(node)); it must be an object with \"title\" and \"body\"")
        }
        var hasTitle = false, hasBody = false
        try document.forEachMember(of: node) { (name, value) throws(EventRejection) in
            if document.stringEquals(name, Self.title, in: bytes) {
                try validateAlertText(value, field: "title")
                hasTitle = true
            } else if document.stringEquals(name, Self.body, in: bytes) {
                try validateAlertText(value, field: "body")
                hasBody = true
            } else if document.stringEquals(name, Self.sound, in: bytes) {
                guard kind(value) == .string || kind(value) == .object else {
                    throw EventRejection(.invalidAlert, "\"alert.sound\" is \(kindName(value)); it must be a sound name such as \"default\"")
                }
            } else {
                throw EventRejection(.invalidAlert, "\"alert\" has unknown member \(Self.quoted(string(name))); allowed: title, body, sound")
            }
        }
        guard hasTitle, hasBody else {
            throw EventRejection(.invalidAlert, "\"alert\" needs both \"title\" and \"body\" (iOS ignores a Live Activity alert without a title)")
        }
    }

    private func validateAlertText(_ node: Int, field: String) throws(EventRejection) {
        switch kind(node) {
        case .string: return
        case .object:
            var hasKey = false
            try document.forEachMember(of: node) { (name, value) throws(EventRejection) in
                if document.stringEquals(name, Self.locKey, in: bytes), kind(value) == .string {
                    hasKey = true
                } else if document.stringEquals(name, Self.locArgs, in: bytes), kind(value) == .array {
                    var element = value + 1
                    while element < document[value].next {
                        guard kind(element) == .string else {
                            throw EventRejection(.invalidAlert, "\"alert.\(field).loc-args\" must be an array of strings")
                        }
                        element = document[element].next
                    }
                } else {
                    throw EventRejection(.invalidAlert, "\"alert.\(field)\" localized form takes \"loc-key\" (string) and \"loc-args\" (array of strings) only")
                }
            }
            guard hasKey else { throw EventRejection(.invalidAlert, "\"alert.\(field)\" localized form needs \"loc-key\"") }
        default:
            throw EventRejection(.invalidAlert, "\"alert.\(field)\" is \(kindName(node)); it must be a string or {\"loc-key\", \"loc-args\"}")
        }
    }

    /// One `ContentField` per top-level member of `content_state`.
    func contentFields(_ node: Int) -> [ContentField] {
        var fields: [ContentField] = []
        fields.reserveCapacity(Int(document[node].count))
        document.forEachMember(of: node) { name, value in
            fields.append(ContentField(name: string(name), digest: document.digest(value, in: bytes),
                                       number: kind(value) == .number ? double(value) : nil))
        }
        return fields
    }

    /// Standard base64 with padding, as APNs writes channel ids.
    static func isBase64(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard !utf8.isEmpty, utf8.count % 4 == 0 else { return false }
        var padding = 0
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "="): padding += 1
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"):
                if padding > 0 { return false }
            default: return false
            }
        }
        return padding <= 2
    }

    static func isBundleID(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard !utf8.isEmpty, utf8.count <= 155 else { return false }
        return utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"): true
            default: false
            }
        }
    }
}
