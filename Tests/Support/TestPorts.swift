import Glibc
import Synchronization

/// Ports for test servers that must listen on a port of their own choosing: below Linux's ephemeral
/// range (32768-60999), so no bind to port 0 and no outgoing connection ever holds one, and handed out
/// once per test process, so two servers of the suite never draw the same. A helper that learns its
/// server is up only from "something accepts on the port" would otherwise, on a shared draw, talk to
/// another test's server (CI saw a TLS handshake with another test's CA that way).
public enum TestPorts {
    private static let drawn = Mutex(Set<Int>())

    /// A port no other caller in this process was given; may still be taken by another process, so a
    /// caller tries the next one when its bind fails.
    public static func draw() -> Int {
        drawn.withLock { drawn in
            while true {
                let candidate = Int.random(in: 20_000..<32_768)
                if drawn.insert(candidate).inserted { return candidate }
            }
        }
    }

    /// A blocking TCP socket for a loopback server or probe. (`SOCK_STREAM` is named here, where it
    /// resolves in every build: in a release build of the test targets it did not, beside their
    /// other C imports.)
    public static func tcpSocket() -> Int32 { socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0) }
}
