import CLibFuzzer
import Glibc

/// Runs libFuzzer on one target's `LLVMFuzzerTestOneInput` with this process's command line
/// (`-max_total_time=…`, corpus folders, or single inputs to replay).
public enum FuzzDriver {
    public typealias TestOneInput = @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt

    public static func run(_ testOneInput: TestOneInput) -> Never {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
    }

    /// The input as a byte buffer (libFuzzer may pass a null pointer for the empty input).
    public static func bytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> UnsafeBufferPointer<UInt8> {
        guard let data, size > 0 else { return UnsafeBufferPointer(start: nil, count: 0) }
        return UnsafeBufferPointer(start: data, count: size)
    }
}
