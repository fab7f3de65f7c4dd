import Foundation
/// Durations as written in the config file and `FANOUT_*` variables.
///
/// Accepted: a number of seconds (`30`, `1.5`, JSON number or string), or one or more
/// `<number><unit>` parts with units `ms`, `s`, `m`, `h` (`250ms`, `30s`, `50m`, `1h30m`).
/// Negative values are rejected.
public enum DurationText {
    public static func parse(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return nil }
        if let seconds = Double(trimmed) { return fromSeconds(seconds) }

        var total = Duration.zero
        var rest = Substring(trimmed)
        while !rest.isEmpty {
            let numberText = rest.prefix(while: { $0.isNumber || $0 == "." })
            guard !numberText.isEmpty, let number = Double(numberText), number.isFinite, number >= 0 else { return nil }
            rest = rest.dropFirst(numberText.count)
            let unit = rest.prefix(while: { $0.isLetter })
            guard !unit.isEmpty else { return nil }
            rest = rest.dropFirst(unit.count)
            let scale: Double
            switch unit {
            case "ms": scale = 0.001
            case "s": scale = 1
            case "m": scale = 60
            case "h": scale = 3600
            default: return nil
            }
            guard let part = fromSeconds(number * scale) else { return nil }
            total += part
        }
        return total
    }

    public static func fromSeconds(_ seconds: Double) -> Duration? {
        guard seconds.isFinite, seconds >= 0, seconds < 1e9 else { return nil }
        let millis = (seconds * 1000).rounded()
        return .milliseconds(Int64(millis))
    }

    /// Canonical text, e.g. `1h30m`, `50m`, `30s`, `1s500ms`, `0s`. Sub-millisecond parts are dropped.
    public static func format(_ duration: Duration) -> String {
        var millis = Int64(duration.components.seconds) * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        if millis == 0 { return "0s" }
        var text = millis < 0 ? "-" : ""
        millis = abs(millis)
        let parts: [(Int64, String)] = [(3_600_000, "h"), (60_000, "m"), (1000, "s"), (1, "ms")]
        for (size, unit) in parts where millis >= size {
            text += "\(millis / size)\(unit)"
            millis %= size
        }
        return text
    }

    /// Seconds as a Double, for callers that need one (timers, token buckets).
    public static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
