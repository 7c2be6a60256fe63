/*
 * libFuzzer target for the embeddings call (include/citegate/embedding.h).
 *
 * The whole input is an embeddings answer for cg_embedding_parse: it never
 * crashes; a success is a vector of 1..CG_EMBED_MAX_DIM finite floats that
 * the same answer, written again with those floats, gives back exactly; a
 * refusal leaves the vector alone and says why in one line.
 *
 * The whole input is also the text of cg_embedding_request, and its first
 * bytes the model: the body is one valid JSON object of exactly "model" and
 * "input", whose decoded strings are the given bytes with each byte that
 * starts no valid UTF-8 sequence replaced by U+FFFD (an independent reading
 * of UTF-8 below decides which).
 */
#include "citegate/embedding.h"
#include "citegate/json.h"

#include "fuzz_common.h"
#include "fuzz_jsonv.h"

#include <math.h>

#define MODEL_BYTES 8

/* ---- the answer --------------------------------------------------------- */

/* vec written as the smallest answer: %.9g gives every float back exactly. */
static void write_answer(cg_buf_t *b, const cg_vector_t *vec)
{
    cg_buf_puts(b, "{\"data\":[{\"embedding\":[");
    for (uint32_t i = 0; i < vec->dim; i++)
        cg_buf_printf(b, "%s%.9g", i ? "," : "", (double)vec->v[i]);
    cg_buf_puts(b, "]}]}");
}

static void check_vector(const cg_vector_t *vec)
{
    FZ_CHECK(vec->v != NULL);
    FZ_CHECK(vec->dim >= 1 && vec->dim <= CG_EMBED_MAX_DIM);
    FZ_CHECK(vec->model == NULL);
    for (uint32_t i = 0; i < vec->dim; i++)
        FZ_CHECK(isfinite(vec->v[i]));

    cg_buf_t again = {0};
    write_answer(&again, vec);
    cg_vector_t back = {0};
    char err[128];
    FZ_CHECK(cg_embedding_parse(again.p, again.len, &back, err, sizeof(err)) == 0);
    FZ_CHECK(back.dim == vec->dim);
    for (uint32_t i = 0; i < vec->dim; i++) /* -0 and 0 alike: bits, not values */
        FZ_CHECK(memcmp(&back.v[i], &vec->v[i], sizeof(float)) == 0);
    free(back.v);
    cg_buf_free(&again);
}

static void check_refusal(const cg_vector_t *vec, const char *err, size_t errlen)
{
    FZ_CHECK(vec->v == NULL && vec->dim == 0);
    size_t n = strnlen(err, errlen);
    FZ_CHECK(n > 0 && n < errlen);
    for (size_t i = 0; i < n; i++)
        FZ_CHECK((unsigned char)err[i] >= 0x20 && err[i] != 0x7F);
}

static void check_parse(const uint8_t *data, size_t size)
{
    char *body = fz_dup(data, size);
    cg_vector_t vec = {0};
    char err[160];
    memset(err, 'x', sizeof(err));
    int rc = cg_embedding_parse(body, size, &vec, err, sizeof(err));
    FZ_CHECK(rc == 0 || rc == -1);
    if (rc == 0)
        check_vector(&vec);
    else
        check_refusal(&vec, err, sizeof(err));
    free(vec.v);
    free(body);
}

/* ---- the request -------------------------------------------------------- */

/*
 * Length of the valid UTF-8 character at s[0..n), or 0. Read as a code point
 * and judged by its value (shortest form, no surrogate, at most U+10FFFF),
 * not by byte ranges as the core does.
 */
static size_t utf8_char(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    size_t len = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    uint32_t cp = s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* got[0..gn) is in[0..n) with each byte that starts no character replaced. */
static void check_replaced(const char *in, size_t n, const char *got, size_t gn)
{
    const unsigned char *u = (const unsigned char *)in;
    size_t i = 0, o = 0;
    while (i < n) {
        size_t len = utf8_char(u + i, n - i);
        if (len > 0) {
            FZ_CHECK(o + len <= gn && memcmp(got + o, in + i, len) == 0);
            i += len;
            o += len;
        } else {
            FZ_CHECK(o + 3 <= gn && memcmp(got + o, "\xEF\xBF\xBD", 3) == 0);
            i++;
            o += 3;
        }
    }
    FZ_CHECK(o == gn);
}

/* The decoded string of member key of the object at token 0. */
static char *member(const cg_json_t *j, const char *key, size_t *len)
{
    int v = cg_json_get(j, 0, key);
    FZ_CHECK(cg_json_is_str(j, v));
    char *s = cg_json_strdup(j, v, len);
    FZ_CHECK(s != NULL);
    return s;
}

static void check_request(const uint8_t *data, size_t size)
{
    size_t mlen = size < MODEL_BYTES ? size : MODEL_BYTES;
    char *model = cg_xstrndup((const char *)data, mlen); /* the model is a C string */
    mlen = strlen(model);
    char *text = fz_dup(data, size);

    cg_buf_t b = {0};
    cg_buf_puts(&b, "x"); /* appended, never overwritten */
    cg_embedding_request(&b, model, text, size);
    FZ_CHECK(b.len >= 1 && b.p[0] == 'x');

    cg_json_t j;
    cg_json_init(&j, 16);
    FZ_CHECK(cg_json_parse(&j, b.p + 1, b.len - 1) == CG_JSON_OK);
    FZ_CHECK(fz_json_invalid(&j) == NULL);
    FZ_CHECK(cg_json_type(&j, 0) == JSMN_OBJECT && j.tok[0].size == 2);
    /* no raw control byte either: the endpoint's parser may be strict */
    for (size_t i = 1; i < b.len; i++)
        FZ_CHECK((unsigned char)b.p[i] >= 0x20);
    size_t gm, gt;
    char *got_model = member(&j, "model", &gm);
    char *got_text = member(&j, "input", &gt);
    check_replaced(model, mlen, got_model, gm);
    check_replaced(text, size, got_text, gt);

    free(got_model);
    free(got_text);
    cg_json_free(&j);
    cg_buf_free(&b);
    free(text);
    free(model);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_parse(data, size);
    check_request(data, size);
    return 0;
}
