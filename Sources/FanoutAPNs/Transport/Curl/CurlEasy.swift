import CCurl
import CCurlShim

/// Owns one libcurl easy handle (`curl_easy_cleanup` in deinit).
///
/// Confined to the client's transport thread; never shared.
final class CurlEasy {
    /// Owned; freed in deinit. `CURL *` is `void *` in C.
    let handle: UnsafeMutableRawPointer

    init() throws(APNsClientError) {
        CurlGlobal.ensureInitialized()
        guard let handle = curl_easy_init() else { throw .curl("curl_easy_init failed") }
        self.handle = handle
    }

    deinit { curl_easy_cleanup(handle) }

    func set(_ option: CURLoption, _ value: Int) throws(APNsClientError) {
        try check(fanout_curl_easy_setopt_long(handle, option, value), option)
    }

    func set(_ option: CURLoption, pointer: UnsafeRawPointer?) throws(APNsClientError) {
        try check(fanout_curl_easy_setopt_ptr(handle, option, pointer), option)
    }

    /// libcurl copies string options (CURLOPT_URL, CURLOPT_CAINFO, ...), so the Swift string may go.
    func set(_ option: CURLoption, string: String?) throws(APNsClientError) {
        guard let string else { try set(option, pointer: nil); return }
        let code = string.withCString { fanout_curl_easy_setopt_ptr(handle, option, $0) }
        try check(code, option)
    }

    func long(_ info: CURLINFO) -> Int {
        var value = 0
        _ = fanout_curl_easy_getinfo_long(handle, info, &value)
        return value
    }

    private func check(_ code: CURLcode, _ option: CURLoption) throws(APNsClientError) {
        guard code == CURLE_OK else {
            throw .curl("curl_easy_setopt(\(option.rawValue)): \(String(cString: curl_easy_strerror(code)))")
        }
    }
}

/// Owns one libcurl multi handle (`curl_multi_cleanup` in deinit). Confined to the transport thread,
/// except `wakeup()`, which libcurl documents as safe to call from any thread.
final class CurlMulti: @unchecked Sendable {
    /// Owned; freed in deinit. Only `wakeup` is used off the transport thread (curl_multi_wakeup is
    /// thread-safe by libcurl's contract); everything else runs on the transport thread.
    let handle: UnsafeMutableRawPointer
    /// With `trackSockets`: the sockets this multi wants watched, kept current by libcurl's socket
    /// callback (any descriptor number). Owned; freed after `curl_multi_cleanup`, which may still report
    /// sockets closing.
    private let sockets: OpaquePointer?

    init(trackSockets: Bool = false) throws(APNsClientError) {
        CurlGlobal.ensureInitialized()
        guard let handle = curl_multi_init() else { throw .curl("curl_multi_init failed") }
        self.handle = handle
        guard trackSockets else { sockets = nil; return }
        guard let sockets = fanout_curl_sockets_new() else {
            curl_multi_cleanup(handle)
            throw .curl("cannot allocate the socket list (out of memory)")
        }
        self.sockets = sockets
        let code = fanout_curl_multi_track_sockets(handle, sockets)
        guard code == CURLM_OK else {
            // deinit does not run for a failed init: clean up here.
            curl_multi_cleanup(handle)
            fanout_curl_sockets_free(sockets)
            throw .curl("CURLMOPT_SOCKETFUNCTION: \(String(cString: curl_multi_strerror(code)))")
        }
    }

    deinit {
        curl_multi_cleanup(handle)
        fanout_curl_sockets_free(sockets)
    }

    /// Runs libcurl's transfers; with socket tracking, also brings the socket list up to date.
    func perform() {
        var running: Int32 = 0
        if sockets != nil {
            _ = fanout_curl_multi_perform_tracking(handle, &running)
        } else {
            _ = curl_multi_perform(handle, &running)
        }
    }

    /// Copies the sockets to watch (socket tracking only) into `out`; returns how many.
    func watchedSockets(into out: UnsafeMutablePointer<curl_waitfd>, capacity: Int) -> Int {
        guard let sockets, capacity > 0 else { return 0 }
        return Int(fanout_curl_sockets_copy(sockets, out, UInt32(capacity)))
    }

    func set(_ option: CURLMoption, _ value: Int) throws(APNsClientError) {
        let code = fanout_curl_multi_setopt_long(handle, option, value)
        guard code == CURLM_OK else {
            throw .curl("curl_multi_setopt(\(option.rawValue)): \(String(cString: curl_multi_strerror(code)))")
        }
    }

    func wakeup() { _ = curl_multi_wakeup(handle) }
}

/// `curl_global_init` once per process, before any handle exists.
enum CurlGlobal {
    private static let initialized: Bool = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
    }()

    static func ensureInitialized() { _ = initialized }
}
