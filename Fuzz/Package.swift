// swift-tools-version:6.0
import PackageDescription

/// libFuzzer targets, one per kind of untrusted input. A package of its own so the main package's
/// `swift build --build-tests` never sees them; `scripts/fuzz` builds them with
/// `-sanitize=fuzzer,address -enable-testing` (the targets reach internal entry points with
/// `@testable import`) into `.build/fuzz`.
///
/// SwiftPM links every executable with `main` renamed to `<module>_main`, so libFuzzer's own `main`
/// is never linked: each target's top-level code hands `LLVMFuzzerTestOneInput` to
/// `LLVMFuzzerRunDriver`, which takes the same command line.
let strict: [SwiftSetting] = [.unsafeFlags(["-warnings-as-errors"])]

let package = Package(
    name: "FanoutFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Fanout", path: "..")],
    targets: [
        .target(name: "CLibFuzzer"),
        .target(name: "FuzzSupport", dependencies: ["CLibFuzzer"], swiftSettings: strict),
        .executableTarget(name: "FuzzEventDecoder",
                          dependencies: ["FuzzSupport", .product(name: "FanoutFuzzed", package: "Fanout")],
                          swiftSettings: strict),
        .executableTarget(name: "FuzzTokenRecord",
                          dependencies: ["FuzzSupport", .product(name: "FanoutFuzzed", package: "Fanout")],
                          swiftSettings: strict),
        .executableTarget(name: "FuzzConfiguration",
                          dependencies: ["FuzzSupport", .product(name: "FanoutFuzzed", package: "Fanout")],
                          swiftSettings: strict),
        .executableTarget(name: "FuzzAPNsResponse",
                          dependencies: ["FuzzSupport", .product(name: "FanoutFuzzed", package: "Fanout")],
                          swiftSettings: strict),
        .executableTarget(name: "FuzzStateRecord",
                          dependencies: ["FuzzSupport", .product(name: "FanoutFuzzed", package: "Fanout")],
                          swiftSettings: strict),
        .executableTarget(name: "FuzzSimulatorRequest",
                          dependencies: ["FuzzSupport", .product(name: "FanoutFuzzed", package: "Fanout")],
                          swiftSettings: strict),
    ]
)
