/// SplitMix64: a tiny deterministic generator whose whole output is fixed by its seed, so backoff
/// jitter, simulations and the simulator's fault runs replay exactly. Here, in the lowest module,
/// so the engine, the APNs simulator and the command line share one sequence.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
