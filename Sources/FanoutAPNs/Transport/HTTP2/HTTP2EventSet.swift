import CNghttp2
import Foundation
import Synchronization

/// The nghttp2 transport's epoll set plus a wake pipe, so `send` callers on other threads can
/// interrupt the wait. Owns the epoll descriptor and both pipe ends (closed in `deinit`).
///
/// `wake()` is the only call other threads make (a non-blocking one-byte write, and only when the
/// loop is not already woken); everything else runs on the transport thread, hence `@unchecked Sendable`.
final class HTTP2EventSet: @unchecked Sendable {
    /// `epoll_event.data.u64` of the wake pipe; connections use their index + 1.
    static let wakeToken: UInt64 = 0

    private let epoll: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let wakePending = Atomic<Bool>(false)
    private var events: [epoll_event]

    init() throws(APNsClientError) {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw .transportSetup("epoll_create1: \(String(cString: strerror(errno)))") }
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            close(epoll)
            throw .transportSetup("pipe: \(String(cString: strerror(errno)))")
        }
        wakeRead = ends[0]
        wakeWrite = ends[1]
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        events = [epoll_event](repeating: epoll_event(), count: 64)
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

    /// Thread-safe.
    func wake() {
        guard !wakePending.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    func add(_ descriptor: Int32, token: UInt64, writable: Bool) { control(EPOLL_CTL_ADD, descriptor, token: token, writable: writable) }
    func modify(_ descriptor: Int32, token: UInt64, writable: Bool) { control(EPOLL_CTL_MOD, descriptor, token: token, writable: writable) }
    func remove(_ descriptor: Int32) { epoll_ctl(epoll, EPOLL_CTL_DEL, descriptor, nil) }

    private func control(_ operation: Int32, _ descriptor: Int32, token: UInt64, writable: Bool) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (writable ? EPOLLOUT.rawValue : 0)
        event.data.u64 = token
        epoll_ctl(epoll, operation, descriptor, &event)
    }

    /// Waits up to `timeoutMillis` and calls `ready(token, events)` for each ready descriptor
    /// (the wake pipe is drained here and not reported).
    func wait(timeoutMillis: Int32, _ ready: (UInt64, UInt32) -> Void) {
        let count = epoll_wait(epoll, &events, Int32(events.count), timeoutMillis)
        guard count > 0 else { return }
        for index in 0..<Int(count) {
            let event = events[index]
            if event.data.u64 == Self.wakeToken {
                var scratch = [UInt8](repeating: 0, count: 64)
                while read(wakeRead, &scratch, scratch.count) > 0 {}
                wakePending.store(false, ordering: .releasing)
            } else {
                ready(event.data.u64, event.events)
            }
        }
    }
}
