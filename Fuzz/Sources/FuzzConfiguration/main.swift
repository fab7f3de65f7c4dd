import Foundation
import FuzzSupport

/// Fuzzes the configuration loader (`FanoutConfiguration.load`): the JSON file and the `FANOUT_*`
/// environment laid over it.
///
/// Input: the file's bytes, a NUL byte, then environment variables as `NAME=value` lines. No NUL at
/// all: the whole input is the file and the environment is empty; a NUL first: no file (defaults and
/// environment only). `$FILES/` anywhere is replaced by a folder holding `AuthKey_KEY0000001.p8` and
/// `ca.pem`, so inputs can name files that exist.
enum ConfigurationTarget {
    static let files: String = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-fuzz-configuration-\(getpid())")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for name in ["AuthKey_KEY0000001.p8", "ca.pem"] {
                try Data("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n".utf8).write(to: folder.appendingPathComponent(name))
            }
        } catch {
            Property.fail("cannot prepare \(folder.path): \(error)")
        }
        return folder.path
    }()
    static let configPath = files + "/fanout.json"

    static func run(_ input: UnsafeBufferPointer<UInt8>) {
        let (file, environmentBytes) = FuzzText.split(input, at: 0)
        let path: String?
        if environmentBytes != nil, file.isEmpty {
            path = nil
        } else {
            path = configPath
            do {
                try Data(substitute(file)).write(to: URL(fileURLWithPath: configPath))
            } catch {
                Property.fail("cannot write \(configPath): \(error)")
            }
        }
        let environment = environmentBytes.map(Self.environment) ?? [:]

        let first = ConfigurationLoad(path: path, environment: environment)
        let second = ConfigurationLoad(path: path, environment: environment)
        Property.require(first == second, "loading the same file and environment twice gives the same answer:\n\(first)\n---\n\(second)")
        switch first {
        case .refused(let error):
            Property.require(!error.issues.isEmpty, "a refused configuration names at least one problem")
            for issue in error.issues {
                Property.require(!issue.key.isEmpty && !issue.message.isEmpty, "every problem names its key and what is wrong: \(issue)")
            }
        case .loaded(let configuration, let asked):
            LoadedConfiguration.check(configuration, asked: asked)
        }
    }

    static func substitute(_ bytes: [UInt8]) -> [UInt8] {
        let marker = Array("$FILES".utf8), replacement = Array(files.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == marker[0], bytes.count - index >= marker.count, Array(bytes[index..<(index + marker.count)]) == marker {
                out.append(contentsOf: replacement)
                index += marker.count
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }

    /// `NAME=value` lines; a variable's value is everything after the first `=` (a later line with the same name wins).
    static func environment(_ bytes: [UInt8]) -> [String: String] {
        var variables: [String: String] = [:]
        for line in substitute(bytes).split(separator: UInt8(ascii: "\n")) where !line.contains(0) {
            guard let equals = line.firstIndex(of: UInt8(ascii: "=")), equals > line.startIndex else { continue }
            variables[String(decoding: line[..<equals], as: UTF8.self)] = String(decoding: line[(equals + 1)...], as: UTF8.self)
        }
        return variables
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    ConfigurationTarget.run(FuzzDriver.bytes(data, size))
    return 0
}

FuzzDriver.run(testOneInput)
