import COpenSSL
import COpenSSLShim

/// Where a generated loopback certificate set was written.
public struct LoopbackCertificateFiles: Sendable, Equatable {
    /// PEM of the throwaway CA: what clients pass as their trust anchor (`curl --cacert`).
    public var caCertificatePath: String
    /// PEM chain for the server: leaf, then the CA.
    public var certificateChainPath: String
    /// PEM (PKCS#8) private key of the leaf.
    public var privateKeyPath: String
}

/// Mints a throwaway CA and a server certificate for loopback (SAN `localhost`, `127.0.0.1`, `::1`),
/// so test clients verify TLS normally instead of disabling verification.
///
/// Only for the APNs simulator and tests: the CA key is discarded after signing, and the
/// certificates are valid for `validityDays`.
public enum CertificateAuthority {
    public static func generateLoopbackServerFiles(
        in directory: String, commonName: String = "Fanout APNs simulator", validityDays: Int = 30
    ) throws -> LoopbackCertificateFiles {
        let caKey = try generateP256Key()
        defer { EVP_PKEY_free(caKey) }
        let leafKey = try generateP256Key()
        defer { EVP_PKEY_free(leafKey) }

        let ca = try makeCertificate(
            subjectCN: "\(commonName) test CA", subjectKey: caKey, issuer: nil, issuerKey: caKey, serial: 1,
            validityDays: validityDays,
            extensions: [(NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign"),
                         (NID_subject_key_identifier, "hash")])
        defer { X509_free(ca) }
        let leaf = try makeCertificate(
            subjectCN: commonName, subjectKey: leafKey, issuer: ca, issuerKey: caKey, serial: 2,
            validityDays: validityDays,
            extensions: [(NID_basic_constraints, "critical,CA:FALSE"),
                         (NID_key_usage, "critical,digitalSignature,keyEncipherment"),
                         (NID_ext_key_usage, "serverAuth"),
                         (NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1"),
                         (NID_authority_key_identifier, "keyid:always")])
        defer { X509_free(leaf) }

        let files = LoopbackCertificateFiles(
            caCertificatePath: directory + "/ca.pem",
            certificateChainPath: directory + "/server-chain.pem",
            privateKeyPath: directory + "/server-key.pem")
        try writePEM(files.caCertificatePath) { PEM_write_bio_X509($0, ca) }
        try writePEM(files.certificateChainPath) { PEM_write_bio_X509($0, leaf) == 1 ? PEM_write_bio_X509($0, ca) : 0 }
        try writePEM(files.privateKeyPath) { PEM_write_bio_PrivateKey($0, leafKey, nil, nil, 0, nil, nil) }
        return files
    }

    /// A new P-256 key; the caller frees it with `EVP_PKEY_free`.
    private static func generateP256Key() throws -> OpaquePointer {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw TLSError.fromQueue("EVP_PKEY_CTX_new_from_name(EC)") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw TLSError.fromQueue("EVP_PKEY_keygen_init") }
        guard EVP_PKEY_CTX_set_group_name(context, "P-256") == 1 else { throw TLSError.fromQueue("set group P-256") }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(context, &key) == 1, let key else { throw TLSError.fromQueue("EVP_PKEY_generate") }
        return key
    }

    /// A signed certificate; the caller frees it with `X509_free`. `issuer == nil` makes it self-signed.
    private static func makeCertificate(
        subjectCN: String, subjectKey: OpaquePointer, issuer: OpaquePointer?, issuerKey: OpaquePointer,
        serial: Int, validityDays: Int, extensions: [(Int32, String)]
    ) throws -> OpaquePointer {
        guard let certificate = X509_new() else { throw TLSError.fromQueue("X509_new") }
        do {
            guard X509_set_version(certificate, 2) == 1 else { throw TLSError.fromQueue("X509_set_version") }
            guard ASN1_INTEGER_set(X509_get_serialNumber(certificate), serial) == 1 else { throw TLSError.fromQueue("set serial") }
            guard X509_gmtime_adj(X509_getm_notBefore(certificate), -3600) != nil,
                  X509_gmtime_adj(X509_getm_notAfter(certificate), validityDays * 86_400) != nil
            else { throw TLSError.fromQueue("set validity") }
            guard X509_set_pubkey(certificate, subjectKey) == 1 else { throw TLSError.fromQueue("X509_set_pubkey") }
            let name = X509_get_subject_name(certificate)
            guard X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_FLAG | 1, subjectCN, -1, -1, 0) == 1 else {
                throw TLSError.fromQueue("set subject CN")
            }
            let issuerName = issuer.map { X509_get_subject_name($0) } ?? name
            guard X509_set_issuer_name(certificate, issuerName) == 1 else { throw TLSError.fromQueue("set issuer") }
            var v3 = X509V3_CTX()
            X509V3_set_ctx(&v3, issuer ?? certificate, certificate, nil, nil, 0)
            for (nid, value) in extensions {
                guard let ext = X509V3_EXT_conf_nid(nil, &v3, nid, value) else {
                    throw TLSError.fromQueue("build extension \(value)")
                }
                defer { X509_EXTENSION_free(ext) }
                guard X509_add_ext(certificate, ext, -1) == 1 else { throw TLSError.fromQueue("add extension \(value)") }
            }
            guard X509_sign(certificate, issuerKey, EVP_sha256()) > 0 else { throw TLSError.fromQueue("X509_sign") }
            return certificate
        } catch {
            X509_free(certificate)
            throw error
        }
    }

    private static func writePEM(_ path: String, _ write: (OpaquePointer) -> Int32) throws {
        guard let bio = BIO_new_file(path, "w") else { throw TLSError.fromQueue("open \(path) for writing") }
        defer { BIO_free_all(bio) }
        guard write(bio) == 1 else { throw TLSError.fromQueue("write PEM to \(path)") }
    }
}
