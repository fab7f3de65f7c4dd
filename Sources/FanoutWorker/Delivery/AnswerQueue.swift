import APNsModel
import FanoutAPNs
import FanoutCore
import Foundation
import Synchronization

/// APNs answers, handed from the APNs client threads to the worker's answer thread, which feeds them
/// to the engine in batches (one lock for many answers) and starts the sends it decides on. The
/// client threads then only speak HTTP/2: the engine's decisions no longer run inline on them
/// (README "Load testing and benchmarks": two thirds of the transport thread's time was this work).
///
/// Bounded by what is in flight: each send is answered exactly once, and the engine holds each lane
/// to what its APNs client can take. Before `start` and after `stop`, an answer is fed to the engine
/// on the thread that brings it, so none is ever left unheard.
final class AnswerQueue: Sendable {
    struct Answer: Sendable {
        let send: SendRequest
        let outcome: SendOutcome
        let result: APNsResult?
        /// From the send's start to its answer, measured when APNs answered (nil: it never left).
        let latency: Duration?

        /// A send that failed before it reached APNs: no HTTP result, no latency.
        static func unsent(_ send: SendRequest, _ outcome: SendOutcome) -> Answer {
            Answer(send: send, outcome: outcome, result: nil, latency: nil)
        }
    }

    private struct State {
        var answers: [Answer] = []
        var running = false
        var sleeping = false
    }

    /// The most answers fed to the engine under one lock: a batch does not hold the intake thread
    /// off the engine for long.
    static let batchLimit = 256
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    /// Queues an answer for the answer thread; when it is not running, feeds it here and now.
    func add(_ answer: Answer, core: WorkerCore) {
        let (queued, wakeThread) = state.withLock { state -> (Bool, Bool) in
            guard state.running else { return (false, false) }
            state.answers.append(answer)
            defer { state.sleeping = false }
            return (true, state.sleeping)
        }
        if wakeThread { wake.signal() }
        if !queued { core.perform(core.complete(answer)) }
    }

    func start(core: WorkerCore) {
        state.withLock { $0.running = true }
        let thread = Thread.named("fanout-answers") { [self] in
            var taken: [Answer] = []
            taken.reserveCapacity(Self.batchLimit)
            while true {
                let running = state.withLock { state -> Bool in
                    swap(&state.answers, &taken)
                    if taken.isEmpty && state.running { state.sleeping = true }
                    return state.running
                }
                if taken.isEmpty {
                    guard running else { break }
                    wake.wait()
                    continue
                }
                var start = 0
                while start < taken.count {
                    let end = min(start + Self.batchLimit, taken.count)
                    core.perform(core.complete(taken[start..<end]))
                    start = end
                }
                taken.removeAll(keepingCapacity: true)
            }
            finished.signal()
        }
        thread.start()
    }

    /// Feeds what is queued, then stops the thread and waits for it; answers after this are fed inline.
    func stop() {
        let wasRunning = state.withLock { state -> Bool in
            defer { state.running = false }
            return state.running
        }
        guard wasRunning else { return }
        wake.signal()
        finished.wait()
    }
}
