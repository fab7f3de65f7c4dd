import COpenSSL
import COpenSSLShim

/// Small helpers around OpenSSL's error queue and memory BIOs, used by the key types.
enum P256OpenSSL {
    /// Drains OpenSSL's thread-local error queue into one readable line.
    static func drainErrors() -> String {
        var messages: [String] = []
        while true {
            let code = fanout_err_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages.isEmpty ? "no OpenSSL error detail" : messages.joined(separator: "; ")
    }

    static func failure(_ operation: String) -> P256KeyError {
        .openSSL(operation: operation, detail: drainErrors())
    }

    /// Runs `body` with a read-only memory BIO over `bytes`; the BIO is freed afterwards.
    static func withReadBIO<R>(_ bytes: [UInt8], _ body: (OpaquePointer) throws -> R) throws -> R {
        try bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { throw failure("BIO_new_mem_buf") }
            defer { BIO_free(bio) }
            return try body(bio)
        }
    }

    /// Runs `write` against a fresh memory BIO and returns what was written as a String.
    static func writeToString(_ operation: String, _ write: (OpaquePointer) -> Int32) throws -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw failure("BIO_new") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw failure(operation) }
        var pointer: UnsafeMutablePointer<CChar>?
        let length = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &pointer)
        guard length > 0, let pointer else { throw failure(operation) }
        return pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }

    /// Checks that `pkey` is an EC key on P-256.
    /// Reads one PEM key with `read` (PEM_read_bio_PrivateKey or PEM_read_bio_PUBKEY) and checks it is
    /// EC P-256. The caller owns the returned EVP_PKEY; on a throw nothing is left to free.
    static func loadP256PEM(_ pem: String, read: (OpaquePointer) -> OpaquePointer?) throws -> OpaquePointer {
        guard pem.contains("-----BEGIN") else { throw P256KeyError.notPEM(detail: "no '-----BEGIN' line") }
        let loaded: OpaquePointer = try withReadBIO(Array(pem.utf8)) { bio in
            guard let key = read(bio) else { throw P256KeyError.notPEM(detail: drainErrors()) }
            return key
        }
        do {
            try requireP256(loaded)
        } catch {
            EVP_PKEY_free(loaded)
            throw error
        }
        return loaded
    }

    static func requireP256(_ pkey: OpaquePointer) throws {
        let baseID = EVP_PKEY_get_base_id(pkey)
        guard baseID == EVP_PKEY_EC else {
            let name = OBJ_nid2sn(baseID).map { String(cString: $0) } ?? "key type \(baseID)"
            throw P256KeyError.notEllipticCurve(keyType: name)
        }
        var buffer = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(pkey, "group", &buffer, buffer.count, &length) == 1 else {
            throw failure("reading the EC curve name")
        }
        let curve = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard curve == "prime256v1" || curve == "P-256" else { throw P256KeyError.wrongCurve(curve: curve) }
    }
}
