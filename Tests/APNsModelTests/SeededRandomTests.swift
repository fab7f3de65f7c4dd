import Testing
import APNsModel

/// Pins the sequence: simulation seeds and the simulator's fault runs must replay across releases.
@Suite struct SeededRandomTests {
    @Test func matchesTheSplitMix64ReferenceSequence() {
        var random = SeededRandom(seed: 0)
        #expect([random.next(), random.next(), random.next()] == [0xe220_a839_7b1d_cdaf, 0x6e78_9e6a_a1b9_65f4, 0x06c4_5d18_8009_454f])
    }
}
