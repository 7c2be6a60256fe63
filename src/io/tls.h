/*
 * TLS as a memory pipe (mbedTLS): ciphertext read by libuv is fed in,
 * plaintext comes out; plaintext written goes out as ciphertext in `out`,
 * which the caller writes to the socket. No socket is touched here.
 */
#ifndef CITEGATE_TLS_H
#define CITEGATE_TLS_H

#include "citegate/common.h"
#include "err.h"

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

typedef struct cg_tls_conf {
    mbedtls_ssl_config conf;
    mbedtls_x509_crt ca, cert;
    mbedtls_pk_context key;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    const char *alpn[3];
    /* Client: the last session the upstream gave, offered by the next
     * connection so that it resumes instead of a full handshake. */
    mbedtls_ssl_session session;
    bool have_session;
    bool client;
} cg_tls_conf_t;

typedef struct cg_tls {
    mbedtls_ssl_context ssl;
    cg_buf_t in; /* ciphertext received, from in_off on not yet read */
    size_t in_off;
    cg_buf_t out; /* ciphertext to send */
    bool done;    /* handshake finished */
    cg_tls_conf_t *conf;
} cg_tls_t;

/* Client configuration: verify against ca_file (NULL: the system bundle)
 * unless insecure. Returns 0 or -1 with a message in err. */
int cg_tls_conf_client(cg_tls_conf_t *c, const char *ca_file, bool insecure, char *err, size_t el);
/* Server configuration from PEM files. */
int cg_tls_conf_server(cg_tls_conf_t *c, const char *cert, const char *key, char *err, size_t el);
void cg_tls_conf_free(cg_tls_conf_t *c);

/* CG_OK or CG_E_TLS. */
cg_err_t cg_tls_init(cg_tls_t *t, cg_tls_conf_t *c, const char *sni);
void cg_tls_free(cg_tls_t *t);
void cg_tls_feed(cg_tls_t *t, const char *p, size_t n);
/* Runs the handshake as far as the input allows: CG_OK when done,
 * CG_E_AGAIN for more input, CG_E_TLS (message in err). */
cg_err_t cg_tls_handshake(cg_tls_t *t, char *err, size_t el);
/* Reads plaintext into buf: CG_OK with *got bytes (0: none for now),
 * CG_E_CLOSED on the peer's close_notify, CG_E_TLS on failure. */
cg_err_t cg_tls_read(cg_tls_t *t, char *buf, size_t len, size_t *got);
/* Encrypts all of p into out: CG_OK or CG_E_TLS. */
cg_err_t cg_tls_write(cg_tls_t *t, const char *p, size_t n);

#endif
