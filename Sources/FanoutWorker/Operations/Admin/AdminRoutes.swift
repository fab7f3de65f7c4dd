import APNsModel

/// Answer of the readiness provider for `/readyz`.
public struct Readiness: Sendable, Equatable {
    public var isReady: Bool
    /// Why not ready, e.g. `"no partitions assigned"`, `"app com.example.a: InvalidProviderToken"`.
    public var reasons: [String]

    public init(isReady: Bool, reasons: [String] = []) {
        self.isReady = isReady
        self.reasons = reasons
    }

    public static let ready = Readiness(isReady: true)
}

/// What the admin endpoints show, supplied by the worker as closures.
///
/// Threading: the closures run on the admin server's own queue, concurrently with the worker, so
/// they must be thread-safe and quick (read a snapshot under a lock; never wait on Kafka or APNs).
public struct AdminRoutes: Sendable {
    /// Body of `/metrics` (Prometheus text).
    public var metrics: @Sendable () -> String
    public var readiness: @Sendable () -> Readiness
    /// `/livez`: whether the worker still makes progress (`ProgressWatch`).
    public var liveness: @Sendable () -> Liveness
    /// JSON describing one target (activity key or channel id), or nil when unknown (→ 404).
    public var target: @Sendable (String) -> String?

    public init(metrics: @escaping @Sendable () -> String,
                readiness: @escaping @Sendable () -> Readiness,
                liveness: @escaping @Sendable () -> Liveness,
                target: @escaping @Sendable (String) -> String?) {
        self.metrics = metrics
        self.readiness = readiness
        self.liveness = liveness
        self.target = target
    }

    static let targetPrefix = "/debug/targets/"

    /// Routes one request. Pure apart from calling the providers. Texts that can quote an APNs answer
    /// or a request (readiness reasons, an unknown key) go through `Redact.text`.
    func respond(to request: AdminRequest) -> AdminResponse {
        guard request.method == "GET" || request.method == "HEAD" else {
            return AdminResponse(status: 405, contentType: "application/json", body: Array("{\"error\":\"method not allowed\"}".utf8),
                                 headers: [("Allow", "GET, HEAD")])
        }
        switch request.path {
        case "/metrics":
            return AdminResponse(status: 200, contentType: MetricsRegistry.contentType, body: Array(metrics().utf8))
        case "/healthz":
            return .json(200, "{\"status\":\"ok\"}")
        case "/readyz":
            let state = readiness()
            var body = "{\"ready\":\(state.isReady),\"reasons\":["
            for (index, reason) in state.reasons.enumerated() {
                if index > 0 { body += "," }
                JSONString.append(Redact.text(reason), to: &body)
            }
            body += "]}"
            return .json(state.isReady ? 200 : 503, body)
        case "/livez":
            let state = liveness()
            var body = "{\"alive\":\(state.isAlive),\"reason\":"
            JSONString.append(Redact.text(state.reason), to: &body)
            body += "}"
            return .json(state.isAlive ? 200 : 503, body)
        default:
            if request.path.hasPrefix(Self.targetPrefix) {
                let key = String(request.path.dropFirst(Self.targetPrefix.count))
                guard !key.isEmpty else { return .json(400, "{\"error\":\"missing target key: use /debug/targets/<key>\"}") }
                if let json = target(key) { return .json(200, json) }
                var body = "{\"error\":\"unknown target\",\"key\":"
                JSONString.append(Redact.text(key), to: &body)
                body += "}"
                return .json(404, body)
            }
            return .json(404, "{\"error\":\"not found\",\"routes\":[\"/metrics\",\"/healthz\",\"/readyz\",\"/livez\",\"/debug/targets/<key>\"]}")
        }
    }
}
