import Foundation
import Testing
@testable import FanoutCore

/// The published JSON Schema files must describe the fields the decoder actually reads.
@Suite struct SchemaConsistencyTests {
    static let schemaDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("schema")

    func load(_ name: String) throws -> [String: Any] {
        let data = try Data(contentsOf: Self.schemaDirectory.appendingPathComponent(name))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test func eventSchemaListsExactlyTheDecodersFields() throws {
        let schema = try load("activity-event.v1.schema.json")
        let properties = try #require(schema["properties"] as? [String: Any])
        #expect(Set(properties.keys) == Set(EventField.allCases.map(\.name)))
        #expect(schema["additionalProperties"] as? Bool == false)
        #expect(Set(try #require(schema["required"] as? [String])) == ["v", "id", "event", "timestamp", "content_state"])
        let event = try #require(properties["event"] as? [String: Any])
        #expect(Set(try #require(event["enum"] as? [String])) == Set(EventKind.allCases.map(\.rawValue)))
        let importance = try #require(properties["importance"] as? [String: Any])
        #expect(Set((importance["enum"] as? [Any] ?? []).compactMap { $0 as? String }) == ["major", "minor"])
    }

    @Test func tokenSchemaListsExactlyTheRecordsFields() throws {
        let schema = try load("activity-token.v1.schema.json")
        let properties = try #require(schema["properties"] as? [String: Any])
        #expect(Set(properties.keys) == ["token", "app", "environment", "at"])
        #expect(Set(try #require(schema["required"] as? [String])) == ["token", "environment", "at"])
        let environment = try #require(properties["environment"] as? [String: Any])
        #expect(Set(try #require(environment["enum"] as? [String])) == Set(TokenRecord.Environment.allCases.map(\.rawValue)))
    }
}
