#ifndef FANOUT_COPENSSLSHIM_H
#define FANOUT_COPENSSLSHIM_H
/* Typed wrappers for OpenSSL function-like macros, which Swift does not import. */
#include <openssl/ssl.h>

int fanout_ssl_ctx_set_min_tls12(SSL_CTX *ctx);
long fanout_ssl_ctx_set_mode_release_buffers(SSL_CTX *ctx);
unsigned long fanout_err_get_error(void);

#endif
