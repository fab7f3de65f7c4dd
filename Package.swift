// swift-tools-version:6.0
import PackageDescription

/// Warnings are errors everywhere: a warning in a push pipeline is a bug report nobody reads.
let strict: [SwiftSetting] = [.unsafeFlags(["-warnings-as-errors"])]

let package = Package(
    name: "Fanout",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "fanout", targets: ["fanout"]),
        // The modules the fuzz targets drive, for Fuzz/Package.swift (built apart, with libFuzzer, by scripts/fuzz).
        .library(name: "FanoutFuzzed", targets: ["APNsModel", "FanoutCore", "FanoutCrypto", "FanoutAPNs", "APNsSimulator", "FanoutWorker"]),
    ],
    targets: [
        // MARK: C libraries (one system-library module per library, one Swift module imports each)
        .systemLibrary(name: "CRdKafka", pkgConfig: "rdkafka", providers: [.apt(["librdkafka-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CNghttp2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        // glibc's allocator controls (part of libc): the worker returns freed heap pages (ProcessHeap).
        .systemLibrary(name: "CMalloc"),
        // jemalloc's options and statistics for a release `fanout`, which is linked with it (ProcessHeap).
        .target(name: "CHeapShim"),
        // Typed wrappers for variadic / macro C APIs that Swift cannot call.
        .target(name: "CCurlShim", dependencies: ["CCurl"]),
        .target(name: "COpenSSLShim", dependencies: ["COpenSSL"]),
        // nghttp2's allocator hook (nghttp2_mem) as a recycling pool per session: plain C, no Swift per allocation.
        .target(name: "CNghttp2Shim", dependencies: ["CNghttp2"]),

        // MARK: Pure core (no C, no I/O)
        .target(name: "APNsModel", swiftSettings: strict),
        .target(name: "FanoutCore", dependencies: ["APNsModel"], swiftSettings: strict),

        // MARK: Adapters around C
        .target(name: "FanoutCrypto", dependencies: ["COpenSSL", "COpenSSLShim"], swiftSettings: strict),
        // FanoutCore for its pure value types (`PartitionID`), so the worker needs no conversions;
        // APNsModel for `Redact`, which masks tokens and JWTs in the dead-letter headers and stderr lines it writes.
        .target(name: "FanoutKafka", dependencies: ["CRdKafka", "FanoutCore", "APNsModel"], swiftSettings: strict),
        // The only importer of CNghttp2: nghttp2 sessions, the framed output over TLS, the epoll set.
        .target(name: "FanoutHTTP2", dependencies: ["CNghttp2", "CNghttp2Shim", "FanoutCrypto"], swiftSettings: strict),
        .target(name: "FanoutAPNs", dependencies: ["APNsModel", "FanoutCrypto", "FanoutHTTP2", "CCurl", "CCurlShim"], swiftSettings: strict),
        .target(name: "APNsSimulator", dependencies: ["APNsModel", "FanoutCrypto", "FanoutHTTP2"], swiftSettings: strict),

        // MARK: The product
        .target(name: "FanoutWorker",
                dependencies: ["FanoutCore", "APNsModel", "FanoutKafka", "FanoutAPNs", "CMalloc", "CHeapShim"],
                swiftSettings: strict),
        .target(name: "FanoutCLI",
                dependencies: ["FanoutWorker", "FanoutCore", "APNsModel", "FanoutKafka", "FanoutAPNs", "APNsSimulator", "FanoutCrypto"],
                swiftSettings: strict),
        // A release build allocates with jemalloc (Debian's libjemalloc2): per-thread caches where glibc's
        // two arenas made the worker's threads queue on their locks (README "Load testing and benchmarks"). Debug builds,
        // the tests and the sanitizers (which bring their own allocator) keep glibc malloc.
        .executableTarget(name: "fanout", dependencies: ["FanoutCLI"], swiftSettings: strict,
                          linkerSettings: [.linkedLibrary("jemalloc", .when(configuration: .release))]),

        // MARK: Tests mirror the source modules
        // Child processes for tests without Foundation.Process (see ChildProcess).
        .target(name: "FanoutTestSupport", path: "Tests/Support", swiftSettings: strict),
        .testTarget(name: "APNsModelTests", dependencies: ["APNsModel"], swiftSettings: strict),
        .testTarget(name: "FanoutCoreTests", dependencies: ["FanoutCore", "APNsModel"], swiftSettings: strict),
        .testTarget(name: "FanoutKafkaTests", dependencies: ["FanoutKafka", "FanoutCore", "FanoutTestSupport"], swiftSettings: strict),
        .testTarget(name: "FanoutHTTP2Tests", dependencies: ["FanoutHTTP2"], swiftSettings: strict),
        .testTarget(name: "FanoutAPNsTests", dependencies: ["FanoutAPNs", "APNsModel", "APNsSimulator", "FanoutCrypto", "FanoutTestSupport"], swiftSettings: strict),
        .testTarget(name: "APNsSimulatorTests", dependencies: ["APNsSimulator", "APNsModel", "FanoutCrypto", "FanoutTestSupport"], swiftSettings: strict),
        .testTarget(name: "FanoutWorkerTests",
                    dependencies: ["FanoutWorker", "FanoutCore", "FanoutKafka", "FanoutAPNs", "APNsSimulator", "FanoutCrypto", "FanoutTestSupport"],
                    swiftSettings: strict),
        .testTarget(name: "FanoutCLITests", dependencies: ["FanoutCLI", "FanoutWorker", "FanoutCore", "FanoutKafka", "APNsSimulator", "FanoutCrypto", "FanoutTestSupport"],
                    swiftSettings: strict),
    ]
)
