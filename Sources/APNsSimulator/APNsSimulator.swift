import FanoutCrypto
import Foundation
import Synchronization

/// An APNs look-alike for tests and load tests: HTTP/2 over TLS (ALPN h2) with Apple's request rules,
/// JWT checks, token states, broadcast channels, injectable faults, a delivery log and device views.
///
/// Threads: `threads` event loops (epoll, non-blocking sockets; loop 0 also accepts), one control-endpoint
/// thread and, with a delivery log file, one writer thread. Nothing runs on Swift's cooperative pool.
/// All public methods are thread-safe.
public final class APNsSimulator: Sendable {
    public let configuration: APNsSimulatorConfiguration
    /// PEM file clients pass as their CA (`curl --cacert`). With a given certificate it is that certificate file.
    public let caCertificatePath: String

    private let engine: SimulatorEngine
    private let tlsContext: TLSServerContext
    private let generatedDirectory: String?
    private let running = Mutex<Running?>(nil)

    private struct Running: Sendable {
        var loops: [EventLoop]
        var listeners: [ListeningSocket]
        var control: ControlServer
        var logWriter: DeliveryLogWriter?
        var port: Int
        var managementPort: Int
        var controlPort: Int
    }

    public init(configuration: APNsSimulatorConfiguration) throws {
        if configuration.apps.isEmpty { throw APNsSimulatorError.configuration("at least one app bundle ID is required") }
        if configuration.keys.isEmpty { throw APNsSimulatorError.configuration("at least one JWT public key (kid → PEM) is required") }
        if configuration.teamID.isEmpty { throw APNsSimulatorError.configuration("teamID is required") }
        if configuration.threads < 1 || configuration.threads > 64 { throw APNsSimulatorError.configuration("threads must be within 1...64") }
        if configuration.maxConcurrentStreams < 1 { throw APNsSimulatorError.configuration("maxConcurrentStreams must be at least 1") }
        if configuration.maxConnections < 1 { throw APNsSimulatorError.configuration("maxConnections must be at least 1") }
        if configuration.maxRequestsPerTokenPerSecond < 0 {
            throw APNsSimulatorError.configuration("maxRequestsPerTokenPerSecond must be 0 (no limit) or more")
        }
        if SocketAddress(host: configuration.host, port: 0) == nil {
            throw APNsSimulatorError.configuration(
                "host must be a numeric IPv4 or IPv6 address (like 127.0.0.1, 0.0.0.0, ::1 or ::), got '\(configuration.host)'")
        }
        for (name, seconds) in [("handshakeTimeoutSeconds", configuration.handshakeTimeoutSeconds),
                                ("idleTimeoutSeconds", configuration.idleTimeoutSeconds),
                                ("goAwayGraceSeconds", configuration.goAwayGraceSeconds)]
        where !(seconds > 0 && seconds <= 86_400) {
            throw APNsSimulatorError.configuration("\(name) must be within (0, 86400] seconds, got \(seconds)")
        }
        if let problem = configuration.faults.validationError { throw APNsSimulatorError.configuration("faults: \(problem)") }
        self.configuration = configuration
        engine = try SimulatorEngine(configuration: configuration)

        let chainPath: String, keyPath: String
        switch (configuration.certificatePath, configuration.privateKeyPath) {
        case let (certificate?, key?):
            chainPath = certificate
            keyPath = key
            caCertificatePath = certificate
            generatedDirectory = nil
        case (nil, nil):
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-sim-\(UUID().uuidString.prefix(8))").path
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                let files = try CertificateAuthority.generateLoopbackServerFiles(in: directory)
                chainPath = files.certificateChainPath
                keyPath = files.privateKeyPath
                caCertificatePath = files.caCertificatePath
            } catch {
                throw APNsSimulatorError.tls("generating a loopback certificate: \(error)")
            }
            generatedDirectory = directory
        default:
            throw APNsSimulatorError.configuration("give both certificatePath and privateKeyPath, or neither")
        }
        do {
            tlsContext = try TLSServerContext(certificateChainPath: chainPath, privateKeyPath: keyPath, alpnProtocol: "h2")
        } catch {
            throw APNsSimulatorError.tls("\(error)")
        }
    }

    deinit {
        stop()
        if let generatedDirectory { try? FileManager.default.removeItem(atPath: generatedDirectory) }
    }

    /// Binds the listeners and starts the threads. Throws if already started or a port is taken.
    public func start() throws {
        try running.withLock { running in
            guard running == nil else { throw APNsSimulatorError.configuration("already started") }
            let push = try ListeningSocket(host: configuration.host, port: configuration.port)
            let management = try ListeningSocket(host: configuration.host, port: configuration.managementPort)
            let controlSocket = try ListeningSocket(host: "127.0.0.1", port: configuration.controlPort)
            let logWriter = try configuration.deliveryLogPath.map { try DeliveryLogWriter(path: $0, engine: engine) }
            let loops = try (0..<configuration.threads).map { try EventLoop(index: $0, engine: engine, tlsContext: tlsContext) }
            loops[0].configureAcceptor(listeners: [.init(socket: push, kind: .push), .init(socket: management, kind: .management)],
                                       siblings: loops)
            let control = ControlServer(socket: controlSocket, simulator: self)
            for loop in loops { loop.start() }
            control.start()
            logWriter?.start()
            running = Running(loops: loops, listeners: [push, management, controlSocket], control: control, logWriter: logWriter,
                              port: push.port, managementPort: management.port, controlPort: controlSocket.port)
        }
    }

    /// Closes every connection and the listening sockets, stops the threads and flushes the delivery log.
    /// Afterwards the ports are free (a new simulator may bind them). Safe to call twice.
    public func stop() {
        guard let stopped = running.withLock({ running -> Running? in defer { running = nil }; return running }) else { return }
        stopped.control.stop()
        for loop in stopped.loops { loop.stop() }
        // No thread accepts any more: free the ports now, so a new simulator can bind the same address.
        for listener in stopped.listeners { listener.close() }
        stopped.logWriter?.stop()
    }

    /// Device-push and broadcast port (0 before `start`).
    public var port: Int { running.withLock { $0?.port ?? 0 } }
    /// Channel-management port.
    public var managementPort: Int { running.withLock { $0?.managementPort ?? 0 } }
    /// Control endpoint port (plain HTTP/1.1, loopback).
    public var controlPort: Int { running.withLock { $0?.controlPort ?? 0 } }

    /// Event-loop wakeups so far, all loops together (for tests that check a loop does not spin).
    var eventLoopWakeups: Int { running.withLock { $0?.loops.reduce(0) { $0 + $1.wakeups } ?? 0 } }

    public var deviceURL: String { "https://\(urlHost):\(port)" }
    public var managementURL: String { "https://\(urlHost):\(managementPort)" }
    public var controlURL: String { "http://127.0.0.1:\(controlPort)" }
    /// The host part of the URLs: wildcard binds are reached over loopback; IPv6 literals get brackets.
    private var urlHost: String {
        let bare = configuration.host.hasPrefix("[") ? String(configuration.host.dropFirst().dropLast()) : configuration.host
        switch bare {
        case "0.0.0.0": return "127.0.0.1"
        case "::": return "[::1]"
        default: return bare.contains(":") ? "[\(bare)]" : bare
        }
    }

    public func registerToken(_ token: String, state: TokenState) {
        engine.state.withLock { $0.tokens[token] = state }
    }

    public func setFaults(_ faults: APNsSimulatorFaults) throws {
        if let problem = faults.validationError { throw APNsSimulatorError.configuration("faults: \(problem)") }
        engine.state.withLock { $0.faults = faults }
    }

    public func faults() -> APNsSimulatorFaults { engine.state.withLock { $0.faults } }

    /// Accepted pushes still in memory (the newest `deliveryMemoryCapacity`), oldest first.
    public func deliveries() -> [DeliveryRecord] { engine.state.withLock { $0.deliveries } }
    /// Accepted pushes numbered 0, 1, … in arrival order, from `index` on: the records still in memory
    /// (`deliveryMemoryCapacity`), the index to pass next time, and how many were dropped before being read.
    public func deliveries(from index: Int) -> (records: [DeliveryRecord], next: Int, missed: Int) {
        engine.state.withLock { $0.deliveries(from: index) }
    }

    public func deviceView(token: String) -> DeviceView? { engine.state.withLock { $0.deviceViews.view(token) } }
    public func deviceView(channel: String) -> DeviceView? { engine.state.withLock { $0.channelViews.view(channel) } }

    public func stats() -> APNsSimulatorStats { engine.state.withLock { $0.stats } }

    /// Creates a broadcast channel directly (as the management API would) and returns its ID.
    public func createChannel(bundleID: String, storagePolicy: Int) throws -> String {
        guard configuration.apps.contains(bundleID) else { throw APNsSimulatorError.configuration("unknown app \(bundleID)") }
        let result = engine.state.withLock { $0.channels.create(bundleID: bundleID, storagePolicy: storagePolicy, random: &$0.random) }
        switch result {
        case .success(let id): return id
        case .failure(let refusal): throw APNsSimulatorError.configuration("create channel: \(refusal.reason.rawValue) \(refusal.detail ?? "")")
        }
    }

    /// Writes all accepted pushes to the delivery log file now (no-op without one).
    public func flushDeliveryLog() throws {
        try running.withLock { $0?.logWriter }?.drain()
    }
}
