import Testing
@testable import APNsModel

/// Response header values kept in place (`HeaderText`): what a reader gets back is what came.
@Suite struct HeaderTextTests {
    static func text(_ value: String) -> HeaderText {
        var value = value
        return value.withUTF8 { HeaderText($0) }
    }

    @Test func aUUIDComesBackAsItCame() {
        for id in ["eabeae54-14a8-11e5-b60b-1697f925ec7b", "EABEAE54-14A8-11E5-B60B-1697F925EC7B", "", "x"] {
            #expect(Self.text(id).description == id)
        }
    }

    @Test func valuesLongerThanTheInlineRoomAreKeptWhole() {
        let long = String(repeating: "0123456789", count: 10)
        #expect(Self.text(long).description == long)
        let edge = String(repeating: "a", count: HeaderText.inlineCapacity)
        #expect(Self.text(edge).description == edge)
        #expect(Self.text(edge + "b").description == edge + "b")
    }

    @Test func equalValuesAreEqualAndDifferentOnesNot() {
        #expect(Self.text("abc") == HeaderText("abc"))
        #expect(Self.text("abc") != Self.text("abd"))
        #expect(Self.text("abc") != Self.text("abc\0"))
        #expect(Set([Self.text("a"), HeaderText("a"), Self.text("b")]).count == 2)
    }

    @Test func aResponseAndItsResultCarryTheIDs() {
        var response = APNsHTTPResponse(status: 200)
        response.apnsIDHeader = Self.text("0a1b2c3d-0000-0000-0000-000000000001")
        response.apnsUniqueID = "u-1"
        let result = response.result()
        #expect(result.apnsID == "0a1b2c3d-0000-0000-0000-000000000001" && result.apnsUniqueID == "u-1")
        var broadcast = APNsHTTPResponse(status: 200)
        broadcast.apnsRequestID = "r-2"
        #expect(broadcast.result().apnsID == "r-2", "a broadcast's apns-request-id stands for its apns-id")
    }
}
