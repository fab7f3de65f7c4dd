import CRdKafka

/// A librdkafka release as `rd_kafka_version()` encodes it — hex `MM.mm.rr.xx`, `xx` the pre-release
/// id (`0xff` for a final release) — with the text `rd_kafka_version_str()` gives.
///
/// `linked` is the library this process runs with, which is what decides what a property means (the
/// headers Fanout was compiled against may be older or newer). Versions compare by their number, so
/// a release candidate is below its final release.
public struct LibrdkafkaVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let number: Int
    public let text: String

    public init(number: Int, text: String) {
        self.number = number
        self.text = text
    }

    /// A final release `major.minor.revision`.
    public init(_ major: Int, _ minor: Int, _ revision: Int) {
        self.init(number: major << 24 | minor << 16 | revision << 8 | 0xff, text: "\(major).\(minor).\(revision)")
    }

    /// The librdkafka this process is linked with.
    public static let linked = LibrdkafkaVersion(number: Int(rd_kafka_version()), text: String(cString: rd_kafka_version_str()))

    public static func < (lhs: LibrdkafkaVersion, rhs: LibrdkafkaVersion) -> Bool { lhs.number < rhs.number }

    public var description: String { text }
}
