import APNsModel

extension ActivityEvent {
    /// The APNs body for this event as Fanout sends it (docs/design.md §3): the event's stale date, or
    /// `timestamp + defaultStaleAfter` when it has none (pass nil for no default); dismissal date
    /// only on end.
    public func livePayload(defaultStaleAfter: Int64?) -> LiveActivityPayload {
        LiveActivityPayload(
            event: LiveActivityPayload.Event(rawValue: kind.rawValue) ?? .update,
            timestamp: timestamp,
            contentState: contentState.bytes,
            alert: alert?.bytes,
            staleDate: staleDate ?? defaultStaleAfter.map { after in
                let (sum, overflow) = timestamp.addingReportingOverflow(after)
                return overflow ? (after < 0 ? Int64.min : Int64.max) : sum
            },
            dismissalDate: kind == .end ? dismissalDate : nil,
            relevanceScore: relevanceScore,
            attributesType: kind == .start ? attributesType : nil,
            attributes: kind == .start ? attributes?.bytes : nil,
            inputPushToken: kind == .start && inputPushToken,
            inputPushChannel: kind == .start ? inputPushChannel : nil)
    }
}
