/// Failures the simulator injects on demand. Rates are fractions of requests in 0...1, drawn from the
/// seeded generator; all zero (the default) means no injected faults.
public struct APNsSimulatorFaults: Sendable, Equatable, Codable {
    /// Fraction answered 500 InternalServerError.
    public var internalServerErrorRate: Double = 0
    /// Fraction answered 503 ServiceUnavailable.
    public var serviceUnavailableRate: Double = 0
    /// Fraction answered 429 TooManyRequests.
    public var tooManyRequestsRate: Double = 0
    /// Fraction of requests whose connection is reset abruptly (TCP RST, no response).
    public var connectionResetRate: Double = 0
    /// An answer none of the rates above gives: any error status with any reason string (also one Apple
    /// does not document, such as a reason live APNs sends first), or with no body at all.
    public var injectedAnswer: InjectedAnswer?
    /// Added to every response: a fixed delay plus a uniform random delay in 0...latencyJitterMillis.
    public var latencyMillis: Int = 0
    public var latencyJitterMillis: Int = 0
    /// After this many requests on one connection the server sends GOAWAY with `{"reason": goAwayReason}`.
    public var goAwayAfterRequests: Int?
    public var goAwayReason: String = "Shutdown"
    /// An outage window in UNIX seconds (half-open): every request inside it is 503 ServiceUnavailable.
    public var outageStart: Double?
    public var outageEnd: Double?
    /// Which requests the faults above apply to; the others are answered as if no fault were set.
    /// Lets a test break one lane (device pushes or broadcasts) and watch the other, or answer channel
    /// management as APNs might (`management`; GOAWAY does not apply there).
    public var scope: Scope = .all

    /// `status` with `{"reason": reason}`, or with an empty body when `reason` is nil, for `rate` of the pushes.
    public struct InjectedAnswer: Sendable, Equatable, Codable {
        public var status: Int
        public var reason: String?
        /// Fraction of pushes answered so, in 0...1; 1 (the default) answers every push in scope.
        public var rate: Double

        public init(status: Int, reason: String?, rate: Double = 1) {
            self.status = status
            self.reason = reason
            self.rate = rate
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            self.init(status: try container.decode(Int.self, forKey: .status),
                      reason: try container.decodeIfPresent(String.self, forKey: .reason),
                      rate: try container.decodeIfPresent(Double.self, forKey: .rate) ?? 1)
        }

        private enum CodingKeys: String, CodingKey { case status, reason, rate }
    }

    public enum Scope: String, Sendable, Equatable, Codable, CaseIterable {
        /// Every push (the default).
        case all
        /// Only device-token pushes (`/3/device/…`).
        case devicePushes = "device"
        /// Only broadcasts (`/4/broadcasts/…`).
        case broadcasts = "broadcast"
        /// Only channel-management requests (create, read, delete, list on the management listener).
        /// No other scope reaches them: a fault set for pushes never breaks channel management.
        case channelManagement = "management"

        public func applies(toBroadcast isBroadcast: Bool) -> Bool {
            switch self {
            case .all: true
            case .devicePushes: !isBroadcast
            case .broadcasts: isBroadcast
            case .channelManagement: false
            }
        }
    }

    public init(
        internalServerErrorRate: Double = 0, serviceUnavailableRate: Double = 0, tooManyRequestsRate: Double = 0,
        connectionResetRate: Double = 0, injectedAnswer: InjectedAnswer? = nil, latencyMillis: Int = 0, latencyJitterMillis: Int = 0,
        goAwayAfterRequests: Int? = nil, goAwayReason: String = "Shutdown",
        outageStart: Double? = nil, outageEnd: Double? = nil, scope: Scope = .all
    ) {
        self.internalServerErrorRate = internalServerErrorRate
        self.serviceUnavailableRate = serviceUnavailableRate
        self.tooManyRequestsRate = tooManyRequestsRate
        self.connectionResetRate = connectionResetRate
        self.injectedAnswer = injectedAnswer
        self.latencyMillis = latencyMillis
        self.latencyJitterMillis = latencyJitterMillis
        self.goAwayAfterRequests = goAwayAfterRequests
        self.goAwayReason = goAwayReason
        self.outageStart = outageStart
        self.outageEnd = outageEnd
        self.scope = scope
    }

    /// Why a fault set cannot be applied; nil when it is valid.
    public var validationError: String? {
        for (name, rate) in [("internalServerErrorRate", internalServerErrorRate), ("serviceUnavailableRate", serviceUnavailableRate),
                             ("tooManyRequestsRate", tooManyRequestsRate), ("connectionResetRate", connectionResetRate),
                             ("injectedAnswer.rate", injectedAnswer?.rate ?? 0)]
        where !(rate >= 0 && rate <= 1) {
            return "\(name) must be within 0...1, got \(rate)"
        }
        if internalServerErrorRate + serviceUnavailableRate + tooManyRequestsRate + connectionResetRate + (injectedAnswer?.rate ?? 0) > 1 {
            return "the fault rates add up to more than 1"
        }
        if let answer = injectedAnswer, !(400...599).contains(answer.status) {
            return "injectedAnswer.status must be an error status within 400...599, got \(answer.status)"
        }
        if let reason = injectedAnswer?.reason, reason.isEmpty {
            return "injectedAnswer.reason is empty: leave it out to answer without a body"
        }
        if latencyMillis < 0 || latencyJitterMillis < 0 || latencyMillis + latencyJitterMillis > 60_000 {
            return "latency must be within 0...60000 ms in total"
        }
        if let count = goAwayAfterRequests, count < 1 { return "goAwayAfterRequests must be at least 1" }
        if (outageStart == nil) != (outageEnd == nil) { return "outageStart and outageEnd go together" }
        if let start = outageStart, let end = outageEnd, !(end > start) { return "outageEnd must be after outageStart" }
        return nil
    }

    /// Every key optional (missing keys keep their defaults), so a control request can set just one fault.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        internalServerErrorRate = try container.decodeIfPresent(Double.self, forKey: .internalServerErrorRate) ?? 0
        serviceUnavailableRate = try container.decodeIfPresent(Double.self, forKey: .serviceUnavailableRate) ?? 0
        tooManyRequestsRate = try container.decodeIfPresent(Double.self, forKey: .tooManyRequestsRate) ?? 0
        connectionResetRate = try container.decodeIfPresent(Double.self, forKey: .connectionResetRate) ?? 0
        injectedAnswer = try container.decodeIfPresent(InjectedAnswer.self, forKey: .injectedAnswer)
        latencyMillis = try container.decodeIfPresent(Int.self, forKey: .latencyMillis) ?? 0
        latencyJitterMillis = try container.decodeIfPresent(Int.self, forKey: .latencyJitterMillis) ?? 0
        goAwayAfterRequests = try container.decodeIfPresent(Int.self, forKey: .goAwayAfterRequests)
        goAwayReason = try container.decodeIfPresent(String.self, forKey: .goAwayReason) ?? "Shutdown"
        outageStart = try container.decodeIfPresent(Double.self, forKey: .outageStart)
        outageEnd = try container.decodeIfPresent(Double.self, forKey: .outageEnd)
        scope = try container.decodeIfPresent(Scope.self, forKey: .scope) ?? .all
    }

    private enum CodingKeys: String, CodingKey {
        case internalServerErrorRate, serviceUnavailableRate, tooManyRequestsRate, connectionResetRate, injectedAnswer
        case latencyMillis, latencyJitterMillis, goAwayAfterRequests, goAwayReason, outageStart, outageEnd, scope
    }
}
