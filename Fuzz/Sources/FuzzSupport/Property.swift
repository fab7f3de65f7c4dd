import Glibc

/// A property of the code under test that failed for this input: printed, then the process aborts,
/// which libFuzzer reports as a crash and saves the input as `crash-<sha1>`.
public enum Property {
    public static func require(_ condition: Bool, _ statement: @autoclosure () -> String,
                               file: StaticString = #fileID, line: UInt = #line) {
        guard !condition else { return }
        fail(statement(), file: file, line: line)
    }

    public static func fail(_ statement: String, file: StaticString = #fileID, line: UInt = #line) -> Never {
        let line = Array("property failed (\(file):\(line)): \(statement)\n".utf8)
        _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        abort()
    }
}
