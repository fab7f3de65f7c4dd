import FanoutCore
import FanoutKafka
import Foundation
import Synchronization
import Testing
@testable import FanoutCLI

/// `fanout replay` against librdkafka's in-process mock cluster: what lands in the destination is
/// read back with a separate reader and compared record by record.
@Suite struct ReplayCopyTests {
    let base: Int64 = 1_700_000_000_000

    func unique(_ prefix: String) -> String { "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())" }

    /// Produces records one after another (so offsets follow the loop), each acknowledged.
    func fill(_ cluster: MockKafkaCluster, _ topic: String, _ records: [(partition: Int32, key: String?, value: String, headers: [KafkaHeader], stamp: Int64)]) async throws {
        let producer = try KafkaProducer(configuration: cluster.configuration())
        for record in records {
            _ = try await producer.produce(topic: topic, partition: record.partition, key: record.key.map { Array($0.utf8) },
                                           value: Array(record.value.utf8), headers: record.headers,
                                           timestampMilliseconds: record.stamp)
        }
    }

    /// Every record of the topic, per partition in offset order.
    func readAll(_ cluster: MockKafkaCluster, _ topic: String, partitions: Int) async throws -> [Int32: [KafkaMessage]] {
        try await ReplayCommand.runOnThread {
            let reader = try KafkaPartitionReader(configuration: cluster.configuration())
            defer { reader.close() }
            var starts: [PartitionID: KafkaOffset] = [:]
            for partition in 0..<Int32(partitions) { starts[PartitionID(topic: topic, partition: partition)] = .beginning }
            try reader.assign(starts)
            var read: [Int32: [KafkaMessage]] = [:]
            var ended = Set<Int32>()
            let deadline = ContinuousClock.now + .seconds(60)   // a safety net against hangs
            while ended.count < partitions, ContinuousClock.now < deadline {
                let batch = try reader.poll(timeout: .milliseconds(200))
                for message in batch.messages { read[message.partition, default: []].append(message) }
                for end in batch.reachedEnd { ended.insert(end.partition) }
            }
            return read
        }
    }

    func replay(_ options: ReplayOptions) async throws -> ReplaySummary {
        let run = ReplayRun(options: options) { _ in }
        return try await ReplayCommand.runOnThread { try run.run() }
    }

    @Test func copiesARangeExactlyBetweenTopicsWithDifferentPartitionCounts() async throws {
        let cluster = try MockKafkaCluster()
        let from = unique("recorded"), to = unique("copy")
        try cluster.createTopic(from, partitions: 3)
        try cluster.createTopic(to, partitions: 5)
        var records: [(partition: Int32, key: String?, value: String, headers: [KafkaHeader], stamp: Int64)] = []
        for index in 0..<300 {
            let key = "key-\(index % 17)"
            let headers = index % 3 == 0 ? [] : [KafkaHeader(name: "trace", string: "t\(index)"), KafkaHeader(name: "nil", value: nil),
                                                   KafkaHeader(name: "bin", value: [0, 255, UInt8(index % 256)])]
            // Same key, same source partition (as a keyed producer would do).
            records.append((Int32(index % 17 % 3), key, "value-\(index)", headers, base + Int64(index)))
        }
        records.append((1, nil, "no key", [], base + 400))
        try await fill(cluster, from, records)

        var options = ReplayOptions(bootstrap: cluster.bootstrapServers, from: from, to: to)
        options.speed = 0
        options.readAhead = 25   // far below the ≈100 records per partition: pausing and resuming is exercised
        let summary = try await replay(options)
        #expect(summary.exitCode == 0, "\(summary.text)")
        #expect(summary.acknowledged == 301)
        #expect(summary.produced == 301)
        #expect(summary.partitions.mapValues(\.records) == Dictionary(grouping: records, by: \.partition).mapValues(\.count))
        #expect(summary.bytes == records.reduce(0) { total, record in
            total + (record.key?.utf8.count ?? 0) + record.value.utf8.count
                + record.headers.reduce(0) { $0 + $1.name.utf8.count + ($1.value?.count ?? 0) }
        })

        let copied = try await readAll(cluster, to, partitions: 5).values.flatMap { $0 }
        #expect(copied.count == 301)
        // Byte-for-byte: the same multiset of (key, value, headers).
        struct Content: Hashable { var key: [UInt8]?; var value: [UInt8]?; var headers: [KafkaHeader] }
        let sent = records.map { Content(key: $0.key.map { Array($0.utf8) }, value: Array($0.value.utf8), headers: $0.headers) }
        #expect(Set(copied.map { Content(key: $0.key, value: $0.value, headers: $0.headers) }) == Set(sent))
        // Each key on one destination partition, in its original order.
        let byKey = Dictionary(grouping: copied.filter { $0.key != nil }, by: { $0.key! })
        for (key, messages) in byKey {
            #expect(Set(messages.map(\.partition)).count == 1, "key \(String(decoding: key, as: UTF8.self)) spread over partitions")
            let expected = records.filter { $0.key.map { Array($0.utf8) } == key }.map(\.value)
            #expect(messages.sorted { $0.offset < $1.offset }.map { String(decoding: $0.value!, as: UTF8.self) } == expected)
        }
    }

    @Test func offsetAndTimeRanges() async throws {
        let cluster = try MockKafkaCluster()
        let from = unique("recorded")
        try cluster.createTopic(from, partitions: 2)
        var records: [(partition: Int32, key: String?, value: String, headers: [KafkaHeader], stamp: Int64)] = []
        for index in 0..<10 {
            records.append((0, "a", "a\(index)", [], base + 1000 * Int64(index)))
            records.append((1, "b", "b\(index)", [], base + 1000 * Int64(index) + 500))
        }
        try await fill(cluster, from, records)

        let byOffset = unique("by-offset")
        try cluster.createTopic(byOffset, partitions: 1)
        var options = ReplayOptions(bootstrap: cluster.bootstrapServers, from: from, to: byOffset)
        options.speed = 0
        options.partitions = [1]
        options.startOffset = 2
        options.endOffset = 8
        var summary = try await replay(options)
        #expect(summary.exitCode == 0, "\(summary.text)")
        var copied = try await readAll(cluster, byOffset, partitions: 1)[0] ?? []
        #expect(copied.map { String(decoding: $0.value!, as: UTF8.self) } == (2..<8).map { "b\($0)" })

        let byTime = unique("by-time")
        try cluster.createTopic(byTime, partitions: 1)
        options = ReplayOptions(bootstrap: cluster.bootstrapServers, from: from, to: byTime)
        options.speed = 0
        options.startTime = base + 3000        // a3 is the first of partition 0, b3 (3500) of partition 1
        options.endTime = base + 6000          // a6 and b6 (6500) end them
        summary = try await replay(options)
        #expect(summary.exitCode == 0, "\(summary.text)")
        copied = try await readAll(cluster, byTime, partitions: 1)[0] ?? []
        // One destination partition: the merged schedule order is visible.
        #expect(copied.map { String(decoding: $0.value!, as: UTF8.self) } == ["a3", "b3", "a4", "b4", "a5", "b5"])
        #expect(summary.recordedFirst == base + 3000)
        #expect(summary.recordedLast == base + 5500)
    }

    @Test func keepPartitionKeepsTheSourcePartitionAndNeedsEnoughOfThem() async throws {
        let cluster = try MockKafkaCluster()
        let from = unique("recorded"), to = unique("same-shape"), small = unique("small")
        try cluster.createTopic(from, partitions: 3)
        try cluster.createTopic(to, partitions: 3)
        try cluster.createTopic(small, partitions: 2)
        // The same key on every partition: only --keep-partition keeps them apart.
        try await fill(cluster, from, (0..<30).map { (Int32($0 % 3), "same", "v\($0)", [], base + Int64($0)) })

        var options = ReplayOptions(bootstrap: cluster.bootstrapServers, from: from, to: to)
        options.speed = 0
        options.keepPartition = true
        let summary = try await replay(options)
        #expect(summary.exitCode == 0, "\(summary.text)")
        let copied = try await readAll(cluster, to, partitions: 3)
        for partition in Int32(0)..<3 {
            #expect(copied[partition]?.map { String(decoding: $0.value!, as: UTF8.self) }
                    == stride(from: Int(partition), to: 30, by: 3).map { "v\($0)" })
        }

        options.to = small
        let error = await #expect(throws: ReplayError.self) { _ = try await replay(options) }
        #expect(error?.description.contains("source partition 2 has no counterpart") == true)
        #expect(error?.description.contains("'\(small)' has 2 partition(s)") == true)
    }

    @Test func aSignalStopsTheCopyFlushesAndReportsIt() async throws {
        let cluster = try MockKafkaCluster()
        let from = unique("recorded"), to = unique("copy")
        try cluster.createTopic(from, partitions: 1)
        try cluster.createTopic(to, partitions: 1)
        // The second record is due an hour after the first: only the signal can end this replay.
        try await fill(cluster, from, [(0, "k", "first", [], base), (0, "k", "an hour later", [], base + 3_600_000)])
        var options = ReplayOptions(bootstrap: cluster.bootstrapServers, from: from, to: to)
        options.progressInterval = 0.05
        let stop = ReplayStop()
        let run = ReplayRun(options: options, stop: stop) { line in
            if line.contains("1 acknowledged") { stop.request(15) }
        }
        let summary = try await ReplayCommand.runOnThread { try run.run() }
        #expect(summary.interruptedBy == 15)
        #expect(summary.exitCode == 130)
        #expect(summary.produced == 1)
        #expect(summary.acknowledged == 1)
        #expect(summary.text.contains("interrupted by signal 15"))
        let copied = try await readAll(cluster, to, partitions: 1)[0] ?? []
        #expect(copied.map { String(decoding: $0.value!, as: UTF8.self) } == ["first"])
    }

    @Test func recordsTheDestinationRefusesFailTheReplay() async throws {
        let cluster = try MockKafkaCluster()
        let from = unique("recorded"), to = unique("copy")
        try cluster.createTopic(from, partitions: 1)
        try cluster.createTopic(to, partitions: 1)
        try await fill(cluster, from, (0..<20).map { (0, "k", "v\($0)", [], base + Int64($0)) })
        // A permanent (not retriable) error for every produce request the replay sends.
        cluster.pushRequestErrors(.produce, Array(repeating: KafkaResponseCode(rawValue: 29), count: 50))   // TOPIC_AUTHORIZATION_FAILED
        var options = ReplayOptions(bootstrap: cluster.bootstrapServers, from: from, to: to)
        options.speed = 0
        options.timeout = 10
        let summary = try await replay(options)
        cluster.clearRequestErrors(.produce)
        #expect(summary.exitCode == 1, "\(summary.text)")
        #expect(summary.failed > 0)
        #expect(summary.acknowledged < 20)
        #expect(summary.text.contains("failed"))
    }

    @Test func missingTopicsAndPartitionsAreNamed() async throws {
        let cluster = try MockKafkaCluster()
        let from = unique("recorded"), to = unique("copy")
        try cluster.createTopic(from, partitions: 2)
        try cluster.createTopic(to, partitions: 2)

        var options = ReplayOptions(bootstrap: cluster.bootstrapServers, from: "no-such-topic", to: to)
        let missingSource = await #expect(throws: KafkaError.self) { _ = try await replay(options) }
        #expect(missingSource?.code == .topicNotFound)
        #expect(missingSource?.reason.contains("'no-such-topic'") == true)

        options = ReplayOptions(bootstrap: cluster.bootstrapServers, from: from, to: "no-such-destination")
        let missingDestination = await #expect(throws: KafkaError.self) { _ = try await replay(options) }
        #expect(missingDestination?.reason.contains("'no-such-destination'") == true)

        options = ReplayOptions(bootstrap: cluster.bootstrapServers, from: from, to: to)
        options.partitions = [0, 5]
        let outOfRange = await #expect(throws: ReplayError.self) { _ = try await replay(options) }
        #expect(outOfRange?.description.contains("partition 5 does not exist") == true)

        // Through the CLI entry point: exit code 1 for a cluster-side error.
        let code = await Fanout.main(["fanout", "replay", "--bootstrap", cluster.bootstrapServers,
                                      "--from", "no-such-topic", "--to", to, "--progress", "0"])
        #expect(code == 1)
    }

    @Test func badArgumentsAreNamedPrecisely() async throws {
        func message(_ arguments: [String]) -> String? {
            do {
                _ = try ReplayOptions.parse(arguments)
                return nil
            } catch {
                return "\(error)"
            }
        }
        let minimal = ["--bootstrap", "h:1", "--from", "a", "--to", "b"]
        #expect(try ReplayOptions.parse(minimal).speed == 1)
        #expect(message(["--from", "a", "--to", "b"])?.contains("--bootstrap") == true)
        #expect(message(["--bootstrap", "h:1", "--to", "b"])?.contains("--from") == true)
        #expect(message(["--bootstrap", "h:1", "--from", "a"])?.contains("--to") == true)
        #expect(message(["--bootstrap", "h:1", "--from", "a", "--to", "a"])?.contains("same cluster") == true)
        #expect(message(minimal + ["--speed", "-1"])?.contains("--speed") == true)
        #expect(message(minimal + ["--speed", "fast"])?.contains("--speed expects a number") == true)
        #expect(message(minimal + ["--partitions", "0,x"])?.contains("--partitions") == true)
        #expect(message(minimal + ["--partitions", "1,1"])?.contains("partition 1 twice") == true)
        #expect(message(minimal + ["--start-offset", "3", "--start-time", "5"])?.contains("not both") == true)
        #expect(message(minimal + ["--start-offset", "5", "--end-offset", "5"])?.contains("exclusive") == true)
        #expect(message(minimal + ["--start-time", "yesterday"])?.contains("--start-time expects") == true)
        #expect(message(minimal + ["--count", "0"])?.contains("--count") == true)
        #expect(message(minimal + ["--read-ahead", "0"])?.contains("--read-ahead") == true)
        #expect(message(minimal + ["--property", "=x"])?.contains("--property expects name=value") == true)
        #expect(message(minimal + ["--frm", "a"])?.contains("unexpected argument '--frm'") == true)
        // Same topic name on another cluster is fine.
        #expect(message(["--bootstrap", "h:1", "--to-bootstrap", "h:2", "--from", "a", "--to", "a"]) == nil)

        #expect(try ReplayOptions.parseTime("1700000000.25", option: "start-time") == 1_700_000_000_250)
        #expect(try ReplayOptions.parseTime("2023-11-14T22:13:20Z", option: "start-time") == 1_700_000_000_000)
        #expect(try ReplayOptions.parseTime("2023-11-14T23:13:20.500+01:00", option: "end-time") == 1_700_000_000_500)

        // Through the CLI entry point: exit code 64 for bad arguments.
        #expect(await Fanout.main(["fanout", "replay", "--bootstrap", "h:1", "--from", "a"]) == 64)
    }
}
