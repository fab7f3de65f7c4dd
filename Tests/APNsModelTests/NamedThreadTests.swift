import Foundation
import Synchronization
import Testing
import APNsModel

/// Operators tell the worker's threads apart by the names the OS shows (`top -H`, `perf`).
@Suite struct NamedThreadTests {
    /// What the OS calls the thread `Thread.named` starts, read from inside it.
    private func osName(ofThreadNamed name: String) -> String {
        let seen = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread.named(name) {
            let text = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)
            seen.withLock { $0 = text?.trimmingCharacters(in: .newlines) }
            done.signal()
        }
        thread.start()
        done.wait()
        return seen.withLock { $0 } ?? "(unreadable)"
    }

    @Test func theOperatingSystemSeesTheThreadsName() {
        #expect(osName(ofThreadNamed: "fanout-answers") == "fanout-answers")
    }

    @Test func aLongNameKeepsItsFirstFifteenBytes() {
        #expect(osName(ofThreadNamed: "apns-sim-loop-12345") == "apns-sim-loop-1")
        #expect(Thread.osNameLimit == 15)
    }
}
