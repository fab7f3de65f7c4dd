import Foundation

/// Entry point of the `fanout` executable: dispatches to a subcommand.
public enum Fanout {
    /// Every subcommand, in the order `fanout --help` lists them.
    /// Each command lives in its own file under `Sources/FanoutCLI/Commands/`.
    static let commands: [any Command.Type] = [
        DemoCommand.self,
        ValidateCommand.self,
        ProduceCommand.self,
        BrokerCommand.self,
        APNsSimCommand.self,
        RunCommand.self,
        ReplayCommand.self,
        LoadTestCommand.self,
        BenchCommand.self,
        ChannelsCommand.self,
    ]

    public static func main(_ argv: [String] = CommandLine.arguments) async -> Int32 {
        let args = Array(argv.dropFirst())
        guard let first = args.first, first != "--help", first != "-h", first != "help" else {
            Output.out(overview)
            return args.isEmpty ? 64 : 0
        }
        guard let command = commands.first(where: { $0.name == first }) else {
            Output.err("fanout: unknown command '\(first)'. Run 'fanout --help' for the list.")
            return 64
        }
        let rest = Array(args.dropFirst())
        if rest.contains("--help") || rest.contains("-h") {
            Output.out(command.help)
            return 0
        }
        do {
            return try await command.run(rest)
        } catch let error as UsageError {
            Output.err("fanout \(command.name): \(error.description)\nRun 'fanout \(command.name) --help' for usage.")
            return 64
        } catch {
            Output.err("fanout \(command.name): \(error)")
            return 1
        }
    }

    static var overview: String {
        var text = "fanout — Kafka job events to iOS Live Activity pushes on APNs\n\nUsage: fanout <command> [options]\n\nCommands:\n"
        for command in commands {
            text += "  " + command.name.padding(toLength: 12, withPad: " ", startingAt: 0) + command.summary + "\n"
        }
        text += "\nRun 'fanout <command> --help' for a command's options."
        return text
    }
}

/// Writes to stdout/stderr through FileHandle (C's `stdout` global is not concurrency-safe in Swift 6).
public enum Output {
    public static func out(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }
    public static func err(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}
