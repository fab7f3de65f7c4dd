import FanoutCore
import Testing
@testable import FanoutKafka

@Suite struct CommitLedgerTests {
    let p0 = PartitionID(topic: "t", partition: 0)
    let p1 = PartitionID(topic: "t", partition: 1)

    @Test func eachCommitIsAnsweredOnceAndLateAnswersAreDropped() {
        var ledger = CommitLedger()
        let first = ledger.register([p0: 5])!
        let second = ledger.register([p1: 7])!
        #expect(first < second)
        ledger.answer(second, error: nil)
        ledger.answer(second, error: KafkaError(.commit, reason: "again"))   // a second answer: dropped
        #expect(ledger.take() == [KafkaCommitAnswer(id: second, offsets: [p1: 7], error: nil)])
        #expect(ledger.take().isEmpty)

        ledger.close(reason: "closed")
        ledger.answer(first, error: nil)   // librdkafka's answer after close: already answered
        let answers = ledger.take()
        #expect(answers.map(\.id) == [first])
        #expect(answers.first?.error?.code == .closed)
        #expect(answers.first?.committed == [:])
        #expect(ledger.register([p0: 6]) == nil)
    }

    @Test func withdrawnCommitsAreNeverAnswered() {
        var ledger = CommitLedger()
        let id = ledger.register([p0: 1])!
        ledger.withdraw(id)
        ledger.close(reason: "closed")
        #expect(ledger.take().isEmpty)
    }

    @Test func committedLeavesOutTheRefusedPartitions() {
        let refused = KafkaError(.commit, underlying: .illegalGeneration, reason: "refused",
                                 partitionFailures: [.init(partition: p1, underlying: .illegalGeneration)])
        let answer = KafkaCommitAnswer(id: KafkaCommitID(rawValue: 1), offsets: [p0: 3, p1: 4], error: refused)
        #expect(answer.committed == [p0: 3])
        let overall = KafkaCommitAnswer(id: KafkaCommitID(rawValue: 2), offsets: [p0: 3],
                                        error: KafkaError(.commit, underlying: .timedOut, reason: "timed out"))
        #expect(overall.committed == [:])
    }
}
