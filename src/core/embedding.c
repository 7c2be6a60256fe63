/*
 * The embeddings call of semantic recall (SPEC §8): the request body sent to
 * an OpenAI-compatible /v1/embeddings endpoint and the reading of its answer.
 * The vector helpers of embedding.h live in vector.c.
 */
#include "citegate/embedding.h"

#include "citegate/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Tokens a parse may use: the vector takes one per element plus its array,
 * and an answer's other members (object, index, model, usage, …) about
 * twenty more. The slack lets a vector somewhat over the bound parse, so the
 * reason given is its dimension; one far over it is refused as too many
 * values before any of it is read. 9216 tokens are 144 KiB at most.
 */
#define MAX_TOKENS (CG_EMBED_MAX_DIM + 1024u)

/* Longest number read: JSON floats of real answers have about 20 characters. */
#define MAX_NUMBER 64

/* Printable bytes of the body quoted when it is not JSON (an HTML error page, …). */
#define HINT_BYTES 12

/* ---- the request -------------------------------------------------------- */

/* "s[0..n)" escaped, each byte that starts no valid UTF-8 sequence replaced
 * by U+FFFD: endpoints refuse a body that is not UTF-8, and the text is a
 * user's question, which citegate never checked. */
static void put_text(cg_buf_t *out, const char *s, size_t n)
{
    cg_buf_t clean = {0};
    cg_utf8_repair(&clean, s, n);
    cg_buf_putc(out, '"');
    cg_json_put_escaped(out, clean.p ? clean.p : "", clean.len);
    cg_buf_putc(out, '"');
    cg_buf_free(&clean);
}

void cg_embedding_request(cg_buf_t *out, const char *model, const char *text, size_t n)
{
    cg_buf_puts(out, "{\"model\":");
    put_text(out, model ? model : "", model ? strlen(model) : 0);
    cg_buf_puts(out, ",\"input\":");
    put_text(out, text ? text : "", text ? n : 0);
    cg_buf_putc(out, '}');
}

/* ---- the answer --------------------------------------------------------- */

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The first bytes of a body that is not JSON, printable ASCII only, so the
 * reason stays one line and tells an HTML page from a truncated answer. */
static void body_hint(const char *body, size_t n, char *hint)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k < HINT_BYTES; i++) {
        unsigned char c = (unsigned char)body[i];
        if (k == 0 && (c == ' ' || c == '\t' || c == '\r' || c == '\n'))
            continue;
        hint[k++] = (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') ? (char)c : '?';
    }
    hint[k] = '\0';
}

/* Why token i is no number a float can hold, or NULL with *out set. The
 * parse already checked every primitive's grammar, so a primitive that does
 * not start like a number is true, false or null. */
static const char *element_value(const cg_json_t *j, int i, float *out)
{
    if (cg_json_type(j, i) != JSMN_PRIMITIVE)
        return "is not a number";
    cg_span_t s = cg_json_raw(j, i);
    if (s.p[0] != '-' && (s.p[0] < '0' || s.p[0] > '9'))
        return "is not a number";
    if (s.n >= MAX_NUMBER)
        return "is a number too long to read";
    char tmp[MAX_NUMBER];
    memcpy(tmp, s.p, s.n);
    tmp[s.n] = '\0';
    /* The JSON grammar checked above is what strtof reads in the C locale,
     * the daemon's (it never calls setlocale). strtof, not strtod and a
     * cast: one rounding, so a value just above FLT_MAX that rounds to it
     * (as FLT_MAX printed with %.9g does) is accepted, and a larger one
     * comes back infinite instead of overflowing the cast. */
    float v = strtof(tmp, NULL);
    if (!isfinite(v))
        return "is out of a float's range";
    *out = v;
    return NULL;
}

/* The array at token arr: its dimension and finite numbers into out. */
static int read_vector(const cg_json_t *j, int arr, cg_vector_t *out, char *err, size_t errlen)
{
    int dim = j->tok[arr].size;
    if (dim == 0)
        return fail(err, errlen, "data[0].embedding is empty");
    if ((unsigned)dim > CG_EMBED_MAX_DIM)
        return fail(err, errlen, "dimension %d over %u", dim, (unsigned)CG_EMBED_MAX_DIM);
    float *v = cg_xmalloc((size_t)dim * sizeof(float));
    /* Elements of a vector of numbers are consecutive tokens; anything
     * nested is caught as "not a number" before the walk could stray. */
    for (int k = 0; k < dim; k++) {
        const char *why = element_value(j, arr + 1 + k, &v[k]);
        if (why) {
            free(v);
            return fail(err, errlen, "data[0].embedding[%d] %s", k, why);
        }
    }
    out->v = v;
    out->dim = (uint32_t)dim;
    return 0;
}

/* The token of data[0].embedding in the parsed answer, or -1 with err set. */
static int find_embedding(const cg_json_t *j, char *err, size_t errlen)
{
    if (cg_json_type(j, 0) != JSMN_OBJECT)
        return fail(err, errlen, "not a JSON object");
    int data = cg_json_get(j, 0, "data");
    if (data < 0 && cg_json_get(j, 0, "error") >= 0)
        return fail(err, errlen, "an error object, no data");
    if (cg_json_type(j, data) != JSMN_ARRAY)
        return fail(err, errlen, "no data array");
    if (j->tok[data].size == 0)
        return fail(err, errlen, "data is empty");
    int first = data + 1;
    if (cg_json_type(j, first) != JSMN_OBJECT)
        return fail(err, errlen, "data[0] is not an object");
    int emb = cg_json_get(j, first, "embedding");
    if (emb < 0)
        return fail(err, errlen, "no data[0].embedding");
    if (cg_json_is_str(j, emb))
        return fail(err, errlen,
                    "data[0].embedding is a string (base64?), not an array of floats");
    if (cg_json_type(j, emb) != JSMN_ARRAY)
        return fail(err, errlen, "data[0].embedding is not an array");
    return emb;
}

int cg_embedding_parse(const char *body, size_t n, cg_vector_t *out, char *err, size_t errlen)
{
    if (n == 0)
        return fail(err, errlen, "empty answer");
    if (n > CG_EMBED_MAX_BODY)
        return fail(err, errlen, "answer of %zu bytes over %u", n, (unsigned)CG_EMBED_MAX_BODY);
    cg_json_t j;
    cg_json_init(&j, MAX_TOKENS);
    int rc = cg_json_parse(&j, body, n);
    if (rc == CG_JSON_E_TOOBIG) {
        cg_json_free(&j);
        return fail(err, errlen, "over %u JSON values (dimension over %u)", MAX_TOKENS,
                    (unsigned)CG_EMBED_MAX_DIM);
    }
    if (rc != CG_JSON_OK) {
        cg_json_free(&j);
        char hint[HINT_BYTES + 1];
        body_hint(body, n, hint);
        return fail(err, errlen, "not JSON (%zu bytes, starting \"%s\")", n, hint);
    }
    int emb = find_embedding(&j, err, errlen);
    rc = emb < 0 ? -1 : read_vector(&j, emb, out, err, errlen);
    cg_json_free(&j);
    return rc;
}
