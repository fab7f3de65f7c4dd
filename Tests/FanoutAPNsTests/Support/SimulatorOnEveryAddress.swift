import APNsSimulator
import FanoutCrypto

extension APNsSimulator {
    /// A started simulator (one thread) listening on every IPv4 address, so its certificate (localhost,
    /// 127.0.0.1, ::1) can be reached by names and addresses it does not carry.
    static func startedOnEveryAddress(key: P256PrivateKey) throws -> APNsSimulator {
        var configuration = APNsSimulatorConfiguration(teamID: TestApps.teamID, keys: [TestApps.keyID: try key.publicKey().pemSPKI()],
                                                       apps: [TestApps.bundleID])
        configuration.host = "0.0.0.0"
        configuration.threads = 1
        let simulator = try APNsSimulator(configuration: configuration)
        try simulator.start()
        return simulator
    }
}
