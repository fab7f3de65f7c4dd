import FanoutKafka
import Foundation

/// `fanout broker --control-stdin`: one command a line on standard input, one answer a line on
/// standard output, so a test or a person at the terminal can fail a broker from outside:
///
///     down <broker>          disconnect the broker and refuse new connections (clients retry)
///     up <broker>            accept connections again
///     rtt <broker> <ms>      delay every response of the broker by <ms> milliseconds (0: none)
///
/// Answers: `ok: <what happened>` or `error: <why>`. End of input stops reading, not the broker.
enum BrokerControl: Equatable {
    case down(Int32)
    case up(Int32)
    case roundTripTime(Int32, milliseconds: Int)

    /// Parses one line; the error text says what was expected.
    init(parsing line: String, brokers: Int) throws(BrokerControlError) {
        let words = line.split(whereSeparator: \.isWhitespace).map(String.init)
        guard let verb = words.first else { throw BrokerControlError("empty command; expected down <broker>, up <broker> or rtt <broker> <ms>") }
        func broker() throws(BrokerControlError) -> Int32 {
            guard words.count >= 2, let number = Int32(words[1]), (1...Int32(brokers)).contains(number) else {
                throw BrokerControlError("'\(line)': the broker is a number from 1 to \(brokers)")
            }
            return number
        }
        switch verb {
        case "down", "up":
            guard words.count == 2 else { throw BrokerControlError("'\(line)': expected \(verb) <broker>") }
            self = verb == "down" ? .down(try broker()) : .up(try broker())
        case "rtt":
            guard words.count == 3, let milliseconds = Int(words[2]), milliseconds >= 0 else {
                throw BrokerControlError("'\(line)': expected rtt <broker> <milliseconds ≥ 0>")
            }
            self = .roundTripTime(try broker(), milliseconds: milliseconds)
        default:
            throw BrokerControlError("unknown command '\(verb)'; expected down <broker>, up <broker> or rtt <broker> <ms>")
        }
    }

    /// Applies the command to `cluster`; the answer line.
    func apply(to cluster: MockKafkaCluster) -> String {
        do {
            switch self {
            case .down(let broker):
                try cluster.setBrokerDown(broker)
                return "ok: broker \(broker) down"
            case .up(let broker):
                try cluster.setBrokerUp(broker)
                return "ok: broker \(broker) up"
            case .roundTripTime(let broker, let milliseconds):
                try cluster.setBrokerRoundTripTime(broker, milliseconds: milliseconds)
                return "ok: broker \(broker) round-trip time \(milliseconds) ms"
            }
        } catch {
            return "error: \(error)"
        }
    }

    /// Reads commands from standard input on a thread of its own until end of input.
    static func serveStandardInput(_ cluster: MockKafkaCluster) {
        let thread = Thread.named("broker-control") {
            var pending = Data()
            while true {
                let chunk = FileHandle.standardInput.availableData
                if chunk.isEmpty { return }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    guard !line.allSatisfy(\.isWhitespace) else { continue }
                    do {
                        Output.out(try BrokerControl(parsing: line, brokers: cluster.brokerCount).apply(to: cluster))
                    } catch {
                        Output.out("error: \(error)")
                    }
                }
            }
        }
        thread.start()
    }
}

struct BrokerControlError: Error, Equatable, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
