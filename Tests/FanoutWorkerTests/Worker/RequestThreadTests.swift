@testable import FanoutWorker
import Foundation
import Synchronization
import Testing

/// The thread behind the token follower and the state restorer: with nothing to read it sleeps until
/// a request comes (a restore starts at once, an idle worker does not wake 50 times a second), and
/// `stop` ends it even while it sleeps.
struct RequestThreadTests {
    @Test func anIdleThreadSleepsUntilARequestAndStopWakesIt() {
        let thread = RequestThread<Int>(name: "fanout-test")
        let iterations = Atomic<Int>(0)
        let handled = Mutex<[Int]>([])
        let got = DispatchSemaphore(value: 0)
        thread.start {
            while let taken = thread.take() {
                iterations.add(1, ordering: .relaxed)
                if taken.isEmpty {
                    thread.waitForRequests()
                    continue
                }
                handled.withLock { $0 += taken }
                got.signal()
            }
        }
        thread.enqueue(1)
        #expect(got.wait(timeout: .now() + 10) == .success)
        // Idle for 0.3 s: a thread that sleeps goes round at most once more (it may be between handling
        // the request and its next wait), one that polls every 20 ms (what this replaced) ≈15 times.
        let idleFrom = iterations.load(ordering: .relaxed)
        Thread.sleep(forTimeInterval: 0.3)
        #expect(iterations.load(ordering: .relaxed) - idleFrom <= 1, "the idle thread slept instead of polling")
        thread.enqueue(2)
        thread.enqueue(3)
        #expect(got.wait(timeout: .now() + 10) == .success)
        #expect(handled.withLock { $0 }.starts(with: [1, 2]))

        let stopped = DispatchSemaphore(value: 0)
        Thread.sleep(forTimeInterval: 0.05)   // let it fall asleep again, so stop has to wake it
        Thread.named("fanout-test-stop") { _ = thread.stop(); stopped.signal() }.start()
        #expect(stopped.wait(timeout: .now() + 10) == .success, "stop wakes a sleeping thread and ends it")
        #expect(!thread.stop(), "a second stop has nothing to end")
    }
}
