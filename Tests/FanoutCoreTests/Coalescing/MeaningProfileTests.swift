import Testing
@testable import FanoutCore

/// How a profile with more progress fields than slots maps an event's fields (README "Meaningful vs minor").
@Suite struct MeaningProfileTests {
    static let profile = MeaningProfile(progressFields: ["a", "b", "c", "d", "e"], minProgressDelta: 0.05)

    static func fields(_ values: [(String, Double)], status: String = "running") -> [ContentField] {
        [ContentField(name: "status", digest: MeaningProfile.nameHash(status), number: nil)]
            + values.map { ContentField(name: $0.0, digest: UInt64(bitPattern: Int64($0.1 * 1000)), number: $0.1) }
    }

    @Test func theFirstFourPresentByTheProfilesOrderTakeTheSlots() {
        let summary = Self.profile.summarize(Self.fields([("e", 5), ("c", 3), ("b", 2)]))
        #expect(summary.ranks == SIMD4(1, 2, 4, ContentSummary.noField))
        #expect(summary.progress[0] == 2 && summary.progress[1] == 3 && summary.progress[2] == 5)
        // The event's own order does not matter.
        let reordered = Self.profile.summarize(Self.fields([("b", 2), ("e", 5), ("c", 3)]))
        #expect(reordered.digest == summary.digest && reordered.ranks == summary.ranks)
        #expect((0..<3).allSatisfy { reordered.progress[$0] == summary.progress[$0] })
    }

    @Test func aFifthProgressFieldCountsAsAnOrdinaryField() {
        let all = Self.profile.summarize(Self.fields([("e", 5), ("d", 4), ("c", 3), ("b", 2), ("a", 1)]))
        #expect(all.ranks == SIMD4(0, 1, 2, 3))
        let eChanged = Self.profile.summarize(Self.fields([("e", 6), ("d", 4), ("c", 3), ("b", 2), ("a", 1)]))
        #expect(eChanged.digest != all.digest, "a change of the displaced field is never lost")
        let dChanged = Self.profile.summarize(Self.fields([("e", 5), ("d", 9), ("c", 3), ("b", 2), ("a", 1)]))
        #expect(dChanged.digest == all.digest)
        #expect(Self.profile.progressMoved(from: all, to: dChanged))
        // Without `a`, `e` has a slot and is progress again.
        let withoutA = Self.profile.summarize(Self.fields([("e", 5), ("d", 4), ("c", 3), ("b", 2)]))
        #expect(withoutA.digest == Self.profile.summarize(Self.fields([("e", 7), ("d", 4), ("c", 3), ("b", 2)])).digest)
    }

    @Test func movementComparesTheSameFieldWhereverItsSlotIs() {
        let last = Self.profile.summarize(Self.fields([("b", 1), ("c", 5)]))
        let small = Self.profile.summarize(Self.fields([("b", 1.01), ("c", 5.01)]))
        #expect(!Self.profile.progressMoved(from: last, to: small))
        // `b` gone: `c` is in slot 0 now and is compared with its own last value.
        #expect(!Self.profile.progressMoved(from: last, to: Self.profile.summarize(Self.fields([("c", 5.04)]))))
        #expect(Self.profile.progressMoved(from: last, to: Self.profile.summarize(Self.fields([("c", 5.1)]))))
        // A progress field that appears moves.
        #expect(Self.profile.progressMoved(from: last, to: Self.profile.summarize(Self.fields([("a", 0), ("b", 1), ("c", 5)]))))
    }

    @Test func aProgressFieldWithoutANumberIsAnOrdinaryField() {
        let text = [ContentField(name: "b", digest: 1, number: nil)]
        let other = [ContentField(name: "b", digest: 2, number: nil)]
        #expect(Self.profile.summarize(text).ranks == SIMD4(repeating: ContentSummary.noField))
        #expect(Self.profile.summarize(text).digest != Self.profile.summarize(other).digest)
    }
}
