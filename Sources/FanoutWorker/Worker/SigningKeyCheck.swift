#if canImport(Glibc)
import Glibc
#endif

/// Whether an app's APNs signing key (`.p8`) is kept to its owner. Anyone who can read the key can
/// sign provider tokens for the whole team, so a key readable by group or others is worth a warning
/// at startup (it still works: refusing it would stop deliveries over a file mode).
enum SigningKeyCheck {
    /// The permission bits of the file at `path` (symbolic links followed) when its group or others may
    /// read it; nil when only the owner may, or when the file cannot be examined (loading it says why).
    static func exposedMode(of path: String) -> mode_t? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        let mode = status.st_mode & 0o7777
        return mode & (S_IRGRP | S_IROTH) != 0 ? mode : nil
    }

    /// Logs one warning for each app whose key file is readable by group or others.
    static func warnAboutExposedKeys(_ apps: [FanoutConfiguration.App], log: Log) {
        for app in apps {
            guard let mode = exposedMode(of: app.keyPath) else { continue }
            log.warning("the APNs signing key file is readable by group or others: whoever can read it can sign pushes for the team; make it readable by its owner only (chmod 600)",
                        ["app": .string(app.bundleID), "key_id": .string(app.keyID), "key_path": .string(app.keyPath),
                         "mode": .string("0" + String(mode, radix: 8))])
        }
    }
}
