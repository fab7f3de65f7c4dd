import Foundation

/// Default sink for client-level errors nobody subscribed to, so they are never silently dropped.
enum FileHandleOutput {
    static func standardError(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}
