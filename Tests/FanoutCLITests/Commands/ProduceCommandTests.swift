@testable import FanoutCLI
import FanoutCore
import FanoutKafka
import Foundation
import Testing

/// `fanout produce --header`: a producer's trace context reaches the records the worker reads, and a
/// `traceparent` the worker would ignore is refused before anything is produced.
@Suite struct ProduceCommandTests {
    static let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test func everyProducedRecordCarriesTheHeadersGiven() async throws {
        let cluster = try MockKafkaCluster()
        let topic = "produce-headers-\(UUID().uuidString.prefix(8))"
        try cluster.createTopic(topic, partitions: 1)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(topic).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        let now = Int64(Date().timeIntervalSince1970)
        let lines = (0..<2).map { n in
            #"{"v": 1, "id": "e\#(n)", "app": "com.example.exports", "activity": "act-\#(n)", "event": "update", "timestamp": \#(now), "content_state": {"phase": "step \#(n)"}}"#
        }
        try lines.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)

        let code = try await ProduceCommand.run([file, "--bootstrap", cluster.bootstrapServers, "--topic", topic,
                                                 "--app", "com.example.exports",
                                                 "--header", "traceparent=\(Self.trace)", "--header", "team=exports"])
        #expect(code == 0)

        let reader = try KafkaPartitionReader(configuration: cluster.configuration())
        defer { reader.close() }
        try reader.assign([PartitionID(topic: topic, partition: 0): .beginning])
        var messages: [KafkaMessage] = []
        let deadline = ContinuousClock.now + .seconds(20)
        while messages.count < 2, ContinuousClock.now < deadline {
            messages += try reader.poll(timeout: .milliseconds(200)).messages
        }
        #expect(messages.count == 2)
        for message in messages {
            #expect(message.headers == [KafkaHeader(name: "traceparent", string: Self.trace), KafkaHeader(name: "team", string: "exports")])
            #expect(message.headers.first.flatMap { $0.value.flatMap { TraceParent(header: $0) } } != nil,
                    "the worker reads it as a trace context")
        }
    }

    @Test func aTraceparentTheWorkerWouldIgnoreIsRefused() throws {
        #expect(throws: UsageError.self) { _ = try ProduceCommand.header(parsing: "traceparent=00-not-a-trace-01") }
        #expect(throws: UsageError.self) {
            _ = try ProduceCommand.header(parsing: "traceparent=00-00000000000000000000000000000000-00f067aa0ba902b7-01")
        }
        #expect(throws: UsageError.self) { _ = try ProduceCommand.header(parsing: "=value") }
        #expect(try ProduceCommand.header(parsing: "traceparent=\(Self.trace)") == KafkaHeader(name: "traceparent", string: Self.trace))
        #expect(try ProduceCommand.header(parsing: "note=a=b") == KafkaHeader(name: "note", string: "a=b"))
    }
}
