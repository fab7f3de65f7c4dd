import Foundation

/// The request headers the rules look at.
enum RequestHeader: Int, CaseIterable {
    case method, path, authorization, pushType, topic, priority, apnsID, expiration, collapseID, channelID, requestID

    /// Maps an HTTP/2 header name (already lowercase, as HTTP/2 requires) to a known header.
    static func named(_ name: UnsafeBufferPointer<UInt8>) -> RequestHeader? {
        guard let first = name.first else { return nil }
        switch first {
        case UInt8(ascii: ":"):
            if equals(name, ":path") { return .path }
            if equals(name, ":method") { return .method }
        case UInt8(ascii: "a"):
            if equals(name, "authorization") { return .authorization }
            if equals(name, "apns-topic") { return .topic }
            if equals(name, "apns-push-type") { return .pushType }
            if equals(name, "apns-priority") { return .priority }
            if equals(name, "apns-id") { return .apnsID }
            if equals(name, "apns-expiration") { return .expiration }
            if equals(name, "apns-collapse-id") { return .collapseID }
            if equals(name, "apns-channel-id") { return .channelID }
            if equals(name, "apns-request-id") { return .requestID }
        default:
            break
        }
        return nil
    }

    private static func equals(_ bytes: UnsafeBufferPointer<UInt8>, _ text: StaticString) -> Bool {
        guard bytes.count == text.utf8CodeUnitCount else { return false }
        return memcmp(bytes.baseAddress!, text.utf8Start, bytes.count) == 0
    }
}

/// One HTTP/2 request being received: known header values in a byte arena, plus the body.
///
/// A connection reuses these objects across streams (`reset()` keeps capacity), so a request in
/// steady state allocates nothing here. Owned by one event-loop thread.
final class RequestHead {
    private(set) var arena: [UInt8] = []
    private var starts = [Int](repeating: -1, count: RequestHeader.allCases.count)
    private var lengths = [Int](repeating: 0, count: RequestHeader.allCases.count)
    /// A known header arrived twice (→ 400 DuplicateHeaders).
    private(set) var duplicated: RequestHeader?
    private(set) var body: [UInt8] = []
    /// Bytes received in DATA frames, including any beyond `bodyLimit` that were not kept.
    private(set) var bodyLength = 0
    /// Bytes kept at most; more marks the body too large without buffering it.
    static let bodyLimit = 5121

    init() {
        arena.reserveCapacity(1024)
        body.reserveCapacity(1024)
    }

    func reset() {
        arena.removeAll(keepingCapacity: true)
        starts.withUnsafeMutableBufferPointer { $0.update(repeating: -1) }
        duplicated = nil
        body.removeAll(keepingCapacity: true)
        bodyLength = 0
    }

    func set(_ header: RequestHeader, _ value: UnsafeBufferPointer<UInt8>) {
        if starts[header.rawValue] >= 0 {
            if duplicated == nil { duplicated = header }
            return
        }
        starts[header.rawValue] = arena.count
        lengths[header.rawValue] = value.count
        arena.append(contentsOf: value)
    }

    func appendBody(_ chunk: UnsafeBufferPointer<UInt8>) {
        bodyLength += chunk.count
        let room = Self.bodyLimit - body.count
        if room > 0 { body.append(contentsOf: UnsafeBufferPointer(rebasing: chunk.prefix(room))) }
    }

    func has(_ header: RequestHeader) -> Bool { starts[header.rawValue] >= 0 }

    /// The header's byte range in `arena`, nil when absent.
    func range(_ header: RequestHeader) -> Range<Int>? {
        let start = starts[header.rawValue]
        return start < 0 ? nil : start..<(start + lengths[header.rawValue])
    }

    func string(_ header: RequestHeader) -> String? {
        range(header).map { String(decoding: arena[$0], as: UTF8.self) }
    }

    func value(_ header: RequestHeader, equals text: StaticString) -> Bool {
        guard let range = range(header), range.count == text.utf8CodeUnitCount else { return false }
        return arena.withUnsafeBufferPointer { memcmp($0.baseAddress! + range.lowerBound, text.utf8Start, range.count) == 0 }
    }

    func path(hasPrefix prefix: StaticString) -> Bool {
        guard let range = range(.path), range.count >= prefix.utf8CodeUnitCount else { return false }
        return arena.withUnsafeBufferPointer { memcmp($0.baseAddress! + range.lowerBound, prefix.utf8Start, prefix.utf8CodeUnitCount) == 0 }
    }

    func withValue<R>(_ header: RequestHeader, _ body: (UnsafeBufferPointer<UInt8>?) throws -> R) rethrows -> R {
        guard let range = range(header) else { return try body(nil) }
        return try arena.withUnsafeBufferPointer { try body(UnsafeBufferPointer(rebasing: $0[range])) }
    }
}
