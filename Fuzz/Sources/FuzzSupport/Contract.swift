import Foundation

/// The event contract's JSON Schema patterns (schema/*.json), matched by a regular-expression engine:
/// an implementation apart from the code under test, and stricter than `Data(base64Encoded:)`,
/// which takes `====` and `AB=C`.
public enum Contract {
    /// `app` in both schemas.
    public static let bundleIDPattern = "^[A-Za-z0-9.-]{1,155}$"
    /// `$defs.base64` in schema/activity-event.v1.schema.json (channel ids).
    public static let base64Pattern = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$"

    private static let bundleID = expression(bundleIDPattern)
    private static let base64 = expression(base64Pattern)

    public static func isBundleID(_ text: String) -> Bool { matches(bundleID, text) }

    /// A channel id: the schema's pattern and `maxLength` 1024.
    public static func isBase64(_ text: String) -> Bool { text.utf8.count <= 1024 && matches(base64, text) }

    private static func expression(_ pattern: String) -> NSRegularExpression {
        do {
            return try NSRegularExpression(pattern: pattern)
        } catch {
            Property.fail("the schema pattern \(pattern) does not compile: \(error)")
        }
    }

    private static func matches(_ expression: NSRegularExpression, _ text: String) -> Bool {
        let range = NSRange(text.startIndex..<text.endIndex, in: text)
        return expression.firstMatch(in: text, options: [.anchored], range: range)?.range == range
    }
}
