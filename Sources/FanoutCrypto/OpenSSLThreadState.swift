import COpenSSL

/// What OpenSSL keeps for the calling thread: its own random generators (made at its first TLS
/// handshake or signature) and its error queue, which OpenSSL frees only from the thread's exit
/// handlers.
public enum OpenSSLThreadState {
    /// Frees the calling thread's OpenSSL state now. A thread that another thread waits for calls it
    /// last, before it signals that it is done: a process that exits right after that wait could
    /// otherwise end before the thread's exit handlers ran, and LeakSanitizer reported the state as
    /// leaked (`fanout channels create` under load, issue 14). OpenSSL makes new state if the thread
    /// uses it again.
    public static func release() { OPENSSL_thread_stop() }
}
