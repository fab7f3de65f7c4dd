/// How to tell a meaningful change from a minor one for one ActivityKit attributes type
/// (DESIGN.md §3 "Meaningful vs minor").
public struct MeaningProfile: Sendable, Hashable {
    /// Up to four top-level `content_state` fields that measure progress (e.g. `"done"`, `"fraction"`).
    /// A change only in these is minor until it moves by `minProgressDelta`.
    public var progressFields: [String]
    /// Absolute change (in the field's own units) of any progress field that makes a minor update worth sending.
    public var minProgressDelta: Double
    /// A held minor update is sent at the latest this long after the last delivered send.
    public var maxQuiet: Nanoseconds

    public static let maxProgressFields = 4

    public init(progressFields: [String] = [], minProgressDelta: Double = 0.05, maxQuiet: Nanoseconds = .seconds(30)) {
        precondition(progressFields.count <= Self.maxProgressFields, "at most \(Self.maxProgressFields) progress fields per attributes type")
        precondition(minProgressDelta >= 0 && maxQuiet >= 0)
        self.progressFields = progressFields
        self.minProgressDelta = minProgressDelta
        self.maxQuiet = maxQuiet
    }

    /// The content of an event reduced to what the meaning decision compares.
    func summarize(_ fields: [ContentField]) -> ContentSummary {
        var digest: UInt64 = 0
        var progress = SIMD4<Double>(repeating: .nan)
        for field in fields {
            if let slot = progressFields.firstIndex(of: field.name) {
                progress[slot] = field.number ?? .nan
                if field.number != nil { continue }
            }
            // Order-independent combination of (name, value digest) over the non-progress fields.
            digest = digest &+ Self.mix(Self.nameHash(field.name) ^ field.digest)
        }
        return ContentSummary(digest: digest, progress: progress)
    }

    /// Whether any progress field moved by at least `minProgressDelta` (or appeared) since `last`.
    func progressMoved(from last: SIMD4<Double>, to current: SIMD4<Double>) -> Bool {
        for index in 0..<progressFields.count {
            let new = current[index]
            guard !new.isNaN else { continue }
            let old = last[index]
            if old.isNaN || abs(new - old) >= minProgressDelta { return true }
        }
        return false
    }

    /// A field name's hash, eight bytes at a time over its contiguous UTF-8 (names are one or two words;
    /// iterating `String.UTF8View` byte by byte cost more than the rest of `summarize`). Only compared
    /// within this process.
    static func nameHash(_ name: String) -> UInt64 {
        if let hash = name.utf8.withContiguousStorageIfAvailable({ nameHash(UnsafeRawBufferPointer($0)) }) { return hash }
        var contiguous = name
        contiguous.makeContiguousUTF8()
        return contiguous.utf8.withContiguousStorageIfAvailable { nameHash(UnsafeRawBufferPointer($0)) }!
    }

    @inline(__always)
    private static func nameHash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var hash = 0xcbf2_9ce4_8422_2325 ^ UInt64(bytes.count)
        var index = 0
        while index + 8 <= bytes.count {
            hash = mix(hash ^ bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            index += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while index < bytes.count {
            tail |= UInt64(bytes[index]) << shift
            shift += 8
            index += 1
        }
        return mix(hash ^ tail)
    }

    static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

/// Digest of the non-progress fields plus the progress values (NaN where absent).
struct ContentSummary: Sendable, Hashable {
    var digest: UInt64
    var progress: SIMD4<Double>
}
