import Foundation
import Testing
@testable import FanoutWorker

@Suite struct SigningKeyCheckTests {
    @Test func onlyKeysTheOwnerAloneCanReadPass() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-key-\(UUID().uuidString).p8").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data("key".utf8)))
        defer { try? FileManager.default.removeItem(atPath: path) }
        for (mode, exposed) in [(0o600, false), (0o400, false), (0o700, false), (0o620, false), (0o640, true), (0o604, true),
                                (0o644, true), (0o444, true)] {
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
            #expect((SigningKeyCheck.exposedMode(of: path) != nil) == exposed, "mode \(String(mode, radix: 8))")
        }
        #expect(SigningKeyCheck.exposedMode(of: path) == 0o444)
        #expect(SigningKeyCheck.exposedMode(of: path + ".missing") == nil, "a missing file is the loader's error, not this warning")
    }
}
