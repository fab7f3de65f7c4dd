import Foundation
import Testing
@testable import FanoutCore

/// Seeded deterministic simulation, split into shards that Swift Testing runs in parallel.
/// `FANOUT_SIM_SEEDS=n` runs seeds 1...n (default 1000); `FANOUT_SIM_SEED=s` replays one seed.
/// `scripts/simulate` runs 10,000 in a release build.
@Suite struct SimulationTests {
    static let shards = 8

    static func seeds(shard: Int) -> [UInt64] {
        let environment = ProcessInfo.processInfo.environment
        if let single = environment["FANOUT_SIM_SEED"].flatMap(UInt64.init) {
            return shard == 0 ? [single] : []
        }
        let count = environment["FANOUT_SIM_SEEDS"].flatMap(UInt64.init) ?? 1000
        return (1...max(count, 1)).filter { Int($0 % UInt64(shards)) == shard }
    }

    @Test(arguments: 0..<shards) func invariantsHoldAcrossSeeds(shard: Int) throws {
        let seeds = Self.seeds(shard: shard)
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
                let replay = "\(error)  (replay: FANOUT_SIM_SEED=\(seed) swift test --skip-build --filter SimulationTests)"
                failed += 1
                if failures.count < 5 { failures.append(replay) }
            }
        }
        for failure in failures { Issue.record(Comment(rawValue: failure)) }
        print("simulation shard \(shard) over \(seeds.count) seeds, \(failed) failed: \(total)")
        // Some behaviours are rare (a stale token catch-up comes about once in 50 seeds): a shard of fewer
        // than 250 seeds may miss one by chance, so only the larger runs (CI's 10,000) require them all.
        if seeds.count >= 250 {
            // Every behaviour the invariants are about must have happened, or the run proved nothing.
            #expect(total.sends > total.events / 10 && total.coalescedSends > 0 && total.revokes > 0)
            #expect(total.feedback > 0 && total.pauses > 0 && total.resumes > 0 && total.crashes > 0)
            #expect(total.outcomes["retry", default: 0] > 0 && total.deadLetters["no-token", default: 0] > 0)
            #expect(total.ambiguousDeliveries > 0 && total.endsOfPossiblyStartedDeadLettered > 0 && total.endedForgotten > 0)
            #expect(total.laneFull > 0, "no run filled a lane to its send capacity")
            #expect(Set(total.drops.keys).isSuperset(of: ["duplicate-id", "not-newer", "after-end", "ended-before-start"]))
            // The worker's decisions (issue 11): rebalances with sends in flight and losses, sends going on
            // elsewhere meanwhile, commits refused and unanswered, stale token catch-ups, channel
            // lookups, backpressure pauses and failing lanes.
            #expect(total.revokesWithSendsInFlight > 0 && total.losses > 0 && total.sendsWhileClosing > 0)
            #expect(total.commits > 0 && total.commitsRefused > 0 && total.commitsUnanswered > 0)
            #expect(total.heartbeats > 0 && total.heartbeatRejoins > 0, "no heartbeat's answer started a rejoin")
            #expect(total.staleCatchUps > 0 && total.lookups > 0 && total.fetchPauses > 0 && total.laneFailures > 0)
            // The state changelog (odd seeds only, so only shards that hold some; issue 13): saved, deleted,
            // restored, and budgets held across handoffs.
            if seeds.contains(where: { $0 % 2 == 1 }) {
                #expect(total.stateSaves > 0 && total.stateTombstones > 0 && total.stateRestored > 0 && total.watchesHandedOver > 0)
                #expect(total.pushToStartBudgetsHandedOver > 0, "no crash kept a push-to-start token's budget")
            }
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
