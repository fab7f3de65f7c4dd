import Foundation

/// `fanout loadtest`: a seeded, realistic mix through the embedded pipeline with N workers, reporting
/// throughput, latency percentiles, coalescing and budget compliance.
struct LoadTestCommand: Command {
    static let name = "loadtest"
    static let summary = "Drive N embedded workers with a seeded event mix; report throughput, latency and budget compliance"
    static let help = """
    Usage: fanout loadtest [--events <n>] [--activities <n>] [--channels <n>] [--workers <n>] [--rate <events/s>]
                           [--seed <n>] [--malformed <share>] [--duplicates <share>] [--broadcast-share <share>]
                           [--partitions <n>] [--timeout <seconds>] [--interval-tolerance-ms <ms>] [--json] [--keep-log <dir>]

    Starts, in this process, librdkafka's mock Kafka cluster, the APNs simulator (HTTP/2+TLS, checking
    JWTs and payloads, answering 400 BadDeviceToken for tokens it does not know) and N Fanout workers in
    one consumer group. Registers every activity's update token on activity-tokens, then publishes a
    seeded mix generated on the fly: activities whose stories are progress updates in small and large
    steps, status changes and some alerts, ending with a final state; broadcast channels with score-like
    updates; a share of malformed events and of producer duplicates. Per key, events are in order with
    increasing timestamps. It waits until every offset is committed (group lag 0) and the simulator has
    accepted every activity's and channel's final state, stops the workers cleanly, and reports: events
    produced and consumed per second, sends by lane and priority, the coalescing ratio, dead letters by
    reason, end-to-end latency percentiles, and budget compliance checked push by push from what the
    simulator accepted for each token and channel.

    Latency is measured per accepted push: the simulator's arrival time minus the moment the generator
    handed the event whose state the push carries (same target and timestamp) to the Kafka producer.
    Events coalesced away have no push of their own and are not measured.

    Options:
      --events <n>              records on the event topics, malformed and duplicates included (default 100000, max 5000000)
      --activities <n>          activities on the per-activity lane (default 2000, max 200000)
      --channels <n>            broadcast channels (default 20, max 1000)
      --workers <n>             workers in the consumer group (default 2, max 8)
      --rate <events/s>         publishing rate; 0 = as fast as possible (default 0). The generator never runs
                                more than 20000 events ahead of the workers (the mock cluster keeps ≈5 MiB per partition)
      --seed <n>                seed of the mix (default 1): the same seed publishes the same events
      --malformed <share>       share of events that are malformed and must be dead-lettered (default 0.01)
      --duplicates <share>      share of events that repeat the previous one (default 0.01)
      --broadcast-share <share> share of the other events that go to channels (default 0.2)
      --partitions <n>          partitions of activity-updates and activity-tokens (default 16; broadcast-updates gets a quarter)
      --timeout <seconds>       give up (exit 1, saying what was pending) after this long, startup included (default 600)
      --interval-tolerance-ms <ms>
                                two accepted pushes to one target may be this much closer than min_interval: the
                                engine spaces its send decisions, the simulator times arrivals (default 250)
      --json                    print the report as JSON on stdout (progress goes to stderr either way)
      --keep-log <dir>          keep the workers' JSON logs in <dir> (by default a temporary directory, removed after a pass)

    Exit status: 0 when every check passes, 1 when a check fails or the run did not complete (each failed
    check is printed with an example), 64 on a usage error (like every fanout command), 130 when interrupted (the workers are stopped
    cleanly and what was measured is reported).
    """

    static func run(_ arguments: [String]) async throws -> Int32 {
        let options = try LoadTestOptions.parse(arguments)  // a UsageError: printed with the help hint, exit 64
        // The runner stops itself at the timeout; this guards the shutdown after it (drain, final commit,
        // flush: each bounded at 5 s) so a stuck library call still ends the process loudly.
        let grace = options.timeout + .seconds(60)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(grace.components.seconds * 1000))) {
            Output.err("fanout loadtest: still running \(grace) after starting: shutting down got stuck; exiting with status 1")
            exit(1)
        }
        let signals = SignalWaiter(signals: [SIGINT, SIGTERM])
        // First SIGINT/SIGTERM: stop publishing, stop the workers cleanly, report. A second one exits at once.
        let watcher = Task {
            _ = await signals.next()
            guard !Task.isCancelled else { return }
            Output.err("fanout loadtest: stopping (interrupt again to exit at once)")
            options.interrupt.set()
            _ = await signals.next()
            guard !Task.isCancelled else { return }
            Output.err("fanout loadtest: interrupted twice; exiting without cleaning up")
            exit(130)
        }
        defer { watcher.cancel() }
        let report = try await LoadTestRunner.run(options: options) { line in Output.err("loadtest: " + line) }
        if options.json {
            Output.out(try report.json())
        } else {
            for line in report.render() { Output.out(line) }
        }
        if options.interrupt.isSet { return 130 }
        return report.passed ? 0 : 1
    }
}
