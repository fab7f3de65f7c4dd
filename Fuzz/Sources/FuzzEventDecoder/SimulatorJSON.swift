// Only APNsSimulator here: its `LiveActivityPayload` (the simulator's payload rules) shares a name with APNsModel's.
@testable import APNsSimulator

/// The APNs simulator's own JSON scanner and payload rules: an implementation apart from the decoder's.
enum SimulatorJSON {
    static func isDocument(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { (try? JSONScanner.validateDocument($0)) != nil }
    }

    /// Why the simulator would refuse `body` as a Live Activity payload; nil when it accepts it.
    static func payloadRefusal(_ body: [UInt8], isBroadcast: Bool) -> String? {
        body.withUnsafeBufferPointer { bytes in
            switch LiveActivityPayload.parse(bytes, isBroadcast: isBroadcast) {
            case .success: nil
            case .failure(let refusal): "\(refusal.reason.rawValue): \(refusal.detail ?? "")"
            }
        }
    }
}
