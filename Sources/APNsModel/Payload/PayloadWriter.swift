/// Appends JSON tokens to a byte buffer. `Counter` measures the same tokens without writing them,
/// so a payload's size is known exactly before (or instead of) building it.
struct PayloadWriter {
    var buffer: [UInt8]

    mutating func raw(_ text: StaticString) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func bytes(_ bytes: [UInt8]) { buffer.append(contentsOf: bytes) }

    mutating func integer(_ value: Int64) {
        if value < 0 { buffer.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch: UInt64.max has 20 digits
        withUnsafeMutableBytes(of: &digits) { scratch in
            var position = scratch.count
            repeat {
                position -= 1
                scratch[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            buffer.append(contentsOf: scratch[position...])
        }
    }

    mutating func number(_ value: Double) {
        if let integral = Self.exactInteger(value) {
            integer(integral)
        } else {
            buffer.append(contentsOf: value.description.utf8)
        }
    }

    mutating func string(_ text: String) { JSONString.append(text, to: &buffer) }

    /// A Double written as an integer when it is one (JSON `50`, not `50.0`).
    static func exactInteger(_ value: Double) -> Int64? {
        guard value.isFinite, value == value.rounded(), value.magnitude < 9.0e15 else { return nil }
        if value == 0 { return 0 }  // also writes -0.0 as 0
        return Int64(value)
    }

    struct Counter {
        var count = 0

        mutating func raw(_ text: StaticString) { count += text.utf8CodeUnitCount }

        mutating func integer(_ value: Int64) {
            var magnitude = value.magnitude
            count += value < 0 ? 1 : 0
            repeat {
                count += 1
                magnitude /= 10
            } while magnitude > 0
        }

        mutating func number(_ value: Double) {
            if let integral = PayloadWriter.exactInteger(value) {
                integer(integral)
            } else {
                count += value.description.utf8.count
            }
        }

        mutating func string(_ text: String) { count += JSONString.encodedCount(text) }
    }
}
