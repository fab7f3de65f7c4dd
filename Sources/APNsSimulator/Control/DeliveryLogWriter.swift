import Foundation
import Synchronization

/// Appends accepted pushes to the delivery log file as JSON lines, off the event loops: a dedicated
/// thread drains `SimulatorState.pendingLog` every 50 ms; `drain()` can also be called to flush now.
final class DeliveryLogWriter: Sendable {
    private let path: String
    private let engine: SimulatorEngine
    /// Serializes drains (writer thread vs. explicit flushes) and owns the file handle.
    private let file: Mutex<FileHandle?>
    private let running = Atomic<Bool>(true)
    private let finished = DispatchSemaphore(value: 0)

    init(path: String, engine: SimulatorEngine) throws {
        self.path = path
        self.engine = engine
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            throw APNsSimulatorError.configuration("cannot create delivery log \(path)")
        }
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw APNsSimulatorError.configuration("cannot open delivery log \(path) for writing")
        }
        file = Mutex(handle)
    }

    func start() {
        let thread = Thread.named("apns-sim-log") { [self] in
            while running.load(ordering: .acquiring) {
                try? drain()
                Thread.sleep(forTimeInterval: 0.05)
            }
            finished.signal()
        }
        thread.start()
    }

    /// Writes every record accepted so far. Throws when the file cannot be written (the records are counted lost).
    func drain() throws {
        try file.withLock { handle in
            guard let handle else { return }
            let records = engine.state.withLock { state -> [DeliveryRecord] in
                defer { state.pendingLog?.removeAll(keepingCapacity: true) }
                return state.pendingLog ?? []
            }
            guard !records.isEmpty else { return }
            var lines: [UInt8] = []
            lines.reserveCapacity(records.count * 512)
            for record in records { record.appendJSONLine(to: &lines) }
            do {
                try handle.write(contentsOf: lines)
            } catch {
                engine.state.withLock { $0.deliveryLogWriteErrors += records.count }
                throw APNsSimulatorError.configuration("writing delivery log \(path): \(error)")
            }
        }
    }

    func stop() {
        running.store(false, ordering: .releasing)
        finished.wait()
        try? drain()
        file.withLock { handle in
            try? handle?.close()
            handle = nil
        }
    }
}
