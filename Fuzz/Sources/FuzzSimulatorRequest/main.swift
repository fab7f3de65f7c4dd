import APNsModel
@testable import APNsSimulator
import FuzzSupport

/// Fuzzes the APNs simulator's request handling (`SimulatorEngine.handlePush` / `handleManagement`,
/// what every connection runs once a request's headers and body are in), without the socket:
/// several requests on one connection, so the provider-token rules see a sequence.
///
/// Input: requests separated by NUL bytes; each is `name: value` header lines (pseudo-headers
/// included), an empty line, then the body. A `:path` under `/1/` goes to the channel-management
/// listener, anything else to the push listener. Headers HTTP/2 would not deliver are dropped, as
/// nghttp2 drops the stream. In values, `$JWT` is a valid provider token, `$JWT_NEXT` one issued
/// 20 minutes later, `$JWT_EXPIRED` one over an hour old, and `$CHANNEL` the last channel id created.
enum SimulatorRequestTarget {
    static func run(_ input: UnsafeBufferPointer<UInt8>) {
        let connection = SimulatorConnection()
        var start = 0
        var count = 0
        while start <= input.count, count < 16 {
            let end = input[start...].firstIndex(of: 0) ?? input.count
            connection.send(Array(input[start..<end]))
            start = end + 1
            count += 1
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    SimulatorRequestTarget.run(FuzzDriver.bytes(data, size))
    return 0
}

FuzzDriver.run(testOneInput)
