import Foundation
import Testing
@testable import FanoutWorker

/// Configuration inputs `scripts/fuzz` (FuzzConfiguration) found mishandled, fed to the loader exactly.
@Suite struct ConfigurationHostileInputTests {
    /// The fuzzer's file, byte for byte (`$FILES/…` is its key file): a key with a stray 0xE0 byte and
    /// the malformed number `1+00`. Each load named a different place, with a type mismatch ("expected
    /// a String, found a dictionary / a number") instead of the malformed number, because the reader
    /// took any error for "not this kind" and tried the next one, and read members in hash order.
    /// Now: the first problem in key order, with its place and what is wrong there.
    static func brokenFile(keyPath: String) -> Data {
        let text = #"""
        {"apps": [{"bun\#u{1}dle_id": "com.example.exports", "team_id": "TEAM123456", "key_id": "ABCDE12345", "key_path": "$FILES/AuthKey_KEY0000001.p8"}, {"bundle_id": "com.example.sfetch.wait.max.ports", "team_id": "TEAM123456", "keY_id": "ABCDE12345", "key_path": "$FILES/AuthKey_KEY0000001.p8", "environment": "sandbox", "broadcast_channels": {"AAAA": "most-recent"}}], "apns": {"base_url": "https://127.0.0.1:8443", "management_base_url": "https://127.0.0.1:8444", "ca_file": "$FILES/ca.pem", "transport": "curl", "jbackpressurenterval": 1+00}, "kafka": {"group_instance_id": "fanout-0", "commit_interval": 0.5, "properties": {"group.protocol": "classic", "isolation.level": "READ_COMMITTED", "socket.keepalive.enable": true, "retries": 5}}}
        """#.replacingOccurrences(of: "$FILES/AuthKey_KEY0000001.p8", with: keyPath)
        // 0x01 stands for the file's lone 0xE0 byte, which no Swift string holds.
        return Data(text.utf8.map { $0 == 0x01 ? 0xE0 : $0 })
    }

    @Test func aFileThatIsNotJSONGetsTheSameErrorEveryTimeNamingTheMalformedNumber() throws {
        let fixture = try ConfigFixture()
        let path = fixture.directory.appendingPathComponent("broken.json").path
        try Self.brokenFile(keyPath: fixture.keyPath).write(to: URL(fileURLWithPath: path))
        let errors = (0..<8).compactMap { _ in loadError(path) }
        #expect(errors.count == 8)
        #expect(Set(errors.map(\.issues)).count == 1, "\(errors.map(\.description))")
        let error = try #require(errors.first)
        #expect(error.issues.map(\.key) == ["config file"])
        #expect(error.description.contains("not valid JSON"))
        #expect(error.description.contains("at apns.jbackpressurenterval: ") && error.description.contains("in number"), "\(error)")
        #expect(!error.description.contains("Expected to decode"), "\(error)")
    }

    @Test func aMalformedValueIsReportedWhereItIs() throws {
        let fixture = try ConfigFixture()
        for (value, place) in [("1+00", "engine.max_quiet"), ("01", "engine.max_quiet"), ("1e400", "engine.max_quiet"), ("[1, 2, -]", "engine.max_quiet[2]")] {
            let error = try #require(loadError(try fixture.file(#""engine": {"max_quiet": \#(value)}"#)))
            #expect(error.issues.map(\.key) == ["config file"])
            #expect(error.description.contains("at \(place): ") && !error.description.contains("Expected to decode"), "\(value): \(error)")
        }
    }

    /// `FANOUT_S__-1=` (the fuzzer's input, minimized): `-1` was taken for a list index and read
    /// `items[-1]`, so a worker started with such a variable crashed instead of naming it.
    @Test func aNegativeListIndexIsAProblemNotACrash() throws {
        let error = try #require(loadError(nil, ["FANOUT_S__-1": ""]))
        #expect(error.issues.contains { $0.key == "s" && $0.source == .environment(variable: "FANOUT_S__-1") }, "\(error)")
        let fixture = try ConfigFixture()
        let listed = try #require(loadError(try fixture.file(), ["FANOUT_APPS__-1__KEY_ID": "ABCDE12345"]))
        #expect(listed.issues.map(\.key) == ["apps.-1.key_id"])
        #expect(listed.description.contains("'-1' is not a list index"), "\(listed)")
    }
}
