#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// A child process for tests (curl, openssl, nghttpd), started with `posix_spawn` directly.
///
/// Not `Foundation.Process`: on Linux its `run()` reads `/proc/self/fd` with a 256-byte over-read
/// (swift-corelibs-foundation #5472, in Swift 6.3.1) and crashes now and then once the test process
/// holds many descriptors, as the full suite does. Pipes are made close-on-exec, and pipe creation and
/// spawning are serialized (`spawning`), so a child gets only its own three standard streams from them,
/// never another child's pipe end (which would keep that pipe from reaching its end).
///
/// `@unchecked Sendable`: `pid` and the pipe handles are immutable; the exit status is behind a mutex.
public final class ChildProcess: @unchecked Sendable {
    public enum Stream: Sendable { case null, pipe }

    public let pid: pid_t
    /// Write end of the child's standard input, when it is `.pipe`.
    public let standardInput: FileHandle?
    /// Read ends of the child's standard output and error, when they are `.pipe`.
    public let standardOutput: FileHandle?
    public let standardError: FileHandle?
    private let exit = Mutex<Int32?>(nil)
    /// Held from creating a child's pipes until it is spawned.
    private static let spawning = Mutex(())

    public struct SpawnError: Error, CustomStringConvertible {
        public var description: String
    }

    /// - Parameter environment: the child's whole environment; nil: this process's.
    public init(_ executable: String, _ arguments: [String], input: Stream = .null, output: Stream = .null, error: Stream = .null,
                environment: [String: String]? = nil) throws {
        let (pid, ends) = try Self.spawning.withLock { _ in try Self.spawn(executable, arguments, [input, output, error], environment) }
        self.pid = pid
        (standardInput, standardOutput, standardError) = (ends[0], ends[1], ends[2])
    }

    /// The child's pid and the parent's ends of its pipes (stdin, stdout, stderr; nil for `.null`).
    private static func spawn(_ executable: String, _ arguments: [String], _ streams: [Stream],
                              _ environment: [String: String]?) throws -> (pid_t, [FileHandle?]) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var parentEnds: [FileHandle?] = []
        var childEnds: [Int32] = []
        for (index, stream) in streams.enumerated() {
            switch stream {
            case .null:
                posix_spawn_file_actions_addopen(&actions, Int32(index), "/dev/null", index == 0 ? O_RDONLY : O_WRONLY, 0)
                parentEnds.append(nil)
            case .pipe:
                var fds: [Int32] = [0, 0]
                guard pipe(&fds) == 0 else { throw SpawnError(description: "pipe: \(String(cString: strerror(errno)))") }
                for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
                let (childEnd, parentEnd) = index == 0 ? (fds[0], fds[1]) : (fds[1], fds[0])
                posix_spawn_file_actions_adddup2(&actions, childEnd, Int32(index))
                childEnds.append(childEnd)
                parentEnds.append(FileHandle(fileDescriptor: parentEnd, closeOnDealloc: true))
            }
        }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for pointer in envp ?? [] { free(pointer) } }
        var pid: pid_t = 0
        let status = envp.map { posix_spawn(&pid, executable, &actions, nil, argv, $0) } ?? posix_spawn(&pid, executable, &actions, nil, argv, environ)
        for fd in childEnds { close(fd) }
        guard status == 0 else { throw SpawnError(description: "posix_spawn \(executable): \(String(cString: strerror(status)))") }
        return (pid, parentEnds)
    }

    deinit {
        if isRunning {
            kill(pid, SIGKILL)
            _ = waitUntilExit()
        }
    }

    /// Whether the child has not exited yet (reaps it when it has).
    public var isRunning: Bool {
        exit.withLock { status in
            if status != nil { return false }
            var raw: Int32 = 0
            guard waitpid(pid, &raw, WNOHANG) == pid else { return true }
            status = Self.decode(raw)
            return false
        }
    }

    public func signal(_ signal: Int32) { if isRunning { kill(pid, signal) } }

    /// Blocks until the child exited; its exit status (128 + signal when killed).
    public func waitUntilExit() -> Int32 {
        exit.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
            let decoded = Self.decode(raw)
            status = decoded
            return decoded
        }
    }

    private static func decode(_ raw: Int32) -> Int32 {
        let signal = raw & 0x7f
        return signal == 0 ? (raw >> 8) & 0xff : 128 + signal
    }

    /// Runs a tool to completion off the caller's thread; its status and what it wrote.
    public static func run(_ executable: String, _ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        let child = try ChildProcess(executable, arguments, output: .pipe, error: .pipe)
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                // Both pipes are read at once, so a child filling one of them never blocks on it.
                let errors = Mutex(Data())
                let errorsRead = DispatchSemaphore(value: 0)
                Thread.detachNewThread {
                    let data = child.standardError!.readDataToEndOfFile()
                    errors.withLock { $0 = data }
                    errorsRead.signal()
                }
                let output = child.standardOutput!.readDataToEndOfFile()
                errorsRead.wait()
                let status = child.waitUntilExit()
                continuation.resume(returning: (status, String(decoding: output, as: UTF8.self), String(decoding: errors.withLock { $0 }, as: UTF8.self)))
            }
        }
    }
}
