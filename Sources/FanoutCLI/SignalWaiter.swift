import Dispatch
import Foundation

/// Turns SIGINT/SIGTERM into an awaitable event via dispatch signal sources (no C handler).
final class SignalWaiter: Sendable {
    private let stream: AsyncStream<Int32>
    private let sources: [SourceBox]

    final class SourceBox: @unchecked Sendable {
        // A DispatchSource is thread-safe; it is created, resumed and cancelled exactly once each.
        let source: DispatchSourceSignal
        init(_ source: DispatchSourceSignal) { self.source = source }
    }

    init(signals: [Int32]) {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self, bufferingPolicy: .bufferingNewest(4))
        self.stream = stream
        let queue = DispatchQueue(label: "fanout.signals")
        sources = signals.map { number in
            Foundation.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return SourceBox(source)
        }
    }

    /// Stops watching and gives the signals their default action back (a process that keeps running,
    /// such as a test calling a command, can be interrupted again).
    deinit {
        for box in sources {
            box.source.cancel()
            Foundation.signal(Int32(box.source.handle), SIG_DFL)
        }
    }

    /// Suspends until one of the signals arrives; returns its number.
    func next() async -> Int32 {
        for await number in stream { return number }
        return 0
    }
}
