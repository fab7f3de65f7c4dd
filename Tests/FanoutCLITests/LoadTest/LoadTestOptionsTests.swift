import Testing
@testable import FanoutCLI

@Suite struct LoadTestOptionsTests {
    @Test func defaultsAndGivenValues() throws {
        let defaults = try LoadTestOptions.parse([])
        #expect(defaults.events == 100_000 && defaults.activities == 2_000 && defaults.channels == 20 && defaults.workers == 2)
        #expect(defaults.rate == 0 && !defaults.json)
        let given = try LoadTestOptions.parse(["--events=5000", "--activities", "10", "--channels", "0", "--workers", "3", "--rate", "250",
                                               "--seed", "42", "--json", "--timeout", "30", "--interval-tolerance-ms", "100"])
        #expect(given.events == 5000 && given.activities == 10 && given.channels == 0 && given.workers == 3)
        #expect(given.rate == 250 && given.seed == 42 && given.json)
        #expect(given.timeout == .seconds(30) && given.intervalTolerance == .milliseconds(100))
        #expect(given.broadcastShare == 0)   // no channels, no broadcast events
    }

    @Test(arguments: [
        (["--events", "0"], "--events must be within 1...5000000, got 0"),
        (["--events", "many"], "--events expects a whole number, got 'many'"),
        (["--workers", "9"], "--workers must be within 1...8, got 9"),
        (["--activities", "0"], "--activities must be within 1...200000, got 0"),
        (["--rate", "-1"], "--rate must be within 0...1000000 events/s (0 = as fast as possible), got -1.0"),
        (["--seed", "-3"], "--seed expects a whole number ≥ 0, got '-3'"),
        (["--malformed", "0.7"], "--malformed is a share of the events within 0...0.5, got 0.7"),
        (["--duplicates", "x"], "--duplicates expects a number, got 'x'"),
        (["--timeout", "0"], "--timeout must be within 1...86400 seconds, got 0.0"),
        (["--events"], "--events needs a value"),
        (["--bogus"], "unexpected argument '--bogus'"),
    ])
    func badValuesAreUsageErrors(arguments: [String], message: String) {
        #expect(throws: UsageError.self) { try LoadTestOptions.parse(arguments) }
        do {
            _ = try LoadTestOptions.parse(arguments)
        } catch {
            #expect("\(error)" == message)
        }
    }

    @Test func tooFewEventsForTheStoriesIsAUsageError() {
        #expect(throws: UsageError.self) { try LoadTestOptions.parse(["--events", "100", "--activities", "60"]) }
        #expect(throws: UsageError.self) { try LoadTestOptions.parse(["--events", "100", "--activities", "10", "--channels", "20"]) }
        #expect(throws: Never.self) { try LoadTestOptions.parse(["--events", "100", "--activities", "10", "--channels", "5"]) }
    }

    @Test func theCommandExitsWithTwoOnAUsageError() async throws {
        await #expect(throws: UsageError.self) { _ = try await LoadTestCommand.run(["--workers", "0"]) }
        await #expect(throws: UsageError.self) { _ = try await LoadTestCommand.run(["--nonsense"]) }
    }
}
