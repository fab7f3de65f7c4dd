import Foundation

/// `fanout demo`: the whole pipeline in one process, playing a short scripted scene.
struct DemoCommand: Command {
    static let name = "demo"
    static let summary = "Play a scripted scene through an embedded Kafka, a real worker and the APNs simulator"
    static let help = """
    Usage: fanout demo [--speed <factor>] [--quiet] [--no-color] [--keep-log <dir>] [--worker-logs]

    Starts, in this process, librdkafka's mock Kafka cluster, the APNs simulator (trusting a throwaway
    ES256 key generated for the run) and one Fanout worker, then plays a scene: two export jobs with
    many small progress updates, a food delivery started with push-to-start, a football match on a
    broadcast channel, an event with its timestamp in milliseconds, and a user who deletes the app.
    The terminal shows what each Lock Screen displays as the simulator accepts pushes, then a
    summary: events in, sends by lane and priority, coalesced events, dead letters, token feedback
    and committed offsets. It ends by itself in well under a minute: exit 0 when every Lock Screen
    shows its final state and every event is committed, exit 1 (saying what was pending) otherwise.

    Options:
      --speed <factor>     play the story faster (2) or slower (0.5); default 1 (about 25 s)
      --quiet              print only the summary
      --no-color           no ANSI colors (default: colors when stdout is a terminal and NO_COLOR is unset)
      --keep-log <dir>     keep the worker's JSON log (worker.log) and the simulator's delivery log
                           (deliveries.jsonl) in <dir>; by default they go to a temporary directory,
                           removed after a successful run
      --worker-logs        write the worker's JSON log lines to stderr as well as the story to stdout
      --timeout <seconds>  give up (exit 1) after this long, startup included; default 55

    Ctrl-C stops the scene, shuts the worker down cleanly (final commit) and prints the summary (exit 130).
    """

    static func run(_ arguments: [String]) async throws -> Int32 {
        var args = Arguments(arguments)
        var options = DemoOptions()
        if let speed = try args.double("speed") {
            guard (0.1...100).contains(speed) else { throw UsageError("--speed must be within 0.1...100, got \(speed)") }
            options.speed = speed
        }
        options.quiet = args.flag("quiet")
        options.color = !args.flag("no-color") && DemoConsole.stdoutWantsColor()
        options.keepLogDirectory = try args.option("keep-log")
        options.workerLogsToStderr = args.flag("worker-logs")
        if let timeout = try args.double("timeout") {
            guard (1...3600).contains(timeout) else { throw UsageError("--timeout must be within 1...3600 seconds, got \(timeout)") }
            options.timeout = .milliseconds(Int64(timeout * 1000))
        }
        try args.finish()

        let console = DemoConsole(color: options.color, quiet: options.quiet)
        console.line(console.paint("fanout demo", .bold) + " — Kafka (embedded mock cluster) → Fanout worker → APNs (simulator), all in this process.")
        console.note(console.paint("Lines show what each Lock Screen displays, read from the simulator as it accepts pushes.", .dim))
        // The runner stops itself at the timeout; this guards the shutdown after it (drain, final commit,
        // flush: each bounded at 5 s) so a stuck library call still ends the process loudly.
        let grace = options.timeout + .seconds(20)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(grace.components.seconds * 1000))) {
            Output.err("fanout demo: still running \(grace) after starting: shutting down got stuck; exiting with status 1")
            exit(1)
        }
        let signals = interruptOnSignals(options.interrupt)
        let outcome = try await DemoRunner.run(options: options, console: console)
        withExtendedLifetime(signals) {}
        for line in DemoSummary.render(outcome, console: console) { console.line(line) }
        if outcome.interrupted { return 130 }
        return outcome.succeeded ? 0 : 1
    }

    /// First SIGINT/SIGTERM: stop the scene, shut the worker down cleanly, print the summary.
    /// A second one exits at once.
    private static func interruptOnSignals(_ interrupt: DemoInterrupt) -> [DispatchSourceSignal] {
        let queue = DispatchQueue(label: "fanout-demo-signals")
        return [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                if interrupt.isSet {
                    Output.err("fanout demo: interrupted twice; exiting without cleaning up")
                    exit(130)
                }
                Output.err("fanout demo: stopping (interrupt again to exit at once)")
                interrupt.set()
            }
            source.resume()
            return source
        }
    }
}
