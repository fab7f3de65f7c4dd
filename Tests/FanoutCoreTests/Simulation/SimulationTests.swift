import Foundation
import Testing
@testable import FanoutCore

/// Seeded deterministic simulation. `FANOUT_SIM_SEEDS=n` runs n seeds (default 1000);
/// `FANOUT_SIM_SEED=s` replays one seed.
@Suite struct SimulationTests {
    @Test func invariantsHoldAcrossSeeds() throws {
        let environment = ProcessInfo.processInfo.environment
        let seeds: [UInt64]
        if let single = environment["FANOUT_SIM_SEED"].flatMap(UInt64.init) {
            seeds = [single]
        } else {
            let count = environment["FANOUT_SIM_SEEDS"].flatMap(UInt64.init) ?? 1000
            seeds = Array(1...count)
        }
        var failures: [String] = []
        var failed = 0
        var total = SimulationStats()
        for seed in seeds {
            var simulation = Simulation(seed: seed)
            do {
                try simulation.run()
                total.add(simulation.stats)
                total.steps += simulation.steps
            } catch {
                failed += 1
                if failures.count < 5 { failures.append("\(error)  (replay: FANOUT_SIM_SEED=\(seed))") }
            }
        }
        for failure in failures { Issue.record(Comment(rawValue: failure)) }
        print("simulation over \(seeds.count) seeds, \(failed) failed: \(total)")
        if seeds.count >= 100 {
            // Every behaviour the invariants are about must have happened, or the run proved nothing.
            #expect(total.sends > total.events / 10 && total.coalescedSends > 0 && total.revokes > 0)
            #expect(total.feedback > 0 && total.pauses > 0 && total.resumes > 0 && total.crashes > 0)
            #expect(total.outcomes["retry", default: 0] > 0 && total.deadLetters["no-token", default: 0] > 0)
            #expect(Set(total.drops.keys).isSuperset(of: ["duplicate-id", "not-newer", "after-end"]))
        }
    }

    @Test func sameSeedSameRun() throws {
        var first = Simulation(seed: 42)
        var second = Simulation(seed: 42)
        try first.run()
        try second.run()
        #expect(first.steps == second.steps)
        #expect(first.committed == second.committed)
        #expect(first.device.timestampsByTarget == second.device.timestampsByTarget)
    }
}
