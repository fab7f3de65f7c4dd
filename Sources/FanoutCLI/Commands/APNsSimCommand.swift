import APNsSimulator
import Dispatch
import FanoutCrypto
import Foundation

/// `fanout apns-sim`: runs the APNs simulator until SIGINT/SIGTERM.
struct APNsSimCommand: Command {
    static let name = "apns-sim"
    static let summary = "Run the APNs simulator (HTTP/2+TLS, Apple's rules, faults, delivery log)"
    static let help = """
    Usage: fanout apns-sim --app <bundle id> (--key <kid>=<pem file> --team-id <team> | --generate-test-key <dir>) [options]

    Serves APNs's device-push and broadcast API (HTTP/2 over TLS, ALPN h2) with Apple's request rules,
    a channel-management API on a second listener, and a plain-HTTP control endpoint on loopback
    (/stats, /metrics, /deliveries, /device?token=, /faults, /tokens/<token>, /channels, /flush). PUT /tokens/<token>
    with {"state": "valid", "app": "<bundle id>"} makes a token valid for that app's topic only (other
    topics get 400 DeviceTokenNotForTopic); "bad" and "unregistered" answer 400 and 410.
    Prints the URLs and the CA file clients must trust, then runs until interrupted.

    Credentials:
      --team-id <id>                  team every JWT's iss must equal
      --key <kid>=<file>              P-256 public (or .p8 private) key PEM verifying JWTs with that kid; repeatable
      --generate-test-key <dir>       make a throwaway key: writes <dir>/AuthKey_<kid>.p8 and <dir>/provider-token.jwt
                                      (team TEAM000001, kid KEY0000001 unless --team-id is given)
      --print-test-jwt                with --generate-test-key: also print the JWT on stdout
    Listeners:
      --host <address>                numeric IPv4 or IPv6 bind address, e.g. 0.0.0.0 or ::1 (default 127.0.0.1)
      --port <n>                      device/broadcast port (default 0: pick one)
      --management-port <n>           channel-management port (default 0)
      --control-port <n>              control endpoint port on 127.0.0.1 (default 0)
      --cert <pem> --cert-key <pem>   TLS certificate chain and key (default: generate a loopback CA)
      --threads <n>                   event-loop threads (default: cores)
      --max-connections <n>           open connections at most (default 4096)
      --max-streams <n>               SETTINGS_MAX_CONCURRENT_STREAMS after a valid JWT (default 1000)
      --handshake-timeout <seconds>   close connections whose TLS handshake takes longer (default 10)
      --idle-timeout <seconds>        GOAWAY and close connections without streams or traffic this long (default 300)
      --goaway-grace <seconds>        after a GOAWAY, close at the latest this long later (default 5)
    Behaviour:
      --app <bundle id>               app allowed to push (topic <bundle>.push-type.liveactivity); repeatable
      --no-broadcast <bundle id>      this --app lacks the broadcast capability: its broadcasts and channel requests
                                      get 400 BroadcastFeatureNotEnabled, as live APNs answers; repeatable
      --reject-unknown-tokens         unknown device tokens get 400 BadDeviceToken (default: accepted)
      --max-per-token-per-second <n>  more requests than this to one token in a second → 429 (default 0: no limit)
      --max-channels-per-app <n>      default 10000
      --provider-tokens-per-key <n>   distinct JWTs one key may bring into use within 20 minutes, across all
                                      connections; one more → 429 TooManyProviderTokenUpdates (default 2; 0: no limit)
      --delivery-log <file>           append every accepted push as a JSON line
    Faults (seeded by --seed, default 1; change at runtime with PUT /faults on the control endpoint):
      --fail-500 <fraction>  --fail-503 <fraction>  --fail-429 <fraction>  --reset <fraction>
      --latency-ms <n>  --latency-jitter-ms <n>  --goaway-after <requests> [--goaway-reason <reason>]
      --outage <start unix seconds>:<end unix seconds>
    """

    static func run(_ arguments: [String]) async throws -> Int32 {
        var args = Arguments(arguments)
        let apps = try args.options("app")
        guard !apps.isEmpty else { throw UsageError("give at least one --app <bundle id>") }
        let withoutBroadcast = try args.options("no-broadcast")
        if let stranger = withoutBroadcast.first(where: { !apps.contains($0) }) {
            throw UsageError("--no-broadcast \(stranger) is not one of the --app bundle ids")
        }
        var teamID = try args.option("team-id")
        var keys: [String: String] = [:]
        for spec in try args.options("key") {
            guard let equals = spec.firstIndex(of: "="), equals != spec.startIndex else {
                throw UsageError("--key expects <kid>=<pem file>, got '\(spec)'")
            }
            let kid = String(spec[..<equals]), path = String(spec[spec.index(after: equals)...])
            keys[kid] = try publicKeyPEM(fromFile: path)
        }
        let testKeyDirectory = try args.option("generate-test-key")
        let printJWT = args.flag("print-test-jwt")
        if printJWT && testKeyDirectory == nil { throw UsageError("--print-test-jwt needs --generate-test-key <dir>") }

        var configuration = APNsSimulatorConfiguration(teamID: teamID ?? "", keys: keys, apps: apps)
        if !withoutBroadcast.isEmpty { configuration.broadcastApps = apps.filter { !withoutBroadcast.contains($0) } }
        configuration.host = try args.option("host") ?? configuration.host
        configuration.port = try args.int("port") ?? 0
        configuration.managementPort = try args.int("management-port") ?? 0
        configuration.controlPort = try args.int("control-port") ?? 0
        configuration.certificatePath = try args.option("cert")
        configuration.privateKeyPath = try args.option("cert-key")
        configuration.threads = try args.int("threads") ?? configuration.threads
        configuration.maxConnections = try args.int("max-connections") ?? configuration.maxConnections
        configuration.maxConcurrentStreams = try args.int("max-streams") ?? configuration.maxConcurrentStreams
        configuration.handshakeTimeoutSeconds = try args.double("handshake-timeout") ?? configuration.handshakeTimeoutSeconds
        configuration.idleTimeoutSeconds = try args.double("idle-timeout") ?? configuration.idleTimeoutSeconds
        configuration.goAwayGraceSeconds = try args.double("goaway-grace") ?? configuration.goAwayGraceSeconds
        configuration.rejectUnknownTokens = args.flag("reject-unknown-tokens")
        configuration.maxRequestsPerTokenPerSecond = try args.int("max-per-token-per-second") ?? 0
        configuration.maxChannelsPerApp = try args.int("max-channels-per-app") ?? configuration.maxChannelsPerApp
        configuration.maxNewProviderTokensPerKey = try args.int("provider-tokens-per-key") ?? configuration.maxNewProviderTokensPerKey
        guard configuration.maxNewProviderTokensPerKey >= 0 else {
            throw UsageError("--provider-tokens-per-key expects 0 (no limit) or more, got \(configuration.maxNewProviderTokensPerKey)")
        }
        configuration.deliveryLogPath = try args.option("delivery-log")
        configuration.seed = UInt64(try args.int("seed") ?? 1)
        var faults = APNsSimulatorFaults()
        faults.internalServerErrorRate = try args.double("fail-500") ?? 0
        faults.serviceUnavailableRate = try args.double("fail-503") ?? 0
        faults.tooManyRequestsRate = try args.double("fail-429") ?? 0
        faults.connectionResetRate = try args.double("reset") ?? 0
        faults.latencyMillis = try args.int("latency-ms") ?? 0
        faults.latencyJitterMillis = try args.int("latency-jitter-ms") ?? 0
        faults.goAwayAfterRequests = try args.int("goaway-after")
        faults.goAwayReason = try args.option("goaway-reason") ?? faults.goAwayReason
        if let outage = try args.option("outage") {
            let bounds = outage.split(separator: ":").compactMap { Double($0) }
            guard bounds.count == 2 else { throw UsageError("--outage expects <start>:<end> in UNIX seconds, got '\(outage)'") }
            faults.outageStart = bounds[0]
            faults.outageEnd = bounds[1]
        }
        if let problem = faults.validationError { throw UsageError("faults: \(problem)") }
        configuration.faults = faults
        try args.finish()

        var generatedLines: [String] = []
        var jwt: String?
        if let directory = testKeyDirectory {
            let credentials = try SimulatorCredentials.generate(teamID: teamID ?? "TEAM000001")
            teamID = credentials.teamID
            configuration.teamID = credentials.teamID
            configuration.keys[credentials.keyID] = try credentials.publicKeyPEM()
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let keyPath = directory + "/AuthKey_\(credentials.keyID).p8"
            let tokenPath = directory + "/provider-token.jwt"
            try credentials.privateKey.pemPKCS8().write(toFile: keyPath, atomically: true, encoding: .utf8)
            // Owner-only, as a real key should be (the worker warns about a key others can read).
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyPath)
            let token = try credentials.providerToken()
            try token.write(toFile: tokenPath, atomically: true, encoding: .utf8)
            jwt = token
            generatedLines = ["  team-id: \(credentials.teamID)", "  key-id: \(credentials.keyID)",
                              "  private-key-file: \(keyPath)", "  provider-token-file: \(tokenPath)"]
        }
        guard teamID != nil else { throw UsageError("give --team-id with --key, or --generate-test-key <dir>") }
        guard !configuration.keys.isEmpty else { throw UsageError("give --key <kid>=<pem file>, or --generate-test-key <dir>") }

        let simulator = try APNsSimulator(configuration: configuration)
        try simulator.start()
        var lines = ["APNs simulator running",
                     "  device-url: \(simulator.deviceURL)",
                     "  management-url: \(simulator.managementURL)",
                     "  control-url: \(simulator.controlURL)",
                     "  ca-file: \(simulator.caCertificatePath)"]
        lines += generatedLines
        if printJWT, let jwt { lines.append("  provider-token: \(jwt)") }
        Output.out(lines.joined(separator: "\n"))

        await waitForTerminationSignal()
        simulator.stop()
        let stats = simulator.stats()
        Output.out("apns-sim stopped: \(stats.requests) requests, \(stats.accepted) accepted")
        return 0
    }

    /// A public key PEM from a public-key file, or derived from a private (.p8) key file.
    private static func publicKeyPEM(fromFile path: String) throws -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw UsageError("cannot read key file \(path)") }
        if text.contains("PRIVATE KEY") { return try P256PrivateKey(pem: text).publicKey().pemSPKI() }
        _ = try P256PublicKey(pem: text)
        return text
    }

    private static func waitForTerminationSignal() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let queue = DispatchQueue(label: "apns-sim-signals")
            let once = SignalOnce(continuation)
            var sources: [DispatchSourceSignal] = []
            for number in [SIGINT, SIGTERM] {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { once.fire() }
                source.resume()
                sources.append(source)
            }
            once.keep(sources)
        }
    }
}

/// Resumes the waiting command once, whichever signal comes first; keeps the signal sources alive.
private final class SignalOnce: @unchecked Sendable {
    // `continuation` is touched only on the signal queue (fire); `sources` is written once and never read.
    private var continuation: CheckedContinuation<Void, Never>?
    private var sources: [DispatchSourceSignal] = []

    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = continuation }

    func keep(_ sources: [DispatchSourceSignal]) { self.sources = sources }

    func fire() {
        continuation?.resume()
        continuation = nil
    }
}
