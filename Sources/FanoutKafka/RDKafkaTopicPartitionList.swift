import CRdKafka
import FanoutCore

/// Owns an `rd_kafka_topic_partition_list_t`.
final class RDKafkaTopicPartitionList {
    private let pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    init(capacity: Int) {
        pointer = rd_kafka_topic_partition_list_new(Int32(max(capacity, 1)))
    }

    /// Takes ownership of a list librdkafka returned to us.
    init(adopting pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) {
        self.pointer = pointer
    }

    convenience init(_ partitions: some Collection<PartitionID>, offset: Int64? = nil) {
        self.init(capacity: partitions.count)
        for partition in partitions { add(partition, offset: offset) }
    }

    convenience init(offsets: [PartitionID: Int64]) {
        self.init(capacity: offsets.count)
        for (partition, offset) in offsets { add(partition, offset: offset) }
    }

    deinit { rd_kafka_topic_partition_list_destroy(pointer) }

    func add(_ partition: PartitionID, offset: Int64?) {
        let element = rd_kafka_topic_partition_list_add(pointer, partition.topic, partition.partition)!
        if let offset { element.pointee.offset = offset }
    }

    func withPointer<R>(_ body: (UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) throws -> R) rethrows -> R {
        try body(pointer)
    }

    var entries: [Entry] { Self.entries(of: pointer) }

    struct Entry {
        var partition: PartitionID
        var offset: Int64
        var error: KafkaResponseCode
    }

    /// Copies a list (owned or borrowed, e.g. in the rebalance callback) into Swift values.
    static func entries(of list: UnsafePointer<rd_kafka_topic_partition_list_t>) -> [Entry] {
        let count = Int(list.pointee.cnt)
        guard count > 0, let elements = list.pointee.elems else { return [] }
        return (0..<count).map { index in
            let element = elements[index]
            return Entry(partition: PartitionID(topic: String(cString: element.topic), partition: element.partition),
                         offset: element.offset, error: KafkaResponseCode(element.err))
        }
    }

    /// Per-partition failures in this list after a call that sets `err` per element.
    var failures: [KafkaError.PartitionFailure] {
        entries.filter { $0.error != .noError }
            .map { KafkaError.PartitionFailure(partition: $0.partition, underlying: $0.error) }
    }
}
