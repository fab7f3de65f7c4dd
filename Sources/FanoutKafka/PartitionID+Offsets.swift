import FanoutCore

extension PartitionID {
    /// `topic/0@13, topic/1@4`, sorted: offsets in error messages.
    static func describe(_ offsets: [PartitionID: Int64]) -> String {
        offsets.keys.sorted().map { "\($0)@\(offsets[$0]!)" }.joined(separator: ", ")
    }
}
