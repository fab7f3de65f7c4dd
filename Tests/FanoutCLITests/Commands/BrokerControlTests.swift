@testable import FanoutCLI
import FanoutKafka
import FanoutTestSupport
import Foundation
import Synchronization
import Testing

/// `fanout broker --control-stdin`: a broker taken down and brought back up from outside the process.
@Suite struct BrokerControlTests {
    static let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("fanout").path

    @Test func commandsParseAndRefuseWhatTheyCannotDo() throws {
        #expect(try BrokerControl(parsing: "down 1", brokers: 1) == .down(1))
        #expect(try BrokerControl(parsing: "  up 2 ", brokers: 3) == .up(2))
        #expect(try BrokerControl(parsing: "rtt 1 250", brokers: 1) == .roundTripTime(1, milliseconds: 250))
        for bad in ["", "down", "down 0", "down 2", "down one", "up 1 2", "rtt 1", "rtt 1 -5", "reboot 1"] {
            #expect(throws: BrokerControlError.self, "'\(bad)'") { try BrokerControl(parsing: bad, brokers: 1) }
        }
        #expect(throws: BrokerControlError("unknown command 'reboot'; expected down <broker>, up <broker> or rtt <broker> <ms>")) {
            try BrokerControl(parsing: "reboot 1", brokers: 1)
        }
    }

    /// While broker 1 is down a client cannot reach it (metadata times out); once it is up a new client can.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: binary)))
    func aBrokerTakenDownFromStandardInputRefusesClientsUntilItIsUp() async throws {
        let broker = try ChildProcess(Self.binary, ["broker", "--control-stdin", "--topic", "t:2"], input: .pipe, output: .pipe)
        defer {
            broker.signal(SIGKILL)
            _ = broker.waitUntilExit()
        }
        let printed = Mutex("")
        Thread.detachNewThread {
            while true {
                let chunk = broker.standardOutput!.availableData
                if chunk.isEmpty { break }
                printed.withLock { $0 += String(decoding: chunk, as: UTF8.self) }
            }
        }
        // Bounded waits for what the process prints. The first line waits for the mock cluster to start
        // and create its topics, which took over 20 s once while the rest of the suite loaded both cores.
        func waitFor(_ text: String, timeout: Duration = .seconds(30)) async throws -> String {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if let line = printed.withLock({ $0 }).split(separator: "\n").first(where: { $0.hasPrefix(text) }) { return String(line) }
                try await Task.sleep(for: .milliseconds(20))
            }
            throw BrokerControlError("no line starting '\(text)' within \(timeout); printed: \(printed.withLock { $0 })")
        }
        let bootstrap = String(try await waitFor("bootstrap: ", timeout: .seconds(90)).dropFirst("bootstrap: ".count))
        func partitionCount() throws -> Int? {
            let reader = try KafkaPartitionReader(configuration: KafkaConfiguration(bootstrapServers: bootstrap, [:]))
            defer { reader.close() }
            return try reader.partitionCounts(of: ["t"], timeout: .seconds(2))["t"]
        }
        #expect(try partitionCount() == 2)
        broker.standardInput!.write(Data("down 1\nbogus\n".utf8))
        #expect(try await waitFor("ok: broker 1") == "ok: broker 1 down")
        #expect(try await waitFor("error: ").hasPrefix("error: unknown command 'bogus'"))
        #expect(throws: (any Error).self) { try partitionCount() }
        broker.standardInput!.write(Data("up 1\n".utf8))
        _ = try await waitFor("ok: broker 1 up")
        #expect(try partitionCount() == 2)
        #expect(broker.isRunning)
    }
}
