import FanoutCrypto
import Foundation

/// Where the nghttp2 transport connects: host, port and `:authority` from the client's base URL,
/// resolved afresh for every new connection (Apple asks for an uncached DNS lookup per connection).
struct HTTP2Endpoint: Sendable {
    /// DNS name or IP literal (IPv6 without brackets): what TLS verifies and SNI names.
    let host: String
    let port: Int
    /// The host as the URL spells it (IPv6 brackets kept), with `:port` unless it is 443, for `:authority`.
    let authority: String
    /// A path prefix of the base URL ("" normally); request paths are appended to it.
    let pathPrefix: String

    init(baseURL: String) throws(APNsClientError) {
        guard baseURL.hasPrefix("https://") else { throw .badConfiguration("base URL must start with https://, got '\(baseURL)'") }
        var rest = Substring(baseURL.dropFirst("https://".count))
        if let slash = rest.firstIndex(of: "/") {
            let prefix = String(rest[slash...])
            pathPrefix = prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix
            rest = rest[..<slash]
        } else {
            pathPrefix = ""
        }
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw .badConfiguration("unclosed IPv6 bracket in '\(baseURL)'") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() } else if !after.isEmpty {
                throw .badConfiguration("unexpected '\(after)' after the IPv6 address in '\(baseURL)'")
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            portText = rest[rest.index(after: colon)...]
        } else {
            host = String(rest)
        }
        if let portText {
            guard let port = Int(portText), (1...65_535).contains(port) else {
                throw .badConfiguration("bad port '\(portText)' in '\(baseURL)'")
            }
            self.port = port
        } else {
            port = 443
        }
        guard !host.isEmpty else { throw .badConfiguration("no host in '\(baseURL)'") }
        let hostInURL = host.contains(":") ? "[\(host)]" : host
        authority = port == 443 ? hostInURL : "\(hostInURL):\(port)"
    }

    /// Whether `host` is an IP literal (resolving it is instant and needs no DNS).
    var hostIsIPLiteral: Bool { TLSClientContext.isIPLiteral(host) }

    /// Resolves the host (getaddrinfo, blocking: instant for IP literals; a DNS lookup otherwise, so
    /// the transport runs it on `HTTP2Resolver`'s threads).
    func resolve() -> Result<[SocketAddress], HTTP2ConnectError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            return .failure(HTTP2ConnectError(text: "cannot resolve \(host): \(String(cString: gai_strerror(status)))"))
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let entry = cursor, addresses.count < 16 {
            if let address = entry.pointee.ai_addr {
                addresses.append(SocketAddress(family: entry.pointee.ai_family, bytes: Array(UnsafeRawBufferPointer(
                    start: address, count: Int(entry.pointee.ai_addrlen)))))
            }
            cursor = entry.pointee.ai_next
        }
        if addresses.isEmpty { return .failure(HTTP2ConnectError(text: "\(host) has no addresses")) }
        return .success(addresses)
    }
}

/// One resolved `sockaddr`, copied out of getaddrinfo's list.
struct SocketAddress: Sendable {
    let family: Int32
    let bytes: [UInt8]

    /// A non-blocking TCP socket with a connect in progress (or done). The caller owns the descriptor.
    func startConnect() -> Result<Int32, HTTP2ConnectError> {
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return .failure(.fromErrno("socket")) }
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let status = bytes.withUnsafeBytes { raw in
            connect(descriptor, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        if status != 0 && errno != EINPROGRESS {
            let error = HTTP2ConnectError.fromErrno("connect")
            close(descriptor)
            return .failure(error)
        }
        return .success(descriptor)
    }
}

struct HTTP2ConnectError: Error, Sendable {
    var text: String

    static func fromErrno(_ operation: String) -> HTTP2ConnectError {
        HTTP2ConnectError(text: "\(operation): \(String(cString: strerror(errno)))")
    }
}
