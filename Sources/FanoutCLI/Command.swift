import Foundation

/// One `fanout` subcommand. Parsing is hand-written (no outside packages are reachable here):
/// each command gets its arguments after the subcommand name and returns a process exit code.
public protocol Command: Sendable {
    /// The word after `fanout`, e.g. `broker`.
    static var name: String { get }
    /// One line for `fanout --help`.
    static var summary: String { get }
    /// Full text for `fanout <name> --help`.
    static var help: String { get }
    static func run(_ arguments: [String]) async throws -> Int32
}

/// A usage error: printed with the command's help hint, exit code 64 (EX_USAGE).
public struct UsageError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
