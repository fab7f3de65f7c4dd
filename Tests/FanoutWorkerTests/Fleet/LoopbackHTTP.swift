#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A minimal blocking HTTP/1.1 client for loopback control endpoints (the simulator's, a worker's
/// admin port): one request per connection, read to the server's close, 5 s socket timeouts.
enum LoopbackHTTP {
    struct Response {
        var status: Int
        var body: Data
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    static func request(port: Int, _ method: String, _ path: String, body: Data = Data()) throws -> Response {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw FleetError("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw FleetError("connect 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
        var message = Data("\(method) \(path) HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-length: \(body.count)\r\n\r\n".utf8)
        message.append(body)
        try message.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let n = send(fd, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                guard n > 0 else { throw FleetError("send to 127.0.0.1:\(port)\(path): \(String(cString: strerror(errno)))") }
                sent += n
            }
        }
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n == 0 { break }
            guard n > 0 else { throw FleetError("recv from 127.0.0.1:\(port)\(path): \(String(cString: strerror(errno)))") }
            received.append(contentsOf: buffer[0..<n])
        }
        guard let end = received.range(of: Data("\r\n\r\n".utf8)),
              let statusLine = String(decoding: received[..<end.lowerBound], as: UTF8.self).split(separator: "\r\n").first,
              let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") else {
            throw FleetError("no HTTP response from 127.0.0.1:\(port)\(path): \(String(decoding: received.prefix(200), as: UTF8.self))")
        }
        return Response(status: status, body: received[end.upperBound...])
    }
}
