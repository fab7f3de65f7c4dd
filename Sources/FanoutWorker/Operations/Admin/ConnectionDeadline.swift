#if canImport(Glibc)
import Glibc
#endif

/// The end of one admin exchange's time: every read and write on the connection waits at most until
/// it, however the peer paces its bytes (`AdminServer`). A socket's own timeouts count per call, so
/// before each call the time that remains is set as that call's timeout.
struct ConnectionDeadline {
    private let end: ContinuousClock.Instant

    init(after timeout: Duration) { end = .now + timeout }

    /// `recv` into `buffer`; -1 with `errno` EAGAIN once the deadline has passed.
    func receive(_ fd: Int32, into buffer: inout [UInt8]) -> Int {
        guard arm(fd, SO_RCVTIMEO) else { return -1 }
        return buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
    }

    /// Sends all of `bytes`, or stops at the deadline or when the peer is gone (nothing more to do
    /// for this connection either way).
    func send(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count, arm(fd, SO_SNDTIMEO) {
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    /// Closes after the response without resetting it: closing with unread request bytes would make
    /// the kernel send RST, and the client could lose the response. Reads (until the deadline, at
    /// most 64 KiB) until the client closes its side.
    func lingerClose(_ fd: Int32) {
        _ = shutdown(fd, Int32(SHUT_WR))
        var buffer = [UInt8](repeating: 0, count: 4096)
        var drained = 0
        while drained < 65_536 {
            let count = receive(fd, into: &buffer)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            drained += count
        }
        close(fd)
    }

    /// Sets the socket's timeout `option` to the time that remains; false (errno EAGAIN) when none does.
    /// A zero timeout would mean "wait forever" to the kernel, so at least a microsecond is set.
    private func arm(_ fd: Int32, _ option: Int32) -> Bool {
        let remaining = end - .now
        guard remaining > .zero else {
            errno = EAGAIN
            return false
        }
        let micros = max(remaining.components.seconds * 1_000_000 + remaining.components.attoseconds / 1_000_000_000_000, 1)
        var value = timeval(tv_sec: Int(micros / 1_000_000), tv_usec: Int(micros % 1_000_000))
        return setsockopt(fd, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<timeval>.size)) == 0
    }
}
