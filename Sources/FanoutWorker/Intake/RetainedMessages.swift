import FanoutKafka

/// The records of one partition that are not yet committed, kept so a dead letter the engine asks
/// for later (`no-token`, rejected by APNs) can carry the original bytes and headers.
///
/// Offsets arrive in increasing order; everything below the commit point is dropped. Its size is
/// one of the backpressure measures, so memory stays bounded by `max_pending_per_partition` records.
struct RetainedMessages: Sendable {
    private var messages: [KafkaMessage] = []
    private var head = 0

    var count: Int { messages.count - head }

    mutating func append(_ message: KafkaMessage) {
        if let last = messages.last, head < messages.count, last.offset >= message.offset { return }
        messages.append(message)
    }

    mutating func append(contentsOf run: ArraySlice<KafkaMessage>) {
        for message in run { append(message) }
    }

    func message(at offset: Int64) -> KafkaMessage? {
        var low = head, high = messages.count - 1
        while low <= high {
            let mid = (low + high) >> 1
            let value = messages[mid].offset
            if value == offset { return messages[mid] }
            if value < offset { low = mid + 1 } else { high = mid - 1 }
        }
        return nil
    }

    /// Drops every record below `commitPoint` (Kafka's next offset to read).
    mutating func prune(below commitPoint: Int64) {
        while head < messages.count && messages[head].offset < commitPoint { head += 1 }
        if head == messages.count {
            messages.removeAll(keepingCapacity: messages.capacity <= 4096)
            head = 0
        } else if head > 1024 && head * 2 > messages.count {
            messages.removeFirst(head)
            head = 0
        }
    }
}
