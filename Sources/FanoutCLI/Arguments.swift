/// A tiny argument reader for `--flag value`, `--flag=value` and bare `--switch` options.
public struct Arguments {
    private var remaining: [String]

    public init(_ arguments: [String]) { remaining = arguments }

    /// Removes and returns the value of `--name value` or `--name=value`; nil when absent.
    public mutating func option(_ name: String) throws -> String? {
        let flag = "--" + name
        for (index, argument) in remaining.enumerated() {
            if argument == flag {
                guard index + 1 < remaining.count else { throw UsageError("\(flag) needs a value") }
                let value = remaining[index + 1]
                remaining.removeSubrange(index...(index + 1))
                return value
            }
            if argument.hasPrefix(flag + "=") {
                remaining.remove(at: index)
                return String(argument.dropFirst(flag.count + 1))
            }
        }
        return nil
    }

    /// Every value given for a repeatable option, in order.
    public mutating func options(_ name: String) throws -> [String] {
        var values: [String] = []
        while let value = try option(name) { values.append(value) }
        return values
    }

    public mutating func int(_ name: String) throws -> Int? {
        guard let text = try option(name) else { return nil }
        guard let value = Int(text) else { throw UsageError("--\(name) expects a whole number, got '\(text)'") }
        return value
    }

    public mutating func double(_ name: String) throws -> Double? {
        guard let text = try option(name) else { return nil }
        guard let value = Double(text), value.isFinite else { throw UsageError("--\(name) expects a number, got '\(text)'") }
        return value
    }

    /// Removes `--name` and reports whether it was there.
    public mutating func flag(_ name: String) -> Bool {
        guard let index = remaining.firstIndex(of: "--" + name) else { return false }
        remaining.remove(at: index)
        return true
    }

    /// Removes and returns the next positional argument.
    public mutating func positional() -> String? {
        guard let index = remaining.firstIndex(where: { !$0.hasPrefix("--") }) else { return nil }
        return remaining.remove(at: index)
    }

    /// Fails on anything not consumed, so a typo is an error rather than silently ignored.
    public func finish() throws {
        if let extra = remaining.first { throw UsageError("unexpected argument '\(extra)'") }
    }
}
