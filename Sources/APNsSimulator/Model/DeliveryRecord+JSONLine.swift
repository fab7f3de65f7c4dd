import APNsModel

extension DeliveryRecord {
    /// Appends the record as one line of the delivery log: a JSON object with the `Codable` form's keys,
    /// sorted, absent optionals left out, and a newline. Written by hand, not by `JSONEncoder`: at tens of
    /// thousands of pushes a second the encoder took half of the simulator's CPU, which the worker under
    /// test shares on one machine (Benchmarks/BENCH.md, workload 3).
    public func appendJSONLine(to out: inout [UInt8]) {
        var object = JSONMembers()
        out.append(UInt8(ascii: "{"))
        // In the order `.sortedKeys` gives: by the keys' UTF-8 bytes.
        object.string("apns-id", apnsID, to: &out)
        object.string("apns-unique-id", uniqueID, to: &out)
        object.string("aps", aps, to: &out)
        object.string("bundle-id", bundleID, to: &out)
        object.string("channel", channel, to: &out)
        object.string("collapse-id", collapseID, to: &out)
        object.string("event", event, to: &out)
        object.integer("expiration", expiration, to: &out)
        object.string("key-id", keyID, to: &out)
        object.string("kind", kind.rawValue, to: &out)
        object.integer("priority", Int64(priority), to: &out)
        object.string("push-type", pushType, to: &out)
        object.number("time", time, to: &out)
        object.number("timestamp", timestamp, to: &out)
        object.string("token", token, to: &out)
        object.string("topic", topic, to: &out)
        out.append(UInt8(ascii: "}"))
        out.append(0x0A)
    }
}

/// The members of one JSON object, appended one at a time; nil values are left out.
private struct JSONMembers {
    private var first = true

    mutating func string(_ key: String, _ value: String?, to out: inout [UInt8]) {
        guard let value else { return }
        self.key(key, to: &out)
        JSONString.append(value, to: &out)
    }

    mutating func integer(_ key: String, _ value: Int64?, to out: inout [UInt8]) {
        guard let value else { return }
        self.key(key, to: &out)
        out.append(contentsOf: String(value).utf8)
    }

    /// Swift's shortest form that reads back as the same `Double` ("1796548376.25", "1e-05"); `null`
    /// for a value JSON has no number for.
    mutating func number(_ key: String, _ value: Double, to out: inout [UInt8]) {
        self.key(key, to: &out)
        out.append(contentsOf: (value.isFinite ? value.description : "null").utf8)
    }

    private mutating func key(_ key: String, to out: inout [UInt8]) {
        if !first { out.append(UInt8(ascii: ",")) }
        first = false
        JSONString.append(key, to: &out)
        out.append(UInt8(ascii: ":"))
    }
}
