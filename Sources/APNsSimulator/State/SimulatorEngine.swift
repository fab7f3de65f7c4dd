import APNsModel
import Foundation
import Synchronization

/// The request logic shared by every connection: rules, authentication policy and the shared state.
///
/// Immutable except for `state`, which is behind one `Mutex` and locked once per request.
/// Called on event-loop threads only.
final class SimulatorEngine: Sendable {
    let configuration: APNsSimulatorConfiguration
    let catalog: AppCatalog
    let verifier: ProviderTokenVerifier
    let tokenPolicy: ProviderTokenGate.Policy
    /// Per-key new-token limit across connections (its own lock, taken only when a connection changes token).
    let tokenLedger: ProviderTokenLedger
    let state: Mutex<SimulatorState>

    init(configuration: APNsSimulatorConfiguration) throws {
        self.configuration = configuration
        catalog = AppCatalog(bundleIDs: configuration.apps, broadcastApps: configuration.broadcastApps)
        verifier = try ProviderTokenVerifier(teamID: configuration.teamID, keys: configuration.keys)
        tokenPolicy = .init(maxAgeSeconds: configuration.providerTokenMaxAgeSeconds,
                            minUpdateIntervalSeconds: configuration.providerTokenMinUpdateIntervalSeconds)
        tokenLedger = ProviderTokenLedger(limit: configuration.maxNewProviderTokensPerKey,
                                          intervalSeconds: configuration.providerTokenMinUpdateIntervalSeconds,
                                          maxAgeSeconds: configuration.providerTokenMaxAgeSeconds)
        state = Mutex(SimulatorState(configuration: configuration))
    }

    /// One request on the push listener (`/3/device/…` or `/4/broadcasts/apps/…`).
    func handlePush(_ request: RequestHead, gate: inout ProviderTokenGate, random: inout SeededRandom) -> ResponsePlan {
        let now = configuration.clock()
        let isBroadcast: Bool
        if request.path(hasPrefix: DevicePushRules.pathPrefix) {
            isBroadcast = false
        } else if request.path(hasPrefix: BroadcastRules.pathPrefix) {
            isBroadcast = true
        } else {
            return refuseCounted(Refusal(.badPath), request: request, isBroadcast: false, random: &random)
        }
        let idHeader = isBroadcast ? "apns-request-id" : "apns-id"
        let echoedID = request.string(isBroadcast ? .requestID : .apnsID)
        func id(_ random: inout SeededRandom) -> String {
            if let echoedID, echoedID.utf8.count == 36 { return echoedID }
            return random.uuid()
        }

        var verdict: Result<Void, Refusal> = .success(())
        var raise = false
        if !request.value(.method, equals: "POST") {
            verdict = .failure(Refusal(.methodNotAllowed))
        } else if let duplicate = request.duplicated {
            verdict = .failure(Refusal(.duplicateHeaders, "\(duplicate) appears more than once"))
        } else {
            let admitted = request.withValue(.authorization) { gate.admit(authorization: $0, now: now, policy: tokenPolicy, verifier: verifier, ledger: tokenLedger) }
            switch admitted {
            case .failure(let refusal): verdict = .failure(refusal)
            case .success(let first): raise = first
            }
        }

        var device: DevicePush?
        var broadcast: BroadcastPush?
        if case .success = verdict {
            if isBroadcast {
                switch BroadcastRules.check(request, catalog: catalog) {
                case .success(let push): broadcast = push
                case .failure(let refusal): verdict = .failure(refusal)
                }
            } else {
                switch DevicePushRules.check(request, catalog: catalog) {
                case .success(let push): device = push
                case .failure(let refusal): verdict = .failure(refusal)
                }
            }
        }
        let token = device.map { String(decoding: request.arena[$0.token], as: UTF8.self) }
        let responseID = id(&random)
        let uniqueID = random.uuid()

        // The delivery record the ring evicts is released after unlocking, not inside the critical section.
        var evicted: DeliveryRecord?
        var plan = state.withLock { state -> ResponsePlan in
            state.requests += 1
            let faults = state.planFaults(now: now, isBroadcast: isBroadcast)
            var plan: ResponsePlan
            switch faults.action {
            case .reset:
                state.connectionsReset += 1
                return ResponsePlan(status: 0, after: .reset)
            case .refuse(let reason):
                state.count(reason)
                plan = .refusal(Refusal(reason, "injected fault"), idHeader: idHeader, id: responseID)
            case .answer(let answer):
                state.count(answer)
                plan = .injected(answer, idHeader: idHeader, id: responseID)
            case .proceed:
                var outcome = verdict
                if case .success = outcome {
                    if let device, let token {
                        let bundle = catalog.apps[device.appIndex].bundleID
                        if let refusal = state.admitDevice(token: token, bundleID: bundle, now: now) { outcome = .failure(refusal) }
                    } else if let broadcast {
                        let bundle = catalog.apps[broadcast.appIndex].bundleID
                        if let refusal = state.channels.admit(bundleID: bundle, id: broadcast.channelID, expiration: broadcast.expiration) {
                            outcome = .failure(refusal)
                        }
                    }
                }
                switch outcome {
                case .failure(let refusal):
                    state.count(refusal.reason)
                    plan = .refusal(refusal, idHeader: idHeader, id: responseID)
                case .success:
                    let record = makeRecord(request, device: device, token: token, broadcast: broadcast, now: now,
                                            id: responseID, uniqueID: uniqueID, keyID: gate.keyID)
                    let payload = (device?.payload ?? broadcast?.payload)!
                    let contentState = String(decoding: request.body[payload.contentState], as: UTF8.self)
                    evicted = state.recordAccepted(record, event: payload.event, contentState: contentState)
                    state.countSuccess(status: 200)
                    plan = ResponsePlan(status: 200, headers: [(idHeader, responseID), ("apns-unique-id", uniqueID)])
                }
            }
            plan.delayMillis = faults.delayMillis
            if let limit = faults.goAwayAfterRequests, gate.requestsOnConnection + 1 >= limit {
                plan.after = .goAway(reason: faults.goAwayReason)
                state.goAwaysSent += 1
            }
            return plan
        }
        withExtendedLifetime(evicted) {}
        gate.requestsOnConnection += 1
        plan.raiseStreamLimit = raise
        return plan
    }

    private func refuseCounted(_ refusal: Refusal, request: RequestHead, isBroadcast: Bool, random: inout SeededRandom) -> ResponsePlan {
        state.withLock {
            $0.requests += 1
            $0.count(refusal.reason)
        }
        return .refusal(refusal, idHeader: isBroadcast ? "apns-request-id" : "apns-id", id: random.uuid())
    }

    private func makeRecord(
        _ request: RequestHead, device: DevicePush?, token: String?, broadcast: BroadcastPush?, now: Double, id: String, uniqueID: String,
        keyID: String?
    ) -> DeliveryRecord {
        let payload = (device?.payload ?? broadcast?.payload)!
        let appIndex = device?.appIndex ?? broadcast!.appIndex
        return DeliveryRecord(
            time: now, kind: device != nil ? .device : .broadcast, token: token, channel: broadcast?.channelID,
            bundleID: catalog.apps[appIndex].bundleID, priority: device?.priority ?? broadcast!.priority,
            apnsID: id, uniqueID: uniqueID, topic: device != nil ? catalog.apps[appIndex].topicText : nil, pushType: "liveactivity",
            expiration: device?.expiration ?? broadcast?.expiration, collapseID: request.string(.collapseID),
            event: payload.event.rawValue, timestamp: payload.timestamp,
            aps: String(decoding: request.body[payload.aps], as: UTF8.self), keyID: keyID)
    }
}
