import Dispatch
import FanoutCore
import FanoutKafka
import Foundation
import Synchronization

/// `fanout produce`: validates JSON-lines events with the worker's decoder and produces the valid ones.
struct ProduceCommand: Command {
    static let name = "produce"
    static let summary = "Validate JSON-lines events and produce the valid ones to Kafka"
    static let help = """
    Usage: fanout produce <file | -> --bootstrap <servers> [options]

    Reads one event per line (empty lines are skipped) from a file, or stdin with '-', validates each
    exactly like 'fanout validate' (and the worker), prints 'line N: <reason-code>: <detail>' for each
    rejected line, and produces every valid line unchanged with key = its target (activity key or
    channel id), so events for one target stay ordered on one partition. Waits for every broker
    acknowledgement (acks=all, idempotent), then prints 'N produced, M rejected, F failed'.
    Exits 0 only when nothing was rejected and nothing failed.

    Options:
      --bootstrap <servers>       Kafka bootstrap servers, e.g. 127.0.0.1:9092 (alias: --brokers)
      --topic <name>              topic to produce to (default: activity-updates, or
                                  broadcast-updates with --lane broadcast)
      --lane activity|broadcast   which lane the events are for (default: activity)
      --app <bundle id>           a configured app; repeat for several (see 'fanout validate --help')
      --now <unix seconds>        the time to validate dates against (default: now)
      --max-event-bytes <n>       largest event accepted (default: 65536)
      --max-in-flight <n>         records awaiting acknowledgement at once (default: 10000)
      --timeout <seconds>         how long to wait for the last acknowledgements (default: 30)
      --property <name>=<value>   any librdkafka property (SASL, TLS, ...); repeat for several
      --header <name>=<value>     a Kafka header on every record; repeat for several. A
                                  'traceparent' must be a valid W3C trace context
                                  (00-<32 hex>-<16 hex>-<2 hex>): the worker carries it into its
                                  logs, dead letters, feedback records and /debug/targets
    """

    static func run(_ arguments: [String]) async throws -> Int32 {
        var args = Arguments(arguments)
        let laneText = try args.option("lane") ?? "activity"
        guard let lane = Lane(rawValue: laneText) else {
            throw UsageError("--lane must be 'activity' or 'broadcast', got '\(laneText)'")
        }
        let bootstrap = try args.option("bootstrap") ?? args.option("brokers")
        let topic = try args.option("topic") ?? (lane == .activity ? "activity-updates" : "broadcast-updates")
        let apps = try args.options("app")
        let now = try args.int("now").map(Int64.init) ?? Int64(Date().timeIntervalSince1970)
        let maxEventBytes = try args.int("max-event-bytes") ?? EventPolicy.defaultMaxEventBytes
        let maxInFlight = try args.int("max-in-flight") ?? 10_000
        let timeout = try args.double("timeout") ?? 30
        var properties: [String: String] = [:]
        for property in try args.options("property") {
            guard let equals = property.firstIndex(of: "="), equals != property.startIndex else {
                throw UsageError("--property expects name=value, got '\(property)'")
            }
            properties[String(property[..<equals])] = String(property[property.index(after: equals)...])
        }
        let headers = try args.options("header").map(Self.header(parsing:))
        guard let path = args.positional() else { throw UsageError("give a file to read, or '-' for stdin") }
        try args.finish()
        guard let bootstrap, !bootstrap.isEmpty else {
            throw UsageError("--bootstrap <servers> is required (e.g. the address 'fanout broker' prints)")
        }
        guard maxEventBytes > 0 else { throw UsageError("--max-event-bytes must be positive") }
        guard maxInFlight > 0 else { throw UsageError("--max-in-flight must be positive") }
        guard timeout > 0 else { throw UsageError("--timeout must be positive") }
        guard !topic.isEmpty else { throw UsageError("--topic must not be empty") }

        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: bootstrap, properties))
        let decoder = EventDecoder(policy: EventPolicy(apps: Set(apps), maxEventBytes: maxEventBytes))
        let run = ProduceRun(producer: producer, topic: topic, headers: headers, maxInFlight: maxInFlight)
        // File reads, the in-flight bound and the final flush block: keep them off the cooperative pool.
        let rejected = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int, Error>) in
            DispatchQueue(label: "fanout.produce").async {
                continuation.resume(with: Result {
                    let rejected = try run.produceLines(path: path, decoder: decoder, lane: lane, now: now,
                                                        maxLineBytes: maxEventBytes)
                    try run.finish(timeout: timeout)
                    return rejected
                })
            }
        }
        let outcome = run.outcome
        for failure in outcome.failures { Output.err("line \(failure.line): not produced: \(failure.error)") }
        if outcome.failed > outcome.failures.count {
            Output.err("… and \(outcome.failed - outcome.failures.count) more failure(s)")
        }
        Output.out("\(outcome.produced) produced, \(rejected) rejected, \(outcome.failed) failed")
        return rejected == 0 && outcome.failed == 0 ? 0 : 1
    }

    /// `name=value`; a `traceparent` the worker would ignore as invalid is refused here instead.
    static func header(parsing text: String) throws -> KafkaHeader {
        guard let equals = text.firstIndex(of: "="), equals != text.startIndex else {
            throw UsageError("--header expects name=value, got '\(text)'")
        }
        let name = String(text[..<equals]), value = String(text[text.index(after: equals)...])
        if name.lowercased() == TraceParent.headerName, TraceParent(header: value) == nil {
            throw UsageError("--header traceparent: '\(value)' is not a W3C trace context (00-<32 hex>-<16 hex>-<2 hex>, lowercase, ids not all zero); the worker would ignore it")
        }
        return KafkaHeader(name: name, string: value)
    }
}

/// Produces validated lines with at most `maxInFlight` records unacknowledged; runs on one thread.
private final class ProduceRun: Sendable {
    struct Outcome {
        var produced = 0
        var failed = 0
        /// The first failures, kept for the report (bounded).
        var failures: [(line: Int, error: KafkaError)] = []
    }

    let producer: KafkaProducer
    let topic: String
    /// On every record (`--header`).
    let headers: [KafkaHeader]
    private let inFlight: DispatchSemaphore
    private let state = Mutex(Outcome())

    init(producer: KafkaProducer, topic: String, headers: [KafkaHeader], maxInFlight: Int) {
        self.producer = producer
        self.topic = topic
        self.headers = headers
        inFlight = DispatchSemaphore(value: maxInFlight)
    }

    var outcome: Outcome { state.withLock { $0 } }

    func produceLines(path: String, decoder: EventDecoder, lane: Lane, now: Int64, maxLineBytes: Int) throws -> Int {
        try EventLines.decode(path: path, decoder: decoder, lane: lane, now: now, maxLineBytes: maxLineBytes) { bytes, event, line in
            send(Array(bytes), key: Array(event.target.utf8), line: line)
        }
    }

    /// Blocks this (own) thread while `maxInFlight` records await acknowledgement.
    private func send(_ value: [UInt8], key: [UInt8], line: Int) {
        while true {
            inFlight.wait()
            do {
                try producer.produce(topic: topic, key: key, value: value, headers: headers) { result in
                    self.record(result, line: line)
                    self.inFlight.signal()
                }
                return
            } catch let error as KafkaError where error.code == .queueFull {
                // librdkafka's own queue bound was hit first: let deliveries drain, then retry.
                inFlight.signal()
                Thread.sleep(forTimeInterval: 0.01)
            } catch {
                inFlight.signal()
                record(.failure(error as? KafkaError ?? KafkaError(.produce, reason: "\(error)")), line: line)
                return
            }
        }
    }

    private func record(_ result: Result<KafkaDeliveryReport, KafkaError>, line: Int) {
        state.withLock { outcome in
            switch result {
            case .success: outcome.produced += 1
            case let .failure(error):
                outcome.failed += 1
                if outcome.failures.count < 20 { outcome.failures.append((line, error)) }
            }
        }
    }

    /// Waits for every acknowledgement; records still unacknowledged at the deadline count as failed.
    func finish(timeout: Double) throws {
        do {
            try producer.flush(timeout: .milliseconds(Int64(timeout * 1000)))
        } catch let error as KafkaError where error.code == .flushTimedOut {
            Output.err("fanout produce: \(error); giving up on them")
            // Each purged record's completion reports it as failed before `purge` returns.
            try producer.purge(timeout: .seconds(5))
        }
    }
}
