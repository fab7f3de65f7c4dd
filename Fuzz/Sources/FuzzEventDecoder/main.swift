import APNsModel
import FanoutCore
import FuzzSupport

/// Fuzzes `EventDecoder` (the v1 event contract) with what the README's "Event contract" promises.
///
/// Input: one flag byte, then the record's value. Flag bits (low nibble, so the corpus can use the
/// digits `0`–`9` and `:;<=>?`): bit 0 the lane (broadcast when set); bits 1–2 the configured apps
/// (0 and 3: one app, 1: two apps, 2: none, so `app` is required and any bundle id goes); bit 3 the
/// Kafka key (set: the record path with the lane's example key, which the target must equal; clear: no key check).
enum EventDecoderTarget {
    static let now: Int64 = 1_772_790_000
    static let activityKey = "export-42"
    static let channelKey = "dHVybi1zaWduYWwtbWF0Y2gtMQ=="
    /// Small enough that the fuzzer reaches `event-too-large` and `payload-too-large` within its input length.
    static let maxEventBytes = 6000

    static let decoders: [EventDecoder] = [
        ["com.example.exports"], ["com.example.exports", "com.example.food"], [], ["com.example.exports"],
    ].map { EventDecoder(policy: EventPolicy(apps: $0, maxEventBytes: maxEventBytes)) }

    /// Reasons only the worker gives (after validation) or only token records carry.
    static let notFromDecoder: Set<RejectionReason> = [.noToken, .rejectedByAPNs, .channelNotRegistered, .missingToken, .invalidEnvironment]

    static func run(_ input: UnsafeBufferPointer<UInt8>) {
        guard let flags = input.first.map({ Int($0 & 0x0F) }) else { return }
        let value = Array(input.dropFirst())
        let lane: Lane = flags & 1 == 0 ? .activity : .broadcast
        let decoder = decoders[(flags >> 1) & 3]
        let key: String? = flags & 8 == 0 ? nil : (lane == .activity ? activityKey : channelKey)

        let result = key.map { decoder.decode(record: value, key: Array($0.utf8), lane: lane, now: now) }
            ?? decoder.decode(value, key: nil, lane: lane, now: now)
        Property.require(result == decoder.decode(value, key: key, lane: lane, now: now), "decoding the same bytes twice gives the same answer")

        switch result {
        case .failure(let rejection):
            Property.require(!notFromDecoder.contains(rejection.reason), "the decoder never gives \(rejection.reason.rawValue)")
            Property.require(!rejection.detail.isEmpty, "every rejection says why (\(rejection.reason.rawValue))")
            Property.require((value.count > maxEventBytes) == (rejection.reason == .eventTooLarge),
                             "event-too-large exactly when the event is over max_event_bytes (\(value.count) bytes, \(rejection))")
        case .success(let event):
            Property.require(value.count <= maxEventBytes, "an accepted event is within max_event_bytes")
            Property.require(FuzzText.isValidUTF8(value), "an accepted event is valid UTF-8")
            Property.require(SimulatorJSON.isDocument(value), "an accepted event is one JSON value by the simulator's scanner too")
            AcceptedEvent.check(event, lane: lane, key: key, policy: decoder.policy, now: now)
            let canonical = CanonicalEvent.json(event)
            let again = decoder.decode(canonical, key: event.target, lane: lane, now: now)
            Property.require(again == .success(event),
                             "the event written back as v1 JSON decodes to the same event: \(String(decoding: canonical, as: UTF8.self)) → \(again)")
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    EventDecoderTarget.run(FuzzDriver.bytes(data, size))
    return 0
}

FuzzDriver.run(testOneInput)
