/// How to tell a meaningful change from a minor one for one ActivityKit attributes type
/// (docs/design.md §3 "Meaningful vs minor"; README "Configuration", `engine.progress_fields`).
public struct MeaningProfile: Sendable, Hashable {
    /// Top-level `content_state` fields that measure progress (e.g. `"done"`, `"fraction"`), by precedence.
    /// Of those present in one event with a number, the first `progressSlots` by this order are progress:
    /// a change only in them is minor until one moves by `minProgressDelta`. Any further ones count as
    /// ordinary fields, so their change is never lost.
    public let progressFields: [String]
    /// Absolute change (in the field's own units) of any progress field that makes a minor update worth sending.
    public var minProgressDelta: Double
    /// A held minor update is sent at the latest this long after the last delivered send.
    public var maxQuiet: Nanoseconds
    /// `nameHash` of each progress field, in the same order: a field's name is compared by its hash first.
    private let progressFieldHashes: [UInt64]

    /// Progress values one event carries (four inline values, so the summary stays allocation-free).
    public static let progressSlots = 4
    /// Longest list of progress fields a profile takes.
    public static let maxProgressFields = 32

    /// The progress-like fields of the README's stories (an export's completed units or fraction, a
    /// delivery's progress and ETA, a recording's distance and duration, a match's minute); the
    /// default `engine.progress_fields."*"`.
    public static let standardProgressFields = [
        "progress", "percent", "fraction", "completed", "done", "distance", "duration", "elapsed",
        "remaining", "eta", "eta_minutes", "minute",
    ]

    public init(progressFields: [String] = [], minProgressDelta: Double = 0.05, maxQuiet: Nanoseconds = .seconds(30)) {
        precondition(progressFields.count <= Self.maxProgressFields, "at most \(Self.maxProgressFields) progress fields per attributes type")
        precondition(minProgressDelta >= 0 && maxQuiet >= 0)
        self.progressFields = progressFields
        self.progressFieldHashes = progressFields.map(Self.nameHash)
        self.minProgressDelta = minProgressDelta
        self.maxQuiet = maxQuiet
    }

    /// The content of an event reduced to what the meaning decision compares.
    func summarize(_ fields: [ContentField]) -> ContentSummary {
        var summary = ContentSummary.empty
        // Digest contribution of the field in each slot, added back when a field of higher precedence displaces it.
        var slotDigests = SIMD4<UInt64>(repeating: 0)
        for field in fields {
            let nameHash = Self.nameHash(field.name)
            // Order-independent combination of (name, value digest) over the non-progress fields.
            let contribution = Self.mix(nameHash ^ field.digest)
            if let number = field.number, let rank = progressRank(of: field.name, hash: nameHash), rank < summary.ranks[3] {
                if summary.ranks[3] != ContentSummary.noField { summary.digest = summary.digest &+ slotDigests[3] }
                var slot = 3
                while slot > 0 && summary.ranks[slot - 1] > rank {
                    summary.ranks[slot] = summary.ranks[slot - 1]
                    summary.progress[slot] = summary.progress[slot - 1]
                    slotDigests[slot] = slotDigests[slot - 1]
                    slot -= 1
                }
                summary.ranks[slot] = rank
                summary.progress[slot] = number
                slotDigests[slot] = contribution
                continue
            }
            summary.digest = summary.digest &+ contribution
        }
        return summary
    }

    /// The field's position in `progressFields`, nil when it is not a progress field.
    @inline(__always)
    private func progressRank(of name: String, hash: UInt64) -> UInt8? {
        for index in progressFieldHashes.indices where progressFieldHashes[index] == hash && progressFields[index] == name {
            return UInt8(truncatingIfNeeded: index)
        }
        return nil
    }

    /// Whether any progress field moved by at least `minProgressDelta` (or appeared) since `last`.
    func progressMoved(from last: ContentSummary, to current: ContentSummary) -> Bool {
        for slot in 0..<Self.progressSlots {
            let rank = current.ranks[slot]
            guard rank != ContentSummary.noField else { break }  // slots fill from the first
            var old = Double.nan
            if last.ranks[slot] == rank {
                old = last.progress[slot]
            } else {
                for lastSlot in 0..<Self.progressSlots where last.ranks[lastSlot] == rank { old = last.progress[lastSlot] }
            }
            if old.isNaN || abs(current.progress[slot] - old) >= minProgressDelta { return true }
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

/// Digest of the non-progress fields, and the values of up to four progress fields with the rank
/// (position in the profile's list) of the field in each slot; slots fill in rank order, `noField` after.
struct ContentSummary: Sendable, Hashable {
    var digest: UInt64
    var progress: ProgressValues
    /// Last, so the 4 bytes after it in `TargetState` can hold a field of its own instead of padding.
    var ranks: SIMD4<UInt8>

    init(digest: UInt64, ranks: SIMD4<UInt8>, progress: ProgressValues) {
        self.digest = digest
        self.progress = progress
        self.ranks = ranks
    }

    static let noField = UInt8.max
    static let empty = ContentSummary(digest: 0, ranks: SIMD4(repeating: noField), progress: ProgressValues(repeating: .nan))
}

/// Four progress values, indexed like a `SIMD4<Double>` but aligned to 8 bytes, not 16: inside
/// `TargetState` a 16-byte alignment rounded every target record up to a multiple of 16 bytes.
struct ProgressValues: Sendable, Hashable {
    private var v0, v1, v2, v3: Double

    init(repeating value: Double) { (v0, v1, v2, v3) = (value, value, value, value) }

    subscript(slot: Int) -> Double {
        get {
            switch slot {
            case 0: v0
            case 1: v1
            case 2: v2
            default: v3
            }
        }
        set {
            switch slot {
            case 0: v0 = newValue
            case 1: v1 = newValue
            case 2: v2 = newValue
            default: v3 = newValue
            }
        }
    }
}
