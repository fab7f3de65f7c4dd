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
    /// aps.timestamp of the first start sent for this state without a 200 in answer, or nil when its start
    /// was never sent. Such a start may have reached the device (the answer can be lost after the
    /// request was written), so it is never cancelled by its end.
    var startAttemptTimestamp: Int64?

    init(event: ActivityEvent, summary: ContentSummary, offset: Int64) {
        self.event = event
        self.summary = summary
        // Room for a few coalesced events up front: growing one element at a time reallocated on the
        // second and third event of most pending states.
        var offsets: [Int64] = []
        offsets.reserveCapacity(4)
        offsets.append(offset)
        self.offsets = offsets
        self.forcedMajor = event.kind != .update || event.alert != nil || event.importance == .major
        self.explicitMinor = event.importance == .minor && event.kind == .update && event.alert == nil
    }

    /// What the send decision reads, as plain values.
    var facts: PendingFacts {
        PendingFacts(kind: event.kind, summary: summary, forcedMajor: forcedMajor, explicitMinor: explicitMinor)
    }

    /// Result of folding a newer state into an older one.
    enum Merge: Equatable {
        case merged
        /// A start that was never sent met its end: nothing to show, everything is done.
        case cancelled
        /// A start that was sent without a 200 met its end: the end replaces it and must reach the
        /// activity's own token (registered at or after `startTimestamp`), as the device may show the activity.
        case endsPossiblyStartedActivity(startTimestamp: Int64)
    }

    /// Marks a start as sent without a 200 (before it is put back as pending).
    mutating func startWasAttempted() {
        if event.kind == .start && startAttemptTimestamp == nil { startAttemptTimestamp = event.timestamp }
    }

    /// Folds `newer` (a later state of the same target) into `self`.
    mutating func absorb(_ newer: PendingUpdate) -> Merge {
        offsets.append(contentsOf: newer.offsets)
        return absorb(newer.event, summary: newer.summary, offset: nil,
               forcedMajor: newer.forcedMajor, explicitMinor: newer.explicitMinor)
    }

    /// Folds one newer event into `self`, in place (the hot path: no copy of the pending state).
    mutating func absorb(_ newer: ActivityEvent, summary newerSummary: ContentSummary, offset: Int64) -> Merge {
        absorb(newer, summary: newerSummary, offset: offset,
               forcedMajor: newer.kind != .update || newer.alert != nil || newer.importance == .major,
               explicitMinor: newer.importance == .minor && newer.kind == .update && newer.alert == nil)
    }

    /// `offset`: the newer event's own offset (nil when the caller appended the newer offsets already).
    private mutating func absorb(
        _ newer: ActivityEvent, summary newerSummary: ContentSummary, offset: Int64?,
        forcedMajor newerForcedMajor: Bool, explicitMinor newerExplicitMinor: Bool
    ) -> Merge {
        if let offset { offsets.append(offset) }
        if event.kind == .start && newer.kind == .end {
            guard let startTimestamp = startAttemptTimestamp else { return .cancelled }
            // The start's alert announced the start (and may have been shown): the end does not repeat it.
            event = newer
            summary = newerSummary
            forcedMajor = true
            explicitMinor = false
            return .endsPossiblyStartedActivity(startTimestamp: startTimestamp)
        }
        let keptAlert = event.alert
        if event.kind == .start && newer.kind == .update {
            // The activity does not exist yet: the start must still be sent, now carrying the newer state.
            let start = event.fields
            event = newer
            event.update { fields in
                fields.kind = .start
                fields.token = start.token
                fields.attributes = start.attributes
                fields.attributesType = start.attributesType
                fields.inputPushToken = start.inputPushToken
                fields.inputPushChannel = start.inputPushChannel
                if fields.alert == nil { fields.alert = keptAlert }
            }
        } else {
            event = newer
            // Checked first: setting a field builds a new box.
            if keptAlert != nil && event.alert == nil { event.alert = keptAlert }
        }
        summary = newerSummary
        forcedMajor = forcedMajor || newerForcedMajor
        explicitMinor = newerExplicitMinor
        return .merged
    }
}

/// The parts of a pending update the send decision reads (`FanoutEngine.evaluate`), without references.
struct PendingFacts {
    var kind: EventKind
    var summary: ContentSummary
    var forcedMajor: Bool
    var explicitMinor: Bool
}
