/*
 * AWS Signature Version 4 (AWS4-HMAC-SHA256) for requests to Amazon
 * Bedrock (SPEC §6a, `bedrock`): the header fields that sign one request.
 *
 * Pure: no I/O and no clock (the caller passes the time), no logging at
 * all, so a key can never reach a log through this module. SHA-256 and
 * HMAC are mbedTLS's. The signing key and every intermediate HMAC value
 * (on the stack, and in mbedTLS's HMAC context) are wiped before a call
 * returns.
 *
 * The canonical URI is the path as it is sent on the wire, percent-encoded
 * once more, segment by segment (`/` separates, A-Z a-z 0-9 - _ . ~ stay):
 * a model id's `:` goes out as `%3A` and is signed as `%253A`, which is the
 * rule of every service but S3. The path is not normalized (no `.` or `..`
 * segment is removed, no `//` merged): citegate's paths have none.
 *
 * The layers (canonical URI, query, request, string to sign, signature)
 * are exposed so that AWS's published vectors can test each one; a caller
 * needs only cg_sigv4_sign().
 */
#ifndef CITEGATE_SIGV4_H
#define CITEGATE_SIGV4_H

#include "citegate/common.h"

#include <time.h>

/* Fields signed in one request, citegate's own included (host, x-amz-*):
 * they are sorted on the stack, with no allocation. */
#define CG_SIGV4_MAX_FIELDS 24
/* Parameters of a query string (Bedrock's requests have none). */
#define CG_SIGV4_MAX_PARAMS 64
/* The longest secret key taken (AWS's are 40 characters). */
#define CG_SIGV4_MAX_SECRET 124
#define CG_SIGV4_DATE_LEN   16 /* YYYYMMDDTHHMMSSZ */
#define CG_SIGV4_HEX_LEN    64 /* a SHA-256 or a signature, in lower-case hex */

enum {
    CG_SIGV4_OK = 0,
    CG_SIGV4_E_KEYS = -1,   /* a key, region or service missing, or with a byte that is no
                               visible ASCII; a secret over CG_SIGV4_MAX_SECRET */
    CG_SIGV4_E_FIELDS = -2, /* over CG_SIGV4_MAX_FIELDS, or a field the signer adds itself */
    CG_SIGV4_E_QUERY = -3,  /* over CG_SIGV4_MAX_PARAMS parameters */
    CG_SIGV4_E_TIME = -4,   /* a time whose year has not four digits */
    CG_SIGV4_E_CRYPTO = -5, /* mbedTLS failed (its HMAC context could not be allocated) */
};

/* The credentials and scope; C strings owned by the caller. */
typedef struct cg_sigv4_keys {
    const char *access_key;
    const char *secret_key;
    const char *session_token; /* NULL or "": none */
    const char *region;        /* us-east-1 */
    const char *service;       /* bedrock */
} cg_sigv4_keys_t;

/* A header field: any case in a name; a value's surrounding white space
 * and inner runs of it do not count (AWS's rule). */
typedef struct cg_sigv4_field {
    cg_span_t name, value;
} cg_sigv4_field_t;

/* A request as it goes on the wire; every span is the caller's. */
typedef struct cg_sigv4_req {
    cg_span_t method; /* POST */
    cg_span_t path;   /* percent-encoded as sent: /model/us.amazon.nova-pro-v1%3A0/converse */
    cg_span_t query;  /* after the `?`, as sent; empty when none */
    cg_span_t host;   /* the authority: bedrock-runtime.us-east-1.amazonaws.com */
    const cg_sigv4_field_t *fields; /* more fields to sign (content-type...) */
    size_t nfields;
    cg_span_t body;
} cg_sigv4_req_t;

/* The fields cg_sigv4_sign() makes, to add to the request as they are. */
typedef struct cg_sigv4 {
    cg_buf_t buf;          /* the values, and scratch while signing: kept between calls,
                              wiped by cg_sigv4_free() (it held the session token) */
    cg_sigv4_field_t f[4]; /* x-amz-date, x-amz-content-sha256, x-amz-security-token
                              (with a session token), authorization */
    size_t n;
} cg_sigv4_t;

/* A cg_sigv4_t is zero-initialised; cg_sigv4_free() gives its buffer back. */
void cg_sigv4_free(cg_sigv4_t *s);

/*
 * Signs request r with keys k at time `now`. Fills s->f[0..s->n): names are
 * lower-case literals, values point into s->buf, valid until the next call
 * with s. Signed: host, x-amz-content-sha256 (the body's SHA-256),
 * x-amz-date, x-amz-security-token when there is a session token, and
 * r->fields (which must not hold any of those, nor authorization). Returns
 * CG_SIGV4_OK, or a CG_SIGV4_E_* code with s->n == 0. Allocates only when
 * s->buf must grow, and mbedTLS its HMAC context, freed before returning.
 */
int cg_sigv4_sign(cg_sigv4_t *s, const cg_sigv4_keys_t *k, const cg_sigv4_req_t *r, time_t now);

/* --- the layers, in the order of AWS's algorithm ------------------------------ */

/* `now` as YYYYMMDDTHHMMSSZ (UTC, no NUL); CG_SIGV4_E_TIME outside years 0-9999. */
int cg_sigv4_date(time_t now, char date[CG_SIGV4_DATE_LEN]);

/* The lower-case hex SHA-256 of p[0..n) (x-amz-content-sha256). */
int cg_sigv4_sha256_hex(const void *p, size_t n, char hex[CG_SIGV4_HEX_LEN]);

/* Appends the canonical URI of a wire path: each byte but `/` and the
 * unreserved ones as %XX (so `%` becomes `%25`); an empty path is `/`. */
void cg_sigv4_canonical_uri(cg_buf_t *out, cg_span_t path);

/* Appends the canonical query string of a wire query: each name and value
 * percent-decoded, then encoded (unreserved bytes stay, `+` is a plus),
 * `name=value` pairs sorted by name, then value, and joined by `&`. Uses
 * out past its end as scratch. CG_SIGV4_E_QUERY: out is as it was. */
int cg_sigv4_canonical_query(cg_buf_t *out, cg_span_t query);

/*
 * Appends the canonical request: method, URI, query, then the fields (every
 * signed one, host included) by lower-case name, a name given more than
 * once joined with `,` in the order given, then the signed names and
 * payload_hash, on lines of their own. CG_SIGV4_E_FIELDS over
 * CG_SIGV4_MAX_FIELDS fields, CG_SIGV4_E_QUERY: out is as it was.
 */
int cg_sigv4_canonical_request(cg_buf_t *out, cg_span_t method, cg_span_t path, cg_span_t query,
                               const cg_sigv4_field_t *fields, size_t n, cg_span_t payload_hash);

/* Appends the string to sign for canonical request creq (which may lie in
 * out: it is hashed before out grows). */
int cg_sigv4_string_to_sign(cg_buf_t *out, const cg_sigv4_keys_t *k,
                            const char date[CG_SIGV4_DATE_LEN], cg_span_t creq);

/* The signature of string to sign sts, in lower-case hex, with the key
 * derived from k's secret for date's day, region and service. */
int cg_sigv4_signature(const cg_sigv4_keys_t *k, const char date[CG_SIGV4_DATE_LEN], cg_span_t sts,
                       char sig[CG_SIGV4_HEX_LEN]);

#endif
