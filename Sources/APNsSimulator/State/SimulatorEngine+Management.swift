import APNsModel
import Foundation

/// Channel management (the api-manage-broadcast listener): create, read, delete, list. Faults scoped
/// to `management` answer before the request is looked at, so an injected answer changes nothing.
extension SimulatorEngine {
    private enum Operation { case create, read, delete, list }

    func handleManagement(_ request: RequestHead, gate: inout ProviderTokenGate, random: inout SeededRandom) -> ResponsePlan {
        let now = configuration.clock()
        let requestID: String = {
            if let given = request.string(.requestID), given.utf8.count == 36 { return given }
            return random.uuid()
        }()
        let faults = state.withLock { $0.planManagementFaults(now: now) }
        var plan: ResponsePlan
        if case .proceed = faults.action {
            plan = answer(decideManagement(request, gate: &gate, now: now, random: &random), requestID: requestID)
        } else {
            plan = answer(fault: faults.action, requestID: requestID)
        }
        plan.delayMillis = faults.delayMillis
        return plan
    }

    /// The answer to a request that the rules decided, counted.
    private func answer(_ result: Result<ResponsePlan, Refusal>, requestID: String) -> ResponsePlan {
        state.withLock { state in
            state.requests += 1
            switch result {
            case .failure(let refusal):
                state.count(refusal.reason)
                return .refusal(refusal, idHeader: "apns-request-id", id: requestID)
            case .success(var plan):
                state.countSuccess(status: plan.status)
                plan.headers.insert(("apns-request-id", requestID), at: 0)
                return plan
            }
        }
    }

    /// The answer to a request that an injected fault decided, counted as the push path counts it.
    private func answer(fault: SimulatorState.FaultPlan.Action, requestID: String) -> ResponsePlan {
        state.withLock { state in
            state.requests += 1
            switch fault {
            case .reset:
                state.connectionsReset += 1
                return ResponsePlan(status: 0, after: .reset)
            case .refuse(let reason):
                state.count(reason)
                return .refusal(Refusal(reason, "injected fault"), idHeader: "apns-request-id", id: requestID)
            case .answer(let answer):
                state.count(answer)
                return .injected(answer, idHeader: "apns-request-id", id: requestID)
            case .proceed:
                preconditionFailure("a request without a fault is answered by the rules")
            }
        }
    }

    private func decideManagement(
        _ request: RequestHead, gate: inout ProviderTokenGate, now: Double, random: inout SeededRandom
    ) -> Result<ResponsePlan, Refusal> {
        guard let path = request.string(.path), path.hasPrefix("/1/apps/") else { return .failure(Refusal(.badPath)) }
        let parts = path.dropFirst("/1/apps/".count).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty else { return .failure(Refusal(.badPath)) }
        let method = request.string(.method) ?? ""
        let operation: Operation
        switch (parts[1], method) {
        case ("channels", "POST"): operation = .create
        case ("channels", "GET"): operation = .read
        case ("channels", "DELETE"): operation = .delete
        case ("all-channels", "GET"): operation = .list
        case ("channels", _), ("all-channels", _): return .failure(Refusal(.methodNotAllowed))
        default: return .failure(Refusal(.badPath))
        }
        if let duplicate = request.duplicated { return .failure(Refusal(.duplicateHeaders, "\(duplicate) appears more than once")) }
        let admitted = request.withValue(.authorization) { gate.admit(authorization: $0, now: now, policy: tokenPolicy, verifier: verifier, ledger: tokenLedger) }
        var raise = false
        switch admitted {
        case .failure(let refusal): return .failure(refusal)
        case .success(let first): raise = first
        }
        if request.has(.requestID), !request.withValue(.requestID, { HeaderRules.isCanonicalUUID($0!) }) {
            return .failure(Refusal(.badMessageId, "apns-request-id must be a lowercase 8-4-4-4-12 UUID"))
        }
        let bundle = String(parts[0])
        let appIndex: Int
        switch BroadcastRules.app(bundle, catalog: catalog) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let index): appIndex = index
        }
        guard catalog.apps[appIndex].broadcastEnabled else { return .failure(AppCatalog.broadcastNotEnabled) }

        var plan: ResponsePlan
        switch operation {
        case .create:
            let policy: Int
            switch Self.parseCreateBody(request) {
            case .failure(let refusal): return .failure(refusal)
            case .success(let value): policy = value
            }
            let created = state.withLock { $0.channels.create(bundleID: bundle, storagePolicy: policy, random: &$0.random) }
            switch created {
            case .failure(let refusal): return .failure(refusal)
            case .success(let id): plan = ResponsePlan(status: 201, headers: [("apns-channel-id", id)])
            }
        case .read, .delete:
            guard let id = request.string(.channelID) else { return .failure(Refusal(.missingChannelId)) }
            guard BroadcastRules.isWellFormedChannelID(id) else { return .failure(Refusal(.badChannelId)) }
            if operation == .read {
                let found = state.withLock { $0.channels.read(bundleID: bundle, id: id) }
                switch found {
                case .failure(let refusal): return .failure(refusal)
                case .success(let channel):
                    let json = "{\"message-storage-policy\":\(channel.storagePolicy),\"push-type\":\"LiveActivity\"}"
                    plan = ResponsePlan(status: 200, headers: [("content-type", "application/json")], body: Array(json.utf8))
                }
            } else {
                if let refusal = state.withLock({ $0.channels.delete(bundleID: bundle, id: id) }) { return .failure(refusal) }
                plan = ResponsePlan(status: 204)
            }
        case .list:
            let ids = state.withLock { $0.channels.list(bundleID: bundle) }
            let json = "{\"channels\":[" + ids.map { "\"\($0)\"" }.joined(separator: ",") + "]}"
            plan = ResponsePlan(status: 200, headers: [("content-type", "application/json")], body: Array(json.utf8))
        }
        plan.raiseStreamLimit = raise
        return .success(plan)
    }

    /// `{"message-storage-policy": 0|1, "push-type": "LiveActivity"}`, both required, nothing else.
    static func parseCreateBody(_ request: RequestHead) -> Result<Int, Refusal> {
        guard request.bodyLength > 0 else { return .failure(Refusal(.payloadEmpty)) }
        guard request.bodyLength <= BroadcastRules.maxBodyBytes else { return .failure(Refusal(.payloadTooLarge)) }
        return request.body.withUnsafeBufferPointer { body -> Result<Int, Refusal> in
            var scanner = JSONScanner(body)
            var policy: String?
            var pushType: String?
            do {
                scanner.skipWhitespace()
                guard scanner.index < body.count, body[scanner.index] == UInt8(ascii: "{") else {
                    return .failure(Refusal(.badRequestPayload, "the body must be a JSON object"))
                }
                var unknown: String?
                try scanner.members(depth: 0) { scanner, key in
                    let start = scanner.index
                    let kind = try scanner.value(depth: 1)
                    let text = scanner.text(start..<scanner.index)
                    if scanner.keyEquals(key, "message-storage-policy") {
                        policy = kind == .number ? text : "invalid"
                    } else if scanner.keyEquals(key, "push-type") {
                        pushType = kind == .string ? text : "invalid"
                    } else if unknown == nil {
                        unknown = scanner.text(key)
                    }
                }
                try scanner.expectEnd()
                if let unknown { return .failure(Refusal(.badRequestParams, "unrecognized attribute \(unknown)")) }
            } catch {
                return .failure(Refusal(.badRequestPayload, "the body is not valid JSON"))
            }
            guard let pushType else { return .failure(Refusal(.missingPushType)) }
            guard pushType == "\"LiveActivity\"" else { return .failure(Refusal(.invalidPushType, "push-type must be LiveActivity")) }
            switch policy {
            case "0": return .success(0)
            case "1": return .success(1)
            default: return .failure(Refusal(.badRequestParams, "message-storage-policy must be 0 or 1"))
            }
        }
    }
}
