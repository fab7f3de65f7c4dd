import Foundation
import Synchronization

/// Reads a pipe to its end on a thread of its own with blocking reads. Used instead of
/// `FileHandle.readabilityHandler`, whose dispatch source on Linux can outlive the descriptor it watches
/// (a crash inside libdispatch's event loop once the descriptor number is reused).
final class PipeDrain: Sendable {
    private let collected = Mutex(Data())
    private let finished = DispatchSemaphore(value: 0)

    /// Starts reading now; the thread holds `handle` (and so its descriptor) open until end of file.
    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            let descriptor = handle.fileDescriptor
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let count = read(descriptor, &buffer, buffer.count)
                if count > 0 {
                    collected.withLock { $0.append(contentsOf: buffer[..<count]) }
                } else if count < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
            withExtendedLifetime(handle) {}
            finished.signal()
        }
    }

    /// What was read so far.
    var data: Data { collected.withLock { $0 } }

    /// Waits (blocking this thread) for end of file, then returns everything read.
    func waitForEnd() -> Data {
        finished.wait()
        finished.signal()
        return data
    }
}
