import FanoutCore

/// Which `commitAsync` calls are still unanswered, and the answers not yet handed out.
/// Guarantees one answer per id: a late answer for an id already answered (e.g. `.closed`) is dropped.
struct CommitLedger {
    private var nextID: UInt64 = 1
    private var outstanding: [KafkaCommitID: [PartitionID: Int64]] = [:]
    private var ready: [KafkaCommitAnswer] = []
    private(set) var isClosed = false

    /// `nil` once closed: no new commit may start.
    mutating func register(_ offsets: [PartitionID: Int64]) -> KafkaCommitID? {
        guard !isClosed else { return nil }
        let id = KafkaCommitID(rawValue: nextID)
        nextID += 1
        outstanding[id] = offsets
        return id
    }

    /// A commit librdkafka refused to start: there will be no answer, and the caller got an error.
    mutating func withdraw(_ id: KafkaCommitID) {
        outstanding[id] = nil
    }

    mutating func answer(_ id: KafkaCommitID, error: KafkaError?) {
        guard let offsets = outstanding.removeValue(forKey: id) else { return }
        ready.append(KafkaCommitAnswer(id: id, offsets: offsets, error: error))
    }

    /// Answers every outstanding commit with `.closed` and refuses new ones.
    mutating func close(reason: String) {
        isClosed = true
        for id in outstanding.keys.sorted() {
            answer(id, error: KafkaError(.closed, reason: reason))
        }
    }

    mutating func take() -> [KafkaCommitAnswer] {
        defer { ready.removeAll() }
        return ready
    }
}
