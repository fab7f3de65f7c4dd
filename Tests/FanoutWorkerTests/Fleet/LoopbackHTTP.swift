#if canImport(Glibc)
import Glibc
#endif
import Foundation
import FanoutTestSupport

/// A minimal blocking HTTP/1.1 client for loopback control endpoints (the simulator's, a worker's
/// admin port): one request per connection, read to the server's close, 5 s socket timeouts.
enum LoopbackHTTP {
    struct Response {
        var status: Int
        var body: Data
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    static func request(port: Int, _ method: String, _ path: String, body: Data = Data()) throws -> Response {
        guard let fd = Loopback.connect(port: port) else {
            throw FleetError("connect 127.0.0.1:\(port): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
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
