import Foundation

/// A system call that failed, with its errno.
public struct SystemCallError: Error, Sendable, CustomStringConvertible {
    public var call: String
    public var errno: Int32

    public var description: String { "\(call): \(String(cString: strerror(errno)))" }
}
