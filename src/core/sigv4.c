/* AWS Signature Version 4: see include/citegate/sigv4.h for the contract. */
#include "citegate/sigv4.h"

#include <mbedtls/md.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/sha256.h>
#include <string.h>

#define ALGORITHM  "AWS4-HMAC-SHA256"
#define SHA256_LEN 32

static const char hex_lower[] = "0123456789abcdef";
static const char hex_upper[] = "0123456789ABCDEF"; /* AWS's percent-encoding is upper case */

static void to_hex(const unsigned char *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex_lower[p[i] >> 4];
        out[2 * i + 1] = hex_lower[p[i] & 15];
    }
}

static int span_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int d = memcmp(a, b, an < bn ? an : bn);
    return d ? d : (an > bn) - (an < bn);
}

/* --- keys -------------------------------------------------------------------- */

static bool has_token(const cg_sigv4_keys_t *k)
{
    return k->session_token != NULL && k->session_token[0] != '\0';
}

/* Everything from the keys ends up in a header as it is (the secret aside):
 * visible ASCII only, so a stray CR or LF cannot start a field of its own. */
static bool visible(const char *s)
{
    if (s == NULL || *s == '\0')
        return false;
    for (; *s; s++)
        if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7e)
            return false;
    return true;
}

static int check_keys(const cg_sigv4_keys_t *k)
{
    bool ok = visible(k->access_key) && visible(k->secret_key) && visible(k->region) &&
              visible(k->service) && strlen(k->secret_key) <= CG_SIGV4_MAX_SECRET &&
              (!has_token(k) || visible(k->session_token));
    return ok ? CG_SIGV4_OK : CG_SIGV4_E_KEYS;
}

/* DATE/REGION/SERVICE/aws4_request, DATE being the day of date. */
static void put_scope(cg_buf_t *out, const cg_sigv4_keys_t *k, const char *date)
{
    cg_buf_put(out, date, 8);
    cg_buf_putc(out, '/');
    cg_buf_puts(out, k->region);
    cg_buf_putc(out, '/');
    cg_buf_puts(out, k->service);
    cg_buf_put(out, CG_STRLIT("/aws4_request"));
}

/* --- time and hashes ----------------------------------------------------------- */

static void put_digits(char *p, int v, int width)
{
    for (int i = width - 1; i >= 0; i--, v /= 10)
        p[i] = (char)('0' + v % 10);
}

int cg_sigv4_date(time_t now, char date[CG_SIGV4_DATE_LEN])
{
    struct tm tm;
    if (gmtime_r(&now, &tm) == NULL || tm.tm_year < -1900 || tm.tm_year > 9999 - 1900)
        return CG_SIGV4_E_TIME;
    put_digits(date, tm.tm_year + 1900, 4);
    put_digits(date + 4, tm.tm_mon + 1, 2);
    put_digits(date + 6, tm.tm_mday, 2);
    date[8] = 'T';
    put_digits(date + 9, tm.tm_hour, 2);
    put_digits(date + 11, tm.tm_min, 2);
    put_digits(date + 13, tm.tm_sec, 2);
    date[15] = 'Z';
    return CG_SIGV4_OK;
}

int cg_sigv4_sha256_hex(const void *p, size_t n, char hex[CG_SIGV4_HEX_LEN])
{
    unsigned char sum[SHA256_LEN];
    if (mbedtls_sha256_ret(p, n, sum, 0) != 0)
        return CG_SIGV4_E_CRYPTO;
    to_hex(sum, sizeof(sum), hex);
    return CG_SIGV4_OK;
}

/* --- canonical URI and query ------------------------------------------------------ */

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~';
}

static void put_encoded(cg_buf_t *out, unsigned char c)
{
    if (unreserved(c)) {
        cg_buf_putc(out, (char)c);
        return;
    }
    char e[3] = {'%', hex_upper[c >> 4], hex_upper[c & 15]};
    cg_buf_put(out, e, sizeof(e));
}

/* Encoding the wire path once more, `%` included, is what makes `%3A`
 * signed as `%253A`: the server encodes the path it receives the same way. */
void cg_sigv4_canonical_uri(cg_buf_t *out, cg_span_t path)
{
    if (path.n == 0) {
        cg_buf_putc(out, '/');
        return;
    }
    for (size_t i = 0; i < path.n; i++) {
        if (path.p[i] == '/')
            cg_buf_putc(out, '/');
        else
            put_encoded(out, (unsigned char)path.p[i]);
    }
}

/* Appends s[0..n) decoded, then encoded: a query is compared as the values it
 * carries, so `%7E` and `~` sign alike. A `%` not followed by two hex digits
 * is a byte of its own. */
static void put_reencoded(cg_buf_t *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = i + 2 < n && s[i] == '%' ? cg_hex_digit(s[i + 1]) : -1;
        int lo = hi >= 0 ? cg_hex_digit(s[i + 2]) : -1;
        if (lo >= 0) {
            put_encoded(out, (unsigned char)(hi << 4 | lo));
            i += 2;
        } else {
            put_encoded(out, (unsigned char)s[i]);
        }
    }
}

/* A canonical `name=value` written at off in the output buffer. */
typedef struct param {
    size_t off, name_len, len;
} param_t;

/* By name, then by value: not by the whole pair, since `=` sorts after `-`
 * (`Param=` comes before `Param-3=`). */
static int param_cmp(const char *b, const param_t *x, const param_t *y)
{
    int d = span_cmp(b + x->off, x->name_len, b + y->off, y->name_len);
    if (d)
        return d;
    size_t xv = x->name_len + 1, yv = y->name_len + 1;
    return span_cmp(b + x->off + xv, x->len - xv, b + y->off + yv, y->len - yv);
}

static void sort_params(const char *b, param_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        param_t x = v[i];
        size_t j = i;
        for (; j > 0 && param_cmp(b, &v[j - 1], &x) > 0; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Writes each parameter of q, canonical, at the end of out; the number of
 * them, or -1 past CG_SIGV4_MAX_PARAMS. */
static int split_params(cg_buf_t *out, cg_span_t q, param_t *v)
{
    size_t n = 0;
    for (size_t i = 0; i < q.n;) {
        const char *amp = memchr(q.p + i, '&', q.n - i);
        size_t end = amp ? (size_t)(amp - q.p) : q.n;
        if (end > i) {
            if (n == CG_SIGV4_MAX_PARAMS)
                return -1;
            const char *eq = memchr(q.p + i, '=', end - i);
            size_t name_end = eq ? (size_t)(eq - q.p) : end;
            v[n].off = out->len;
            put_reencoded(out, q.p + i, name_end - i);
            v[n].name_len = out->len - v[n].off;
            cg_buf_putc(out, '=');
            if (eq)
                put_reencoded(out, eq + 1, end - name_end - 1);
            v[n].len = out->len - v[n].off;
            n++;
        }
        i = end + 1;
    }
    return (int)n;
}

int cg_sigv4_canonical_query(cg_buf_t *out, cg_span_t query)
{
    param_t v[CG_SIGV4_MAX_PARAMS];
    size_t base = out->len;
    int n = split_params(out, query, v);
    if (n < 0) {
        out->len = base;
        return CG_SIGV4_E_QUERY;
    }
    sort_params(out->p, v, (size_t)n);
    size_t joined = out->len, total = n > 0 ? (size_t)n - 1 : 0;
    for (int i = 0; i < n; i++)
        total += v[i].len;
    /* Room first: the copies below read from the same buffer. */
    cg_buf_reserve(out, total);
    for (int i = 0; i < n; i++) {
        if (i > 0)
            out->p[out->len++] = '&';
        memcpy(out->p + out->len, out->p + v[i].off, v[i].len);
        out->len += v[i].len;
    }
    if (total > 0)
        memmove(out->p + base, out->p + joined, total);
    out->len = base + total;
    return CG_SIGV4_OK;
}

/* --- canonical headers ------------------------------------------------------------ */

/* Fields in canonical order: idx[i] is the i-th by lower-case name, equal
 * names in the order given (their values are joined in that order). */
typedef struct sorted {
    const cg_sigv4_field_t *f;
    size_t n;
    uint8_t idx[CG_SIGV4_MAX_FIELDS];
} sorted_t;

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c + ('a' - 'A')) : c;
}

static int name_cmp(cg_span_t a, cg_span_t b)
{
    for (size_t i = 0; i < a.n && i < b.n; i++) {
        int d = (unsigned char)lower(a.p[i]) - (unsigned char)lower(b.p[i]);
        if (d)
            return d;
    }
    return (a.n > b.n) - (a.n < b.n);
}

static cg_span_t name_at(const sorted_t *h, size_t i)
{
    return h->f[h->idx[i]].name;
}

static int sorted_init(sorted_t *h, const cg_sigv4_field_t *f, size_t n)
{
    if (n > CG_SIGV4_MAX_FIELDS)
        return CG_SIGV4_E_FIELDS;
    h->f = f;
    h->n = n;
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        for (; j > 0 && name_cmp(f[h->idx[j - 1]].name, f[i].name) > 0; j--)
            h->idx[j] = h->idx[j - 1];
        h->idx[j] = (uint8_t)i;
    }
    return CG_SIGV4_OK;
}

static void put_lower(cg_buf_t *out, cg_span_t s)
{
    for (size_t i = 0; i < s.n; i++)
        cg_buf_putc(out, lower(s.p[i]));
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* AWS's trim: no white space around the value, each run inside one space
 * (a folded value's line breaks included). */
static void put_trimmed(cg_buf_t *out, cg_span_t v)
{
    bool gap = false, any = false;
    for (size_t i = 0; i < v.n; i++) {
        if (is_space(v.p[i])) {
            gap = any;
            continue;
        }
        if (gap)
            cg_buf_putc(out, ' ');
        cg_buf_putc(out, v.p[i]);
        gap = false;
        any = true;
    }
}

static bool same_name_as_previous(const sorted_t *h, size_t i)
{
    return i > 0 && name_cmp(name_at(h, i - 1), name_at(h, i)) == 0;
}

/* One `name:value[,value...]` line per distinct name. */
static void put_headers(cg_buf_t *out, const sorted_t *h)
{
    for (size_t i = 0; i < h->n; i++) {
        if (same_name_as_previous(h, i)) {
            cg_buf_putc(out, ',');
        } else {
            if (i > 0)
                cg_buf_putc(out, '\n');
            put_lower(out, name_at(h, i));
            cg_buf_putc(out, ':');
        }
        put_trimmed(out, h->f[h->idx[i]].value);
    }
    if (h->n > 0)
        cg_buf_putc(out, '\n');
}

/* The distinct names, joined by `;`: the SignedHeaders list. */
static void put_signed(cg_buf_t *out, const sorted_t *h)
{
    for (size_t i = 0; i < h->n; i++) {
        if (same_name_as_previous(h, i))
            continue;
        if (i > 0)
            cg_buf_putc(out, ';');
        put_lower(out, name_at(h, i));
    }
}

static int creq_put(cg_buf_t *out, cg_span_t method, cg_span_t path, cg_span_t query,
                    const sorted_t *h, cg_span_t payload_hash)
{
    size_t base = out->len;
    cg_buf_put(out, method.p, method.n);
    cg_buf_putc(out, '\n');
    cg_sigv4_canonical_uri(out, path);
    cg_buf_putc(out, '\n');
    if (cg_sigv4_canonical_query(out, query) != CG_SIGV4_OK) {
        out->len = base;
        return CG_SIGV4_E_QUERY;
    }
    cg_buf_putc(out, '\n');
    put_headers(out, h);
    cg_buf_putc(out, '\n');
    put_signed(out, h);
    cg_buf_putc(out, '\n');
    cg_buf_put(out, payload_hash.p, payload_hash.n);
    return CG_SIGV4_OK;
}

int cg_sigv4_canonical_request(cg_buf_t *out, cg_span_t method, cg_span_t path, cg_span_t query,
                               const cg_sigv4_field_t *fields, size_t n, cg_span_t payload_hash)
{
    sorted_t h;
    int rc = sorted_init(&h, fields, n);
    return rc != CG_SIGV4_OK ? rc : creq_put(out, method, path, query, &h, payload_hash);
}

/* --- string to sign and signature ----------------------------------------------------- */

int cg_sigv4_string_to_sign(cg_buf_t *out, const cg_sigv4_keys_t *k,
                            const char date[CG_SIGV4_DATE_LEN], cg_span_t creq)
{
    char hash[CG_SIGV4_HEX_LEN];
    int rc = check_keys(k);
    if (rc == CG_SIGV4_OK)
        rc = cg_sigv4_sha256_hex(creq.p, creq.n, hash); /* before out grows under creq */
    if (rc != CG_SIGV4_OK)
        return rc;
    cg_buf_put(out, CG_STRLIT(ALGORITHM "\n"));
    cg_buf_put(out, date, CG_SIGV4_DATE_LEN);
    cg_buf_putc(out, '\n');
    put_scope(out, k, date);
    cg_buf_putc(out, '\n');
    cg_buf_put(out, hash, sizeof(hash));
    return CG_SIGV4_OK;
}

/* mac = HMAC-SHA256(key, msg). mac may be key: the key is only read by
 * hmac_starts, before anything is written. */
static int hmac(mbedtls_md_context_t *md, const unsigned char *key, size_t key_len, const void *msg,
                size_t msg_len, unsigned char mac[SHA256_LEN])
{
    if (mbedtls_md_hmac_starts(md, key, key_len) != 0 ||
        mbedtls_md_hmac_update(md, msg, msg_len) != 0 || mbedtls_md_hmac_finish(md, mac) != 0)
        return CG_SIGV4_E_CRYPTO;
    return CG_SIGV4_OK;
}

/* The signing key: HMAC("AWS4" secret, day), then region, service and
 * "aws4_request" in turn, each step keyed by the one before, in place. */
static int derive(mbedtls_md_context_t *md, const cg_sigv4_keys_t *k, const char *date,
                  unsigned char key[SHA256_LEN])
{
    unsigned char seed[4 + CG_SIGV4_MAX_SECRET];
    size_t n = strlen(k->secret_key);
    memcpy(seed, "AWS4", 4);
    memcpy(seed + 4, k->secret_key, n);
    int rc = hmac(md, seed, 4 + n, date, 8, key);
    mbedtls_platform_zeroize(seed, sizeof(seed));
    if (rc == CG_SIGV4_OK)
        rc = hmac(md, key, SHA256_LEN, k->region, strlen(k->region), key);
    if (rc == CG_SIGV4_OK)
        rc = hmac(md, key, SHA256_LEN, k->service, strlen(k->service), key);
    if (rc == CG_SIGV4_OK)
        rc = hmac(md, key, SHA256_LEN, CG_STRLIT("aws4_request"), key);
    return rc;
}

int cg_sigv4_signature(const cg_sigv4_keys_t *k, const char date[CG_SIGV4_DATE_LEN], cg_span_t sts,
                       char sig[CG_SIGV4_HEX_LEN])
{
    int rc = check_keys(k);
    if (rc != CG_SIGV4_OK)
        return rc;
    unsigned char key[SHA256_LEN], mac[SHA256_LEN];
    /* A context per call (mbedTLS allocates its HMAC pads), freed before
     * returning: one kept between requests would hold the last key's pads. */
    mbedtls_md_context_t md;
    mbedtls_md_init(&md);
    if (mbedtls_md_setup(&md, mbedtls_md_info_from_type(MBEDTLS_MD_SHA256), 1) != 0)
        rc = CG_SIGV4_E_CRYPTO;
    if (rc == CG_SIGV4_OK)
        rc = derive(&md, k, date, key);
    if (rc == CG_SIGV4_OK)
        rc = hmac(&md, key, sizeof(key), sts.p, sts.n, mac);
    if (rc == CG_SIGV4_OK)
        to_hex(mac, sizeof(mac), sig);
    mbedtls_md_free(&md); /* wipes its HMAC pads, which are the key's */
    mbedtls_platform_zeroize(key, sizeof(key));
    mbedtls_platform_zeroize(mac, sizeof(mac));
    return rc;
}

/* --- signing a request ------------------------------------------------------------ */

/* What one signing works on; the fields point into it and into the request. */
typedef struct signing {
    char date[CG_SIGV4_DATE_LEN];
    char body[CG_SIGV4_HEX_LEN];
    char sig[CG_SIGV4_HEX_LEN];
    cg_sigv4_field_t all[CG_SIGV4_MAX_FIELDS];
    sorted_t h;
} signing_t;

/* A field the signer adds itself: a caller's copy would be signed twice. */
static bool own_field(cg_span_t name)
{
    static const cg_span_t own[] = {
        CG_SPAN_LIT("host"), CG_SPAN_LIT("x-amz-date"), CG_SPAN_LIT("x-amz-content-sha256"),
        CG_SPAN_LIT("x-amz-security-token"), CG_SPAN_LIT("authorization")};
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (name_cmp(name, own[i]) == 0)
            return true;
    return false;
}

static int gather(signing_t *c, const cg_sigv4_keys_t *k, const cg_sigv4_req_t *r)
{
    size_t n = r->nfields, own = has_token(k) ? 4 : 3;
    if (n > CG_SIGV4_MAX_FIELDS - own)
        return CG_SIGV4_E_FIELDS;
    for (size_t i = 0; i < n; i++) {
        if (own_field(r->fields[i].name))
            return CG_SIGV4_E_FIELDS;
        c->all[i] = r->fields[i];
    }
    c->all[n++] = (cg_sigv4_field_t){CG_SPAN_LIT("host"), r->host};
    c->all[n++] =
        (cg_sigv4_field_t){CG_SPAN_LIT("x-amz-content-sha256"), cg_span(c->body, sizeof(c->body))};
    c->all[n++] = (cg_sigv4_field_t){CG_SPAN_LIT("x-amz-date"), cg_span(c->date, sizeof(c->date))};
    if (has_token(k))
        c->all[n++] = (cg_sigv4_field_t){CG_SPAN_LIT("x-amz-security-token"),
                                         cg_span(k->session_token, strlen(k->session_token))};
    return sorted_init(&c->h, c->all, n);
}

/* The canonical request and the string to sign go in s->buf as scratch. */
static int sign_scratch(cg_sigv4_t *s, signing_t *c, const cg_sigv4_keys_t *k,
                        const cg_sigv4_req_t *r)
{
    cg_span_t body = cg_span(c->body, sizeof(c->body));
    int rc = creq_put(&s->buf, r->method, r->path, r->query, &c->h, body);
    if (rc != CG_SIGV4_OK)
        return rc;
    size_t creq_len = s->buf.len;
    rc = cg_sigv4_string_to_sign(&s->buf, k, c->date, cg_span(s->buf.p, creq_len));
    if (rc != CG_SIGV4_OK)
        return rc;
    cg_span_t sts = cg_span(s->buf.p + creq_len, s->buf.len - creq_len);
    return cg_sigv4_signature(k, c->date, sts, c->sig);
}

static void put_authorization(cg_buf_t *out, const cg_sigv4_keys_t *k, const signing_t *c)
{
    cg_buf_put(out, CG_STRLIT(ALGORITHM " Credential="));
    cg_buf_puts(out, k->access_key);
    cg_buf_putc(out, '/');
    put_scope(out, k, c->date);
    cg_buf_put(out, CG_STRLIT(", SignedHeaders="));
    put_signed(out, &c->h);
    cg_buf_put(out, CG_STRLIT(", Signature="));
    cg_buf_put(out, c->sig, sizeof(c->sig));
}

/* The values go into s->buf one after the other; their spans are set once
 * the buffer has stopped moving. */
static void put_fields(cg_sigv4_t *s, const signing_t *c, const cg_sigv4_keys_t *k)
{
    size_t at[5], n = 0;
    cg_buf_t *b = &s->buf;
    b->len = 0;
    s->f[n].name = CG_SPAN_LIT("x-amz-date");
    at[n++] = b->len;
    cg_buf_put(b, c->date, sizeof(c->date));
    s->f[n].name = CG_SPAN_LIT("x-amz-content-sha256");
    at[n++] = b->len;
    cg_buf_put(b, c->body, sizeof(c->body));
    if (has_token(k)) {
        s->f[n].name = CG_SPAN_LIT("x-amz-security-token");
        at[n++] = b->len;
        cg_buf_puts(b, k->session_token);
    }
    s->f[n].name = CG_SPAN_LIT("authorization");
    at[n++] = b->len;
    put_authorization(b, k, c);
    at[n] = b->len;
    for (size_t i = 0; i < n; i++)
        s->f[i].value = cg_span(b->p + at[i], at[i + 1] - at[i]);
    s->n = n;
}

int cg_sigv4_sign(cg_sigv4_t *s, const cg_sigv4_keys_t *k, const cg_sigv4_req_t *r, time_t now)
{
    signing_t c;
    s->n = 0;
    s->buf.len = 0;
    int rc = check_keys(k);
    if (rc == CG_SIGV4_OK)
        rc = cg_sigv4_date(now, c.date);
    if (rc == CG_SIGV4_OK)
        rc = cg_sigv4_sha256_hex(r->body.p, r->body.n, c.body);
    if (rc == CG_SIGV4_OK)
        rc = gather(&c, k, r);
    if (rc == CG_SIGV4_OK)
        rc = sign_scratch(s, &c, k, r);
    if (rc == CG_SIGV4_OK)
        put_fields(s, &c, k);
    else
        s->buf.len = 0;
    return rc;
}

void cg_sigv4_free(cg_sigv4_t *s)
{
    /* It held a session token, and the canonical request that carried it. */
    if (s->buf.p != NULL)
        mbedtls_platform_zeroize(s->buf.p, s->buf.cap);
    cg_buf_free(&s->buf);
    s->n = 0;
}
