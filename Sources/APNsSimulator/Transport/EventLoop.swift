import FanoutCrypto
import FanoutHTTP2
import Foundation
import Synchronization

/// One event-loop thread: an epoll set over non-blocking sockets, serving the TLS connections it owns.
/// Loop 0 also accepts on the listeners and hands connections round-robin to every loop.
///
/// Everything except `inbox`, `running` and the event set's wake is confined to the loop's own thread,
/// which is why the type is `@unchecked Sendable`: other threads only call `adopt` and `stop`.
final class EventLoop: @unchecked Sendable {
    struct Listener {
        var socket: ListeningSocket
        var kind: ListenerKind
    }

    private struct Timer {
        var deadline: UInt64
        var descriptor: Int32
        var serial: UInt64
        var streamID: Int32
        var plan: ResponsePlan
    }

    let index: Int
    private let engine: SimulatorEngine
    private let tlsContext: TLSServerContext
    private let events: SocketEventSet
    private let inbox = Mutex<[(Int32, ListenerKind)]>([])
    private let running = Atomic<Bool>(true)
    private let finished = DispatchSemaphore(value: 0)
    private let wakeupCount = Atomic<Int>(0)

    private var listeners: [Listener] = []
    private var siblings: [EventLoop] = []
    private var nextSibling = 0
    private var nextSerial: UInt64 = 0
    private var connections: [Int32: ServerConnection] = [:]
    private var timers: [Timer] = []
    private let deadlines: ConnectionDeadlines
    private var nextSweep: UInt64 = 0
    /// Set after an accept failure (out of descriptors): the listeners are out of the epoll set until then.
    private var listenersPausedUntil: UInt64?
    static let acceptPauseNanos: UInt64 = 100_000_000
    /// Scratch buffer for SSL_read, shared by this loop's connections.
    let readBuffer: UnsafeMutableRawBufferPointer

    init(index: Int, engine: SimulatorEngine, tlsContext: TLSServerContext) throws {
        self.index = index
        self.engine = engine
        self.tlsContext = tlsContext
        deadlines = ConnectionDeadlines(configuration: engine.configuration)
        do {
            events = try SocketEventSet(capacity: 128)
        } catch {
            throw APNsSimulatorError.socket("\(error)")
        }
        readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    }

    deinit {
        readBuffer.deallocate()
    }

    /// Loop 0 only: accept on these listeners and spread connections over `siblings` (including itself).
    func configureAcceptor(listeners: [Listener], siblings: [EventLoop]) {
        self.listeners = listeners
        self.siblings = siblings
        for listener in listeners { watch(listener.socket.descriptor, writable: false, add: true) }
    }

    func start() {
        let thread = Thread.named("apns-sim-loop-\(index)") { [self] in
            run()
            OpenSSLThreadState.release()  // before the signal: `stop()`'s caller may exit the process
            finished.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Asks the loop to close its connections and exit, and waits until it has.
    func stop() {
        running.store(false, ordering: .releasing)
        events.wake()
        finished.wait()
    }

    /// How often `epoll_wait` returned (any thread may read it): a loop that spins shows here.
    var wakeups: Int { wakeupCount.load(ordering: .relaxed) }

    /// Called from loop 0's thread: take over an accepted socket.
    func adopt(_ descriptor: Int32, kind: ListenerKind) {
        inbox.withLock { $0.append((descriptor, kind)) }
        events.wake()
    }

    func schedule(afterMillis: Int, connection: ServerConnection, streamID: Int32, plan: ResponsePlan) {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(afterMillis) * 1_000_000
        let timer = Timer(deadline: deadline, descriptor: connection.descriptor, serial: connection.serial, streamID: streamID, plan: plan)
        var low = 0, high = timers.count
        while low < high {
            let middle = (low + high) / 2
            if timers[middle].deadline <= deadline { low = middle + 1 } else { high = middle }
        }
        timers.insert(timer, at: low)
    }

    private func run() {
        nextSweep = DispatchTime.now().uptimeNanoseconds + deadlines.sweepIntervalNanos
        while running.load(ordering: .acquiring) {
            let before = DispatchTime.now().uptimeNanoseconds
            let wakeAt = min(timers.first?.deadline ?? .max, nextSweep, listenersPausedUntil ?? .max)
            let timeout = wakeAt <= before ? 0 : Int32(min(1000, (wakeAt - before) / 1_000_000 + 1))
            let outcome = events.wait(timeoutMillis: timeout)
            wakeupCount.add(1, ordering: .relaxed)
            switch outcome {
            case .ready: break
            case .interrupted: continue
            case .failed(let error):
                // Only EBADF, EFAULT or EINVAL are left: the loop's own epoll set is broken (a bug), and
                // nothing on this loop can be served again. Exiting quietly would leave loop 0 handing
                // connections to a dead loop (clients hang until their timeouts) while the process looks
                // healthy. Crash loudly instead, so the operator sees the reason and a supervisor restarts it.
                fatalError("apns-sim event loop \(index): epoll_wait failed: \(String(cString: strerror(error))) (errno \(error))")
            }
            let now = DispatchTime.now().uptimeNanoseconds
            events.forEachReady { token, ready in
                if token == SocketEventSet.wakeToken { return adoptInbox() }
                let descriptor = Int32(truncatingIfNeeded: token)
                if let listener = listeners.first(where: { $0.socket.descriptor == descriptor }) {
                    acceptAll(listener)
                } else if let connection = connections[descriptor] {
                    connection.lastActivity = now
                    service(connection, events: ready)
                }
            }
            fireTimers()
            if let until = listenersPausedUntil, now >= until {
                listenersPausedUntil = nil
                for listener in listeners { watch(listener.socket.descriptor, writable: false, add: true) }
            }
            if now >= nextSweep {
                sweep(now: now)
                nextSweep = now + deadlines.sweepIntervalNanos
            }
        }
        for descriptor in Array(connections.keys) { drop(descriptor, reset: false) }
        for (descriptor, _) in inbox.withLock({ box in defer { box.removeAll() }; return box }) {
            close(descriptor)
            engine.state.withLock { $0.connectionsOpen -= 1 }
        }
        // Loop 0 lists itself among its siblings: break that cycle so the loop (epoll set, wake pipe) is freed.
        siblings = []
        listeners = []
    }

    /// After a wake: open the connections other loops handed over.
    private func adoptInbox() {
        let adopted = inbox.withLock { box in defer { box.removeAll() }; return box }
        for (descriptor, kind) in adopted { open(descriptor, kind: kind) }
    }

    private func acceptAll(_ listener: Listener) {
        for _ in 0..<256 {
            let descriptor: Int32
            switch listener.socket.accept() {
            case .connection(let accepted): descriptor = accepted
            case .none: return
            case .failed:
                pauseListeners()
                return
            }
            let admitted = engine.state.withLock { state -> Bool in
                guard state.connectionsOpen < engine.configuration.maxConnections else {
                    state.connectionsRefused += 1
                    return false
                }
                state.connectionsOpen += 1
                state.connectionsAccepted += 1
                return true
            }
            guard admitted else { close(descriptor); continue }
            let target = siblings[nextSibling % siblings.count]
            nextSibling += 1
            if target === self { open(descriptor, kind: listener.kind) } else { target.adopt(descriptor, kind: listener.kind) }
        }
    }

    /// accept() failed (typically EMFILE: out of descriptors) and the listener stays readable: retrying at once
    /// would spin this thread at full speed. Take the listeners out of the epoll set for a moment instead; the
    /// waiting connections stay in the backlog until descriptors are free again.
    private func pauseListeners() {
        engine.state.withLock { $0.acceptFailures += 1 }
        guard listenersPausedUntil == nil else { return }
        for listener in listeners { events.remove(listener.socket.descriptor) }
        listenersPausedUntil = DispatchTime.now().uptimeNanoseconds + Self.acceptPauseNanos
    }

    private func open(_ descriptor: Int32, kind: ListenerKind) {
        nextSerial += 1
        let serial = (UInt64(index) << 48) | nextSerial
        let tls: TLSConnection
        do {
            tls = try tlsContext.makeConnection(socket: descriptor)
        } catch {
            close(descriptor)
            engine.state.withLock { $0.connectionsOpen -= 1 }
            return
        }
        do {
            let connection = try ServerConnection(descriptor: descriptor, serial: serial, kind: kind, tls: tls, engine: engine, loop: self)
            connections[descriptor] = connection
            watch(descriptor, writable: false, add: true)
        } catch {
            // The connection owned the descriptor from its first line: its deinit (which runs when an
            // initializer throws after every property is set) already closed it. Closing it here
            // again could close a descriptor another connection has been given since.
            engine.state.withLock { $0.connectionsOpen -= 1 }
        }
    }

    private func service(_ connection: ServerConnection, events ready: SocketEventSet.Events) {
        let wasWaiting = connection.wantsWritable
        var keep = true
        if ready.contains(.readable) || (ready.contains(.writable) && connection.readWaitsForWritable) {
            keep = connection.onReadable()
        } else if ready.contains(.writable) {
            keep = connection.flush()
        }
        guard keep else {
            drop(connection.descriptor, reset: connection.resetRequested)
            return
        }
        if connection.wantsWritable != wasWaiting { watch(connection.descriptor, writable: connection.wantsWritable, add: false) }
    }

    private func fireTimers() {
        guard !timers.isEmpty else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        var due = 0
        while due < timers.count, timers[due].deadline <= now { due += 1 }
        guard due > 0 else { return }
        let fired = timers[..<due]
        timers.removeFirst(due)
        var touched: [Int32: ServerConnection] = [:]
        for timer in fired {
            guard let connection = connections[timer.descriptor], connection.serial == timer.serial else { continue }
            connection.sendDelayed(timer.plan, streamID: timer.streamID)
            touched[timer.descriptor] = connection
        }
        for connection in touched.values { service(connection, events: .writable) }
    }

    /// Closes connections past their handshake, idle or GOAWAY-grace deadline.
    private func sweep(now: UInt64) {
        var expired: [Int32] = []
        var idled = 0
        // Iterates a copy: `service` may drop (remove) the connection it closes.
        for (descriptor, connection) in connections {
            switch deadlines.verdict(now: now, openedAt: connection.openedAt, handshakeDone: connection.isHandshakeDone,
                                     lastActivity: connection.lastActivity, hasOpenStreams: connection.hasOpenStreams,
                                     goAwayAt: connection.goAwayAt) {
            case .keep: continue
            case .idle:
                idled += 1
                connection.goAwayIdle(now: now)
                service(connection, events: .writable)
            case .handshakeTimedOut, .goAwayGraceOver:
                expired.append(descriptor)
            }
        }
        guard idled + expired.count > 0 else { return }
        engine.state.withLock { $0.connectionsTimedOut += idled + expired.count }
        for descriptor in expired { drop(descriptor, reset: false) }
    }

    private func drop(_ descriptor: Int32, reset: Bool) {
        guard let connection = connections.removeValue(forKey: descriptor) else { return }
        events.remove(descriptor)
        if reset {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
        // Uncount before the descriptor closes, so a peer that sees the close also sees the free slot.
        engine.state.withLock { $0.connectionsOpen -= 1 }
        // ServerConnection's deinit (now) frees the sessions and closes the descriptor.
        withExtendedLifetime(connection) {}
    }

    private func watch(_ descriptor: Int32, writable: Bool, add: Bool) {
        let token = UInt64(UInt32(bitPattern: descriptor))
        if add { events.add(descriptor, token: token, writable: writable) } else { events.modify(descriptor, token: token, writable: writable) }
    }
}
