/*
 * TLS as a memory pipe (mbedTLS): ciphertext read by libuv is fed in,
 * plaintext comes out; plaintext written goes out as ciphertext in `out`,
 * which the caller writes to the socket. No socket is touched here.
 */
#ifndef CITEGATE_TLS_H
#define CITEGATE_TLS_H

#include "citegate/common.h"

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
} cg_tls_conf_t;

enum { CG_TLS_OK = 0, CG_TLS_AGAIN = 1, CG_TLS_CLOSED = 2, CG_TLS_ERROR = -1 };

typedef struct cg_tls {
    mbedtls_ssl_context ssl;
    cg_buf_t in;   /* ciphertext received, from in_off on not yet read */
    size_t in_off;
    cg_buf_t out;  /* ciphertext to send */
    bool done;     /* handshake finished */
} cg_tls_t;

/* Client configuration: verify against ca_file (NULL: the system bundle)
 * unless insecure. Returns 0 or -1 with a message in err. */
int cg_tls_conf_client(cg_tls_conf_t *c, const char *ca_file, bool insecure, char *err, size_t el);
/* Server configuration from PEM files. */
int cg_tls_conf_server(cg_tls_conf_t *c, const char *cert, const char *key, char *err, size_t el);
void cg_tls_conf_free(cg_tls_conf_t *c);

int cg_tls_init(cg_tls_t *t, cg_tls_conf_t *c, const char *sni);
void cg_tls_free(cg_tls_t *t);
void cg_tls_feed(cg_tls_t *t, const char *p, size_t n);
/* Runs the handshake as far as the input allows: CG_TLS_OK when done,
 * CG_TLS_AGAIN for more input, CG_TLS_ERROR (message in err). */
int cg_tls_handshake(cg_tls_t *t, char *err, size_t el);
/* Reads plaintext: > 0 bytes, 0 (CG_TLS_OK) when no more for now,
 * -CG_TLS_CLOSED on close_notify, CG_TLS_ERROR on failure. */
int cg_tls_read(cg_tls_t *t, char *buf, size_t len);
/* Encrypts all of p into out. Returns 0 or CG_TLS_ERROR. */
int cg_tls_write(cg_tls_t *t, const char *p, size_t n);

#endif
