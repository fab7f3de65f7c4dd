#!/bin/sh
# Builds and runs the APNs client benchmark (not a test) in a side package, so it needs no target in
# the main Package.swift: APNsClient over each transport (libcurl, nghttp2) → APNs simulator
# (in-process, 1 thread) over HTTP/2+TLS, next to libcurl's own ceiling (curl-ceiling.c, same request
# shape) and h2load against the same server; R interleaved rounds, medians and ratios at the end.
#   Benchmarks/apns-client-bench/run.sh [--requests N] [--connections C] [--streams S] [--runs R]
#                                       [--transports curl,nghttp2] [--timeline 1]
#   Benchmarks/apns-client-bench/run.sh --url https://127.0.0.1:PORT --ca CA.pem --token HEX   # e.g. nghttpd
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=${BENCH_DIR:-/tmp/fanout-apns-bench}
mkdir -p "$work/Sources" "$work/Bench"
for module in CCurl CCurlShim COpenSSL COpenSSLShim CNghttp2 CNghttp2Shim APNsModel FanoutCrypto FanoutHTTP2 FanoutAPNs APNsSimulator; do
    ln -sfn "$repo/Sources/$module" "$work/Sources/$module"
done
ln -sfn "$repo/Benchmarks/apns-client-bench/main.swift" "$work/Bench/main.swift"
cat > "$work/Package.swift" <<'PKG'
// swift-tools-version:6.0
import PackageDescription
let package = Package(name: "APNsClientBench", targets: [
    .systemLibrary(name: "CCurl", pkgConfig: "libcurl"),
    .systemLibrary(name: "COpenSSL", pkgConfig: "openssl"),
    .systemLibrary(name: "CNghttp2", pkgConfig: "libnghttp2"),
    .target(name: "CCurlShim", dependencies: ["CCurl"]),
    .target(name: "COpenSSLShim", dependencies: ["COpenSSL"]),
    .target(name: "CNghttp2Shim", dependencies: ["CNghttp2"]),
    .target(name: "APNsModel"),
    .target(name: "FanoutCrypto", dependencies: ["COpenSSL", "COpenSSLShim"]),
    .target(name: "FanoutHTTP2", dependencies: ["CNghttp2", "CNghttp2Shim", "FanoutCrypto"]),
    .target(name: "FanoutAPNs", dependencies: ["APNsModel", "FanoutCrypto", "FanoutHTTP2", "CCurl", "CCurlShim"]),
    .target(name: "APNsSimulator", dependencies: ["APNsModel", "FanoutCrypto", "FanoutHTTP2"]),
    .executableTarget(name: "apns-client-bench", dependencies: ["FanoutAPNs", "APNsModel", "FanoutCrypto", "APNsSimulator"], path: "Bench"),
])
PKG
cc -O2 -o "$work/curl-ceiling" "$repo/Benchmarks/curl-ceiling.c" -lcurl
(cd "$work" && swift build -c release --product apns-client-bench >/dev/null)
exec "$work/.build/release/apns-client-bench" --compare "$work/curl-ceiling" "$@"
