/// The parts of a Live Activity push body the simulator checks and records, located by byte range.
///
/// Rules (docs/apns.md §4): `aps` object; `timestamp` a positive number of *seconds*; `event` one of
/// start/update/end; `content-state` an object; `start` also needs `attributes-type` (string),
/// `attributes` (object) and `alert`; dates in seconds; broadcasts cannot start an activity.
/// Apple accepts such mistakes with 200 and the device drops the push silently; the simulator refuses
/// them with 400 BadRequestPayload and a `detail`, so tests catch them.
struct LiveActivityPayload: Equatable {
    enum Event: String { case start, update, end }

    var event: Event
    var timestamp: Double
    var aps: Range<Int>
    var contentState: Range<Int>

    /// ActivityKit: "The dynamic data of a Live Activity that's encoded by ContentState can't exceed 4KB."
    static let contentStateLimit = 4096

    /// Seconds since the epoch at or above this are almost certainly milliseconds (year 5138+).
    static let millisecondsThreshold: Double = 100_000_000_000

    static func parse(_ body: UnsafeBufferPointer<UInt8>, isBroadcast: Bool) -> Result<LiveActivityPayload, Refusal> {
        do {
            return .success(try scan(body, isBroadcast: isBroadcast))
        } catch let failure as JSONScanner.Failure {
            return .failure(Refusal(.badRequestPayload, "invalid JSON at byte \(failure.offset): \(failure.message)"))
        } catch let refusal as Refusal {
            return .failure(refusal)
        } catch {
            return .failure(Refusal(.badRequestPayload, "\(error)"))
        }
    }

    private static func scan(_ body: UnsafeBufferPointer<UInt8>, isBroadcast: Bool) throws -> LiveActivityPayload {
        var scanner = JSONScanner(body)
        scanner.skipWhitespace()
        guard scanner.index < body.count, body[scanner.index] == UInt8(ascii: "{") else {
            throw Refusal(.badRequestPayload, "the body must be a JSON object")
        }
        var fields = ApsFields()
        var apsRange: Range<Int>?
        try scanner.members(depth: 0) { scanner, key in
            if scanner.keyEquals(key, "aps") {
                guard apsRange == nil else { throw Refusal(.badRequestPayload, "duplicate key aps") }
                let start = scanner.index
                guard start < body.count, body[start] == UInt8(ascii: "{") else {
                    throw Refusal(.badRequestPayload, "aps must be an object")
                }
                try fields.scan(&scanner)
                apsRange = start..<scanner.index
            } else {
                try scanner.value(depth: 1)
            }
        }
        try scanner.expectEnd()
        guard let aps = apsRange else { throw Refusal(.badRequestPayload, "missing aps") }
        return try fields.validated(aps: aps, isBroadcast: isBroadcast, scanner: scanner)
    }
}

/// The `aps` members collected during one scan.
private struct ApsFields {
    var timestamp: Range<Int>?
    var event: Range<Int>?
    var contentState: Range<Int>?
    var attributesType: Range<Int>?
    var attributes: Range<Int>?
    var alert: Range<Int>?
    var staleDate: Range<Int>?
    var dismissalDate: Range<Int>?
    var relevanceScore: Range<Int>?
    var inputPushToken: Range<Int>?
    var inputPushChannel: Range<Int>?

    mutating func scan(_ scanner: inout JSONScanner) throws {
        try scanner.members(depth: 1) { scanner, key in
            let start = scanner.index
            let kind = try scanner.value(depth: 2)
            let range = start..<scanner.index
            // Not variadic: a variadic parameter would allocate an array per member.
            func take(_ slot: inout Range<Int>?, _ name: StaticString, _ expected: JSONScanner.Kind,
                      or alternative: JSONScanner.Kind? = nil) throws {
                guard slot == nil else { throw Refusal(.badRequestPayload, "duplicate key aps.\(name)") }
                guard kind == expected || kind == alternative else {
                    throw Refusal(.badRequestPayload, "aps.\(name) has the wrong type")
                }
                slot = range
            }
            if scanner.keyEquals(key, "timestamp") { try take(&timestamp, "timestamp", .number) }
            else if scanner.keyEquals(key, "event") { try take(&event, "event", .string) }
            else if scanner.keyEquals(key, "content-state") { try take(&contentState, "content-state", .object) }
            else if scanner.keyEquals(key, "attributes-type") { try take(&attributesType, "attributes-type", .string) }
            else if scanner.keyEquals(key, "attributes") { try take(&attributes, "attributes", .object) }
            else if scanner.keyEquals(key, "alert") { try take(&alert, "alert", .object, or: .string) }
            else if scanner.keyEquals(key, "stale-date") { try take(&staleDate, "stale-date", .number) }
            else if scanner.keyEquals(key, "dismissal-date") { try take(&dismissalDate, "dismissal-date", .number) }
            else if scanner.keyEquals(key, "relevance-score") { try take(&relevanceScore, "relevance-score", .number) }
            else if scanner.keyEquals(key, "input-push-token") { try take(&inputPushToken, "input-push-token", .number) }
            else if scanner.keyEquals(key, "input-push-channel") { try take(&inputPushChannel, "input-push-channel", .string) }
        }
    }

    private static func checkDate(_ range: Range<Int>?, _ name: StaticString, _ scanner: JSONScanner) throws {
        guard let range else { return }
        guard let value = scanner.double(range), value >= 0 else {
            throw Refusal(.badRequestPayload, "aps.\(name) must be a non-negative number of seconds")
        }
        guard value < LiveActivityPayload.millisecondsThreshold else {
            throw Refusal(.badRequestPayload, "aps.\(name) looks like milliseconds; APNs expects seconds")
        }
    }

    func validated(aps: Range<Int>, isBroadcast: Bool, scanner: JSONScanner) throws -> LiveActivityPayload {
        guard let timestampRange = timestamp else { throw Refusal(.badRequestPayload, "missing aps.timestamp") }
        guard let seconds = scanner.double(timestampRange), seconds > 0 else {
            throw Refusal(.badRequestPayload, "aps.timestamp must be a positive number of seconds")
        }
        guard seconds < LiveActivityPayload.millisecondsThreshold else {
            throw Refusal(.badRequestPayload, "aps.timestamp looks like milliseconds; APNs expects seconds")
        }
        guard let eventRange = event else { throw Refusal(.badRequestPayload, "missing aps.event") }
        let name = eventRange.count >= 2 ? scanner.text((eventRange.lowerBound + 1)..<(eventRange.upperBound - 1)) : ""
        guard let event = LiveActivityPayload.Event(rawValue: name) else {
            throw Refusal(.badRequestPayload, "aps.event must be start, update or end")
        }
        guard let contentState else { throw Refusal(.badRequestPayload, "missing aps.content-state") }
        if contentState.count > LiveActivityPayload.contentStateLimit {
            // Only a broadcast (5 KB body) can get here with it: a device push's whole body is 4 KB at most.
            throw Refusal(.badRequestPayload, "aps.content-state is \(contentState.count) bytes; ActivityKit's content state can't exceed 4 KB, the device would drop it")
        }
        try Self.checkDate(staleDate, "stale-date", scanner)
        try Self.checkDate(dismissalDate, "dismissal-date", scanner)
        if let inputPushToken, scanner.double(inputPushToken) != 1 {
            throw Refusal(.badRequestPayload, "aps.input-push-token must be 1")
        }
        if event == .start {
            if isBroadcast { throw Refusal(.badRequestPayload, "a broadcast cannot start a Live Activity") }
            guard let attributesType, attributesType.count > 2 else {
                throw Refusal(.badRequestPayload, "start requires aps.attributes-type")
            }
            guard attributes != nil else { throw Refusal(.badRequestPayload, "start requires aps.attributes") }
            guard alert != nil else { throw Refusal(.badRequestPayload, "start requires aps.alert") }
        } else if attributesType != nil || attributes != nil || inputPushToken != nil || inputPushChannel != nil {
            throw Refusal(.badRequestPayload, "attributes-type, attributes and input-push-* belong only to start")
        }
        return LiveActivityPayload(event: event, timestamp: seconds, aps: aps, contentState: contentState)
    }
}
