@testable import FanoutWorker
import FuzzSupport

/// One run of the loader: a configuration and the keys it read, or the problems it found. The loader
/// promises nothing else: any other error is a failed property.
enum ConfigurationLoad: Equatable {
    case loaded(FanoutConfiguration, asked: [String])
    case refused(ConfigurationError)

    init(path: String?, environment: [String: String]) {
        do {
            let (configuration, asked) = try FanoutConfiguration.loadReadingKeys(path: path, environment: environment)
            self = .loaded(configuration, asked: asked)
        } catch let error as ConfigurationError {
            self = .refused(error)
        } catch {
            Property.fail("the loader throws only ConfigurationError, threw \(type(of: error)): \(error)")
        }
    }

    static func == (lhs: ConfigurationLoad, rhs: ConfigurationLoad) -> Bool {
        switch (lhs, rhs) {
        case let (.loaded(a, askedA), .loaded(b, askedB)): a == b && askedA == askedB
        case let (.refused(a), .refused(b)): a.issues == b.issues
        default: false
        }
    }
}
