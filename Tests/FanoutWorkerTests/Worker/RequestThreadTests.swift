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
        let afterFirst = iterations.load(ordering: .relaxed)
        // Time for a loop that does not sleep to go round many times; one that sleeps goes round once.
        Thread.sleep(forTimeInterval: 0.1)
        thread.enqueue(2)
        thread.enqueue(3)
        #expect(got.wait(timeout: .now() + 10) == .success)
        #expect(handled.withLock { $0 }.starts(with: [1, 2]))
        #expect(iterations.load(ordering: .relaxed) - afterFirst <= 3, "the idle thread slept instead of polling")

        let stopped = DispatchSemaphore(value: 0)
        Thread.sleep(forTimeInterval: 0.05)   // let it fall asleep again, so stop has to wake it
        Thread.named("fanout-test-stop") { _ = thread.stop(); stopped.signal() }.start()
        #expect(stopped.wait(timeout: .now() + 10) == .success, "stop wakes a sleeping thread and ends it")
        #expect(!thread.stop(), "a second stop has nothing to end")
    }
}
