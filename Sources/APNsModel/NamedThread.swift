import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension Thread {
    /// The longest name Linux keeps for a thread (`TASK_COMM_LEN` less the terminator).
    public static let osNameLimit = 15

    /// A thread, not yet started, that runs `body` under `name` — as the operating system sees it
    /// too (`top -H`, `perf`, `/proc/<pid>/task/*/comm`), so an operator can tell the worker's
    /// threads apart. Foundation on Linux keeps `Thread.name` to itself: the new thread names
    /// itself first, with the first `osNameLimit` bytes of `name`.
    public static func named(_ name: String, _ body: @escaping @Sendable () -> Void) -> Thread {
        let thread = Thread {
            nameCurrentThreadForOS(name)
            body()
        }
        thread.name = name
        return thread
    }

    /// Names the calling thread for the OS. A failure only leaves the inherited name.
    private static func nameCurrentThreadForOS(_ name: String) {
        #if os(Linux)
        let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        _ = Array(name.utf8.prefix(osNameLimit)).withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        #endif
    }
}
