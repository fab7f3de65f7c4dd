import Foundation
import Synchronization

/// The worker's JSON log lines, appended to a file. `Log` calls the sink under its own lock, one
/// whole line at a time.
final class LogFile: Sendable {
    private let handle: FileHandle
    private let failures = Atomic(0)

    init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            throw EmbeddedError("cannot create the worker log file \(path)")
        }
        handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
    }

    deinit { try? handle.close() }

    func write(_ line: String) {
        do {
            try handle.write(contentsOf: Data(line.utf8))
        } catch {
            failures.add(1, ordering: .relaxed)   // reported in the demo's summary
        }
    }

    /// Lines that could not be written (disk full, file removed).
    var failedWrites: Int { failures.load(ordering: .relaxed) }
}
