import CNghttp2
import Foundation
import Synchronization

/// An epoll set plus a wake pipe, so other threads can interrupt the wait. Owns the epoll descriptor
/// and both pipe ends (closed in `deinit`), not the descriptors it watches.
///
/// Lives here because epoll reaches Swift through the CNghttp2 shim (Glibc does not export it), and
/// both HTTP/2 event loops (the APNs client's transport thread, the simulator's loops) use it.
///
/// `wake()` is the only call other threads make (a non-blocking one-byte write, and only when the set
/// is not already woken); everything else runs on the owning thread, hence `@unchecked Sendable`.
public final class SocketEventSet: @unchecked Sendable {
    /// The token `forEachReady` reports for a wake (after draining the pipe); never use it for a descriptor.
    public static let wakeToken: UInt64 = .max

    /// Readiness of one descriptor.
    public struct Events: OptionSet, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// Readable, or hung up / in error (a read then reports why).
        public static let readable = Events(rawValue: 1)
        public static let writable = Events(rawValue: 2)
    }

    /// How a `wait` ended.
    public enum WaitOutcome: Equatable {
        /// This many descriptors (the wake pipe included) are ready, or none when the timeout passed.
        case ready(Int)
        /// A signal interrupted the wait (EINTR).
        case interrupted
        /// `epoll_wait` failed with this errno: the set itself is broken (EBADF, EFAULT, EINVAL).
        case failed(errno: Int32)
    }

    private let epoll: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let wakePending = Atomic<Bool>(false)
    private var events: [epoll_event]
    private var readyCount = 0

    /// `capacity`: at most this many ready descriptors are reported per `wait`.
    public init(capacity: Int) throws(SystemCallError) {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw SystemCallError(call: "epoll_create1", errno: errno) }
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            let error = errno
            close(epoll)
            throw SystemCallError(call: "pipe", errno: error)
        }
        wakeRead = ends[0]
        wakeWrite = ends[1]
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        events = [epoll_event](repeating: epoll_event(), count: max(1, capacity))
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = Self.wakeToken
        epoll_ctl(epoll, EPOLL_CTL_ADD, wakeRead, &event)
    }

    deinit {
        close(epoll)
        close(wakeRead)
        close(wakeWrite)
    }

    /// Thread-safe: makes the current or next `wait` return, and `forEachReady` report `wakeToken`.
    public func wake() {
        guard !wakePending.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Watches `descriptor` for readability (and hang-up), and for writability when `writable`.
    public func add(_ descriptor: Int32, token: UInt64, writable: Bool) {
        control(EPOLL_CTL_ADD, descriptor, token: token, writable: writable)
    }

    public func modify(_ descriptor: Int32, token: UInt64, writable: Bool) {
        control(EPOLL_CTL_MOD, descriptor, token: token, writable: writable)
    }

    public func remove(_ descriptor: Int32) { epoll_ctl(epoll, EPOLL_CTL_DEL, descriptor, nil) }

    private func control(_ operation: Int32, _ descriptor: Int32, token: UInt64, writable: Bool) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (writable ? EPOLLOUT.rawValue : 0)
        event.data.u64 = token
        epoll_ctl(epoll, operation, descriptor, &event)
    }

    /// Waits up to `timeoutMillis` (0: poll, -1: forever) for ready descriptors; `forEachReady` reports them.
    public func wait(timeoutMillis: Int32) -> WaitOutcome {
        let count = epoll_wait(epoll, &events, Int32(events.count), timeoutMillis)
        if count < 0 {
            readyCount = 0
            let error = errno
            return error == EINTR ? .interrupted : .failed(errno: error)
        }
        readyCount = Int(count)
        return .ready(readyCount)
    }

    /// Calls `ready(token, events)` for each descriptor the last `wait` found ready. A wake is reported
    /// as `wakeToken` after the pipe is drained, so work posted before a `wake()` is visible then.
    public func forEachReady(_ ready: (UInt64, Events) -> Void) {
        let readableMask = EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue
        for index in 0..<readyCount {
            let event = events[index]
            if event.data.u64 == Self.wakeToken {
                var scratch = [UInt8](repeating: 0, count: 64)
                while read(wakeRead, &scratch, scratch.count) > 0 {}
                wakePending.store(false, ordering: .releasing)
                ready(Self.wakeToken, .readable)
            } else {
                var mask: Events = []
                if event.events & readableMask != 0 { mask.insert(.readable) }
                if event.events & EPOLLOUT.rawValue != 0 { mask.insert(.writable) }
                ready(event.data.u64, mask)
            }
        }
        readyCount = 0
    }
}
