/// A priority-10 credit bucket: `capacity` credits, refilled continuously at `refillPerHour`.
///
/// Sixteen bytes, so every tracked target can carry one. Starts full.
public struct TokenBucket: Sendable, Hashable {
    public private(set) var credits: Double
    public private(set) var refilledAt: Nanoseconds

    public init(capacity: Double, now: Nanoseconds) {
        credits = capacity
        refilledAt = now
    }

    /// A bucket as it was saved (`TargetHandoff`): `credits` at `refilledAt`.
    init(credits: Double, refilledAt: Nanoseconds) {
        self.credits = credits
        self.refilledAt = refilledAt
    }

    /// Credits available at `now` (without taking any).
    public func available(at now: Nanoseconds, settings: BudgetSettings) -> Double {
        guard now > refilledAt else { return credits }
        let added = Double(now - refilledAt) * settings.refillPerNanosecond
        return min(settings.burst, credits + added)
    }

    /// Takes one credit if the bucket has one at `now`; reports whether it did.
    public mutating func take(at now: Nanoseconds, settings: BudgetSettings) -> Bool {
        let current = available(at: now, settings: settings)
        if now > refilledAt { refilledAt = now }
        credits = current
        guard current >= 1 else { return false }
        credits = current - 1
        return true
    }

    /// Earliest instant at which one full credit is available.
    public func nextCredit(after now: Nanoseconds, settings: BudgetSettings) -> Nanoseconds {
        let current = available(at: now, settings: settings)
        if current >= 1 { return now }
        guard settings.refillPerNanosecond > 0 else { return Int64.max / 2 }
        let missing = 1 - current
        return now + Int64((missing / settings.refillPerNanosecond).rounded(.up))
    }
}

/// Send-rate rules for one kind of target (docs/design.md §3 "Per-token frequency budget").
public struct BudgetSettings: Sendable, Hashable {
    /// At most one send per target per `minInterval`.
    public var minInterval: Nanoseconds
    /// Priority-10 bucket size.
    public var burst: Double
    /// Priority-10 credits regained per hour.
    public var refillPerHour: Double

    public init(minInterval: Nanoseconds, burst: Double, refillPerHour: Double) {
        precondition(minInterval >= 0 && burst >= 1 && refillPerHour >= 0, "budget settings must be non-negative with burst >= 1")
        self.minInterval = minInterval
        self.burst = burst
        self.refillPerHour = refillPerHour
    }

    var refillPerNanosecond: Double { refillPerHour / 3_600_000_000_000 }

    /// Per-activity default: one send a second, 12 priority-10 sends an hour, burst 4.
    public static let standard = BudgetSettings(minInterval: .seconds(1), burst: 4, refillPerHour: 12)
    /// Apps with `NSSupportsLiveActivitiesFrequentUpdates`: a larger (undocumented) budget.
    public static let frequentUpdates = BudgetSettings(minInterval: .seconds(1), burst: 10, refillPerHour: 120)
    /// Broadcast channels: one send a second, generous priority-10 budget.
    public static let broadcast = BudgetSettings(minInterval: .seconds(1), burst: 10, refillPerHour: 120)
    /// Push-to-start, per push-to-start token: Apple stops honouring starts after about 10 in a short window.
    public static let pushToStart = BudgetSettings(minInterval: .seconds(1), burst: 5, refillPerHour: 10)
}
