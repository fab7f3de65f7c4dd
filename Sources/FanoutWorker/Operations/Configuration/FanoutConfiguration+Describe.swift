extension FanoutConfiguration {
    /// Every knob, one a line: key, value, and where the value came from (`default`, `file <path>`,
    /// `env <VARIABLE>`). Secrets (librdkafka passwords, keys) print as `<redacted>`; key files print
    /// their path only. For `fanout run --print-config`.
    public func describe() -> String {
        let keyWidth = knobs.map(\.key.count).max() ?? 0
        let valueWidth = min(48, knobs.map(\.value.count).max() ?? 0)
        return knobs.map { knob in
            knob.key.padding(toLength: keyWidth, withPad: " ", startingAt: 0) + "  "
                + (knob.value.count < valueWidth ? knob.value.padding(toLength: valueWidth, withPad: " ", startingAt: 0) : knob.value)
                + "  # " + knob.source.description
        }.joined(separator: "\n")
    }
}
