/// The newest unsent state of one target and every input offset it stands for.
///
/// Latest state wins: merging a newer event keeps the newer state, carries the older offsets, and
/// keeps an alert from the replaced event when the newer one has none.
struct PendingUpdate: Sendable {
    var event: ActivityEvent
    var summary: ContentSummary
    /// Offsets (in the target's partition) completed when this state is delivered.
    var offsets: [Int64]
    /// A covered event was start, end, had an alert or said `importance: major`.
    var forcedMajor: Bool
    /// The newest event said `importance: minor` explicitly.
    var explicitMinor: Bool

    init(event: ActivityEvent, summary: ContentSummary, offset: Int64) {
        self.event = event
        self.summary = summary
        self.offsets = [offset]
        self.forcedMajor = event.kind != .update || event.alert != nil || event.importance == .major
        self.explicitMinor = event.importance == .minor && event.kind == .update && event.alert == nil
    }

    /// Result of folding a newer state into an older one.
    enum Merge {
        case merged
        /// A start that was never delivered met its end: nothing to show, everything is done.
        case cancelled
    }

    /// Folds `newer` (a later state of the same target) into `self`.
    mutating func absorb(_ newer: PendingUpdate) -> Merge {
        let older = self
        if older.event.kind == .start && newer.event.kind == .end { 
            offsets.append(contentsOf: newer.offsets)
            return .cancelled
        }
        self = newer
        offsets = older.offsets
        offsets.append(contentsOf: newer.offsets)
        forcedMajor = older.forcedMajor || newer.forcedMajor
        if event.alert == nil { event.alert = older.event.alert }
        if older.event.kind == .start && newer.event.kind == .update {
            // The activity does not exist yet: the start must still be sent, now carrying the newer state.
            event.kind = .start
            event.token = older.event.token
            event.attributes = older.event.attributes
            event.attributesType = older.event.attributesType
            event.inputPushToken = older.event.inputPushToken
            event.inputPushChannel = older.event.inputPushChannel
        }
        return .merged
    }
}
