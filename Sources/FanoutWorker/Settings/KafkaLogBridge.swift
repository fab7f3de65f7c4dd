import FanoutKafka

/// librdkafka's own log lines (connection failures, rebalances, retries) as the worker's JSON log
/// lines, so stderr carries one format. Runs on librdkafka's threads: formatting only.
enum KafkaLogBridge {
    static func handler(_ log: Log) -> KafkaLogHandler {
        let kafkaLog = log.with(["component": "librdkafka"])
        return { record in
            let level: LogLevel = switch record.level {
            case ...3: .error
            case 4: .warning
            case 5, 6: .info
            default: .debug
            }
            kafkaLog.log(level, record.message, ["facility": .string(record.facility), "client": .string(record.client)])
        }
    }
}
