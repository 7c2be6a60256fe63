/* TLS memory pipe over mbedTLS: see tls.h. */
#include "tls.h"

#include "fault.h"

#include <mbedtls/error.h>
#include <stdio.h>
#include <string.h>

#define SYSTEM_CA "/etc/ssl/certs/ca-certificates.crt"

static void describe(int rc, const char *what, char *err, size_t el)
{
    char buf[160];
    mbedtls_strerror(rc, buf, sizeof(buf));
    snprintf(err, el, "%s: %s", what, buf);
}

static int conf_common(cg_tls_conf_t *c, int endpoint, char *err, size_t el)
{
    mbedtls_ssl_config_init(&c->conf);
    mbedtls_x509_crt_init(&c->ca);
    mbedtls_x509_crt_init(&c->cert);
    mbedtls_pk_init(&c->key);
    mbedtls_entropy_init(&c->entropy);
    mbedtls_ctr_drbg_init(&c->drbg);
    mbedtls_ssl_session_init(&c->session);
    c->have_session = c->client = false;
    int rc = mbedtls_ctr_drbg_seed(&c->drbg, mbedtls_entropy_func, &c->entropy,
                                   (const unsigned char *)CG_STRLIT("citegate"));
    if (rc == 0)
        rc = mbedtls_ssl_config_defaults(&c->conf, endpoint, MBEDTLS_SSL_TRANSPORT_STREAM,
                                         MBEDTLS_SSL_PRESET_DEFAULT);
    if (rc != 0) {
        describe(rc, "TLS setup", err, el);
        return -1;
    }
    mbedtls_ssl_conf_rng(&c->conf, mbedtls_ctr_drbg_random, &c->drbg);
    mbedtls_ssl_conf_min_version(&c->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
    c->alpn[0] = "http/1.1";
    c->alpn[1] = NULL;
    mbedtls_ssl_conf_alpn_protocols(&c->conf, c->alpn);
    return 0;
}

int cg_tls_conf_client(cg_tls_conf_t *c, const char *ca_file, bool insecure, char *err, size_t el)
{
    if (conf_common(c, MBEDTLS_SSL_IS_CLIENT, err, el) != 0)
        return -1;
    c->client = true;
    if (insecure) {
        mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_NONE);
        return 0;
    }
    const char *file = ca_file ? ca_file : SYSTEM_CA;
    int rc = mbedtls_x509_crt_parse_file(&c->ca, file);
    if (rc < 0) {
        char what[300];
        snprintf(what, sizeof(what), "%s: cannot load CA file %s",
                 ca_file ? "CITEGATE_UPSTREAM_CA" : "system CA bundle", file);
        describe(rc, what, err, el);
        return -1;
    }
    mbedtls_ssl_conf_ca_chain(&c->conf, &c->ca, NULL);
    mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
    return 0;
}

int cg_tls_conf_server(cg_tls_conf_t *c, const char *cert, const char *key, char *err, size_t el)
{
    if (conf_common(c, MBEDTLS_SSL_IS_SERVER, err, el) != 0)
        return -1;
    c->alpn[0] = "h2";
    c->alpn[1] = "http/1.1";
    c->alpn[2] = NULL;
    mbedtls_ssl_conf_alpn_protocols(&c->conf, c->alpn);
    int rc = mbedtls_x509_crt_parse_file(&c->cert, cert);
    if (rc != 0) {
        describe(rc, "CITEGATE_TLS_CERT", err, el);
        return -1;
    }
    rc = mbedtls_pk_parse_keyfile(&c->key, key, NULL);
    if (rc == 0)
        rc = mbedtls_ssl_conf_own_cert(&c->conf, &c->cert, &c->key);
    if (rc != 0) {
        describe(rc, "CITEGATE_TLS_KEY", err, el);
        return -1;
    }
    return 0;
}

void cg_tls_conf_free(cg_tls_conf_t *c)
{
    mbedtls_ssl_config_free(&c->conf);
    mbedtls_x509_crt_free(&c->ca);
    mbedtls_x509_crt_free(&c->cert);
    mbedtls_pk_free(&c->key);
    mbedtls_ctr_drbg_free(&c->drbg);
    mbedtls_entropy_free(&c->entropy);
    mbedtls_ssl_session_free(&c->session);
}

/* Keeps the session of a finished client handshake for the next connection
 * (RFC 5077 ticket or session id, whichever the upstream gave). */
static void keep_session(cg_tls_t *t)
{
    cg_tls_conf_t *c = t->conf;
    mbedtls_ssl_session_free(&c->session);
    mbedtls_ssl_session_init(&c->session);
    c->have_session = mbedtls_ssl_get_session(&t->ssl, &c->session) == 0;
}

static int bio_send(void *ctx, const unsigned char *p, size_t n)
{
    cg_tls_t *t = ctx;
    cg_buf_put(&t->out, p, n);
    return (int)n;
}

static int bio_recv(void *ctx, unsigned char *p, size_t n)
{
    cg_tls_t *t = ctx;
    size_t have = t->in.len - t->in_off;
    if (have == 0)
        return MBEDTLS_ERR_SSL_WANT_READ;
    if (n > have)
        n = have;
    memcpy(p, t->in.p + t->in_off, n);
    t->in_off += n;
    if (t->in_off == t->in.len)
        t->in.len = t->in_off = 0;
    return (int)n;
}

cg_err_t cg_tls_init(cg_tls_t *t, cg_tls_conf_t *c, const char *sni)
{
    memset(t, 0, sizeof(*t));
    t->conf = c;
    mbedtls_ssl_init(&t->ssl);
    if (mbedtls_ssl_setup(&t->ssl, &c->conf) != 0)
        return CG_E_TLS;
    /* A thousand streams opening together must not cost a thousand full
     * handshakes; an upstream that forgot the session does a full one. */
    if (c->have_session)
        (void)mbedtls_ssl_set_session(&t->ssl, &c->session);
    if (sni && mbedtls_ssl_set_hostname(&t->ssl, sni) != 0)
        return CG_E_TLS;
    mbedtls_ssl_set_bio(&t->ssl, t, bio_send, bio_recv, NULL);
    return CG_OK;
}

void cg_tls_free(cg_tls_t *t)
{
    mbedtls_ssl_free(&t->ssl);
    cg_buf_free(&t->in);
    cg_buf_free(&t->out);
}

void cg_tls_feed(cg_tls_t *t, const char *p, size_t n)
{
    cg_buf_put(&t->in, p, n);
}

cg_err_t cg_tls_handshake(cg_tls_t *t, char *err, size_t el)
{
    if (t->done)
        return CG_OK;
    int rc = mbedtls_ssl_handshake(&t->ssl);
    if (rc == 0) {
        t->done = true;
        if (t->conf->client)
            keep_session(t);
        return CG_OK;
    }
    if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE)
        return CG_E_AGAIN;
    uint32_t flags = mbedtls_ssl_get_verify_result(&t->ssl);
    if (flags != 0 && flags != (uint32_t)-1) {
        char buf[256];
        mbedtls_x509_crt_verify_info(buf, sizeof(buf), "", flags);
        buf[strcspn(buf, "\n")] = '\0';
        snprintf(err, el, "certificate verification failed: %s", buf);
    } else {
        describe(rc, "TLS handshake", err, el);
    }
    return CG_E_TLS;
}

cg_err_t cg_tls_read(cg_tls_t *t, char *buf, size_t len, size_t *got)
{
    *got = 0;
    int rc = mbedtls_ssl_read(&t->ssl, (unsigned char *)buf, len);
    if (rc > 0) {
        *got = (size_t)rc;
        return CG_OK;
    }
    if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE)
        return CG_OK;
    if (rc == 0 || rc == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY)
        return CG_E_CLOSED;
    return CG_E_TLS;
}

cg_err_t cg_tls_write(cg_tls_t *t, const char *p, size_t n)
{
    if (cg_fault_tls())
        return CG_E_TLS;
    while (n > 0) {
        int rc = mbedtls_ssl_write(&t->ssl, (const unsigned char *)p, n);
        if (rc < 0)
            return CG_E_TLS;
        p += rc;
        n -= (size_t)rc;
    }
    return CG_OK;
}
