import Foundation

/// A parsed admin request line. Only what routing needs: method and decoded path.
struct AdminRequest: Equatable {
    var method: String
    /// Path without the query string, percent-decoded.
    var path: String
}

/// Reading of one HTTP/1.1 request head from the bytes received so far. Pure, so it is tested directly.
enum AdminRequestParse: Equatable {
    case complete(AdminRequest)
    /// Need more bytes.
    case incomplete
    case tooLarge
    case invalid(String)

    static func parse(_ bytes: [UInt8], limit: Int) -> AdminRequestParse {
        let terminator: [UInt8] = [13, 10, 13, 10]
        guard let end = firstIndex(of: terminator, in: bytes) else {
            return bytes.count > limit ? .tooLarge : .incomplete
        }
        guard end + 4 <= limit else { return .tooLarge }
        guard let head = String(bytes: bytes[..<end], encoding: .utf8) else { return .invalid("request head is not UTF-8") }
        let lines = head.components(separatedBy: "\r\n")
        let parts = lines[0].split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), parts[1].hasPrefix("/") else {
            return .invalid("malformed request line")
        }
        for line in lines.dropFirst() {
            let lower = line.lowercased()
            if lower.hasPrefix("content-length:") {
                let value = lower.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)
                guard let length = Int(value), length >= 0 else { return .invalid("bad Content-Length") }
                if end + 4 + length > limit { return .tooLarge }
            }
            if lower.hasPrefix("transfer-encoding:") { return .tooLarge }
        }
        let target = parts[1]
        let rawPath = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        guard let path = String(rawPath).removingPercentEncoding else { return .invalid("bad percent-encoding in path") }
        return .complete(AdminRequest(method: String(parts[0]), path: path))
    }

    private static func firstIndex(of pattern: [UInt8], in bytes: [UInt8]) -> Int? {
        guard bytes.count >= pattern.count else { return nil }
        for start in 0...(bytes.count - pattern.count) where bytes[start] == pattern[0] {
            if bytes[start..<(start + pattern.count)].elementsEqual(pattern) { return start }
        }
        return nil
    }
}

/// One admin response; always sent with `Connection: close`.
public struct AdminResponse: Sendable, Equatable {
    public var status: Int
    public var contentType: String
    public var body: [UInt8]
    public var headers: [(String, String)] = []

    public init(status: Int, contentType: String, body: [UInt8], headers: [(String, String)] = []) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers
    }

    public static func json(_ status: Int, _ text: String) -> AdminResponse {
        AdminResponse(status: status, contentType: "application/json", body: Array(text.utf8))
    }

    public static func == (lhs: AdminResponse, rhs: AdminResponse) -> Bool {
        lhs.status == rhs.status && lhs.contentType == rhs.contentType && lhs.body == rhs.body
            && lhs.headers.map { $0.0 + ":" + $0.1 } == rhs.headers.map { $0.0 + ":" + $0.1 }
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 413: "Content Too Large"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }

    /// The full response bytes; `includeBody: false` for HEAD.
    func serialized(includeBody: Bool = true) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + (includeBody ? body : [])
    }
}
