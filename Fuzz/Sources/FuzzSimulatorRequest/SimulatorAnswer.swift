import APNsModel
@testable import APNsSimulator
import Foundation
import FuzzSupport

/// What every simulator answer must be: one Fanout's client reads the way it reads Apple's.
enum SimulatorAnswer {
    static let successStatuses: Set<Int> = [200, 201, 204]

    static func check(_ plan: ResponsePlan, sent: [RequestHeader: [UInt8]], body: [UInt8], management: Bool, accepted: Int) {
        Property.require(plan.after == .nothing && plan.delayMillis == 0, "with no faults set, no delay, GOAWAY or reset")
        for (name, value) in plan.headers {
            Property.require(FuzzText.isDeliverableFieldName(Array(name.utf8)) && FuzzText.isDeliverableFieldValue(Array(value.utf8)),
                             "response header \(name): \(value) is one HTTP/2 can carry")
        }
        let isBroadcast = !management && sent[.path].map { $0.starts(with: Array("/4/broadcasts/apps/".utf8)) } == true
        let idHeader = management || isBroadcast ? "apns-request-id" : "apns-id"
        let ids = plan.headers.filter { $0.0 == idHeader }
        Property.require(ids.count == 1 && ids[0].1.utf8.count == 36, "every answer carries one 36-character \(idHeader)")

        if successStatuses.contains(plan.status) {
            Property.require(accepted == (!management && plan.status == 200 ? 1 : 0), "a push answered 200 is recorded once, nothing else is")
            Property.require(sent[.authorization].map(carriesMintedToken) == true, "a request succeeds only with a provider token signed by the team's key")
            if !management {
                Property.require(plan.status == 200 && sent[.method] == Array("POST".utf8), "a push succeeds only as a POST, with 200")
                let type = sent[.pushType].map { String(decoding: $0, as: UTF8.self).lowercased() }
                Property.require(type == "liveactivity", "a push succeeds only with apns-push-type liveactivity")
                Property.require(body.count <= (isBroadcast ? 5120 : 4096), "an accepted body is within the lane's limit")
            }
            if plan.status == 201 {
                let channel = plan.headers.first { $0.0 == "apns-channel-id" }?.1
                Property.require(channel.map(BroadcastRules.isWellFormedChannelID) == true, "a created channel has a base64 id")
            }
            return
        }

        Property.require(accepted == 0, "a refused push is not recorded")
        guard let answer = plan.body,
              let object = try? JSONSerialization.jsonObject(with: Data(answer)) as? [String: Any],
              let reasonText = object["reason"] as? String,
              let rejection = APNsRejection(rawValue: reasonText) else {
            Property.fail("a refusal's body is {\"reason\": <an APNs reason>}, got \(String(decoding: plan.body ?? [], as: UTF8.self))")
        }
        Property.require(rejection.status == plan.status, "\(reasonText) comes with its status \(rejection.status), not \(plan.status)")
        let result = APNsHTTPResponse(status: plan.status, body: answer).result()
        if case .unknown = result.reason {
            Property.fail("Fanout's client knows every reason the simulator answers, not \(reasonText)")
        }
        Property.require(result.reason?.rawValue == reasonText, "Fanout reads the reason the simulator wrote")
    }

    /// Whether `authorization` is `bearer <JWT>` whose signed part (header and claims) is one this
    /// harness minted: a signature is only as good as the bytes it covers.
    static func carriesMintedToken(_ authorization: [UInt8]) -> Bool {
        let text = String(decoding: authorization, as: UTF8.self)
        guard text.count > 7, text.prefix(7).lowercased() == "bearer " else { return false }
        let signedPart = { (jwt: Substring) in jwt.split(separator: ".", omittingEmptySubsequences: false).prefix(2).joined(separator: ".") }
        let tokens = SimulatorConnection.tokens
        return [tokens.current, tokens.next, tokens.expired].contains { signedPart($0[...]) == signedPart(text.dropFirst(7)) }
    }
}
