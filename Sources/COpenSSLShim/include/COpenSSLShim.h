#ifndef FANOUT_COPENSSLSHIM_H
#define FANOUT_COPENSSLSHIM_H
/* Typed wrappers for OpenSSL function-like macros, which Swift does not import. */
#include <openssl/ssl.h>

int fanout_ssl_ctx_set_min_tls12(SSL_CTX *ctx);
long fanout_ssl_ctx_set_mode_release_buffers(SSL_CTX *ctx);
unsigned long fanout_err_get_error(void);
/* SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER (used by the APNs simulator's TLS server). */
long fanout_ssl_ctx_set_mode_partial_write(SSL_CTX *ctx);
/* SNI for a client session (SSL_set_tlsext_host_name is a macro). */
long fanout_ssl_set_tlsext_host_name(SSL *ssl, const char *name);

#endif
