/* JSON view over jsmn (Debian's libjsmn-dev, header-only) and an escaping writer. */
#define JSMN_PARENT_LINKS
#define JSMN_STRICT
#include <jsmn.h>

#include "citegate/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

void cg_json_init(cg_json_t *j, unsigned max_tokens)
{
    memset(j, 0, sizeof(*j));
    j->max = max_tokens;
}

void cg_json_free(cg_json_t *j)
{
    free(j->tok);
    j->tok = NULL;
    j->cap = 0;
    j->ntok = 0;
}

void cg_json_borrow(cg_json_t *j, cg_json_store_t *s)
{
    j->tok = s->tok;
    j->cap = s->cap;
    j->ntok = 0;
    s->tok = NULL;
    s->cap = 0;
}

void cg_json_give_back(cg_json_t *j, cg_json_store_t *s)
{
    jsmntok_t *tok = j->tok;
    unsigned cap = j->cap;
    j->tok = NULL;
    j->cap = 0;
    j->ntok = 0;
    if (cap > CG_JSON_STORE_KEEP) {
        tok = cg_xrealloc(tok, CG_JSON_STORE_KEEP * sizeof(jsmntok_t));
        cap = CG_JSON_STORE_KEEP;
    }
    if (cap <= s->cap) {
        free(tok); /* a nested borrower's: the store's own is larger */
        return;
    }
    free(s->tok);
    s->tok = tok;
    s->cap = cap;
}

void cg_json_store_free(cg_json_store_t *s)
{
    free(s->tok);
    s->tok = NULL;
    s->cap = 0;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool is_number(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '-')
        i++;
    if (i >= n || s[i] < '0' || s[i] > '9')
        return false;
    if (s[i] == '0')
        i++;
    else
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    if (i < n && s[i] == '.') {
        size_t d = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == d)
            return false;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t d = i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == d)
            return false;
    }
    return i == n;
}

static bool is_literal(const char *s, size_t n)
{
    return (n == 4 && (memcmp(s, "true", 4) == 0 || memcmp(s, "null", 4) == 0)) ||
           (n == 5 && memcmp(s, "false", 5) == 0);
}

/* Is js[from, to) white space around exactly one `sep` (none if sep is 0)? */
static bool sep_ok(const char *js, size_t from, size_t to, char sep)
{
    bool seen = sep == 0;
    for (size_t i = from; i < to; i++) {
        if (is_ws(js[i]))
            continue;
        if (js[i] != sep || seen)
            return false;
        seen = true;
    }
    return seen;
}

/* What one pass over the whole text tells before the parse: whether it
 * holds a byte below 0x20 (upstreams send compact JSON, where none stands
 * even between tokens, so the check of each string is usually spared), and
 * how many bytes open an object or array, in strings too: a text with at
 * most CG_JSON_MAX_DEPTH of them cannot nest deeper, which spares the
 * exact depth walk. 16 bytes at a time. */
typedef struct text_scan {
    bool controls;
    size_t opens;
} text_scan_t;

static text_scan_t scan_bytes(const char *p, size_t n, text_scan_t s)
{
    for (size_t i = 0; i < n; i++) {
        s.controls |= (unsigned char)p[i] < 0x20;
        s.opens += p[i] == '{' || p[i] == '[';
    }
    return s;
}

#if defined(__SSE2__)
/* Counts per byte lane (a match is -1, so subtracting adds one), summed
 * before any lane can wrap: no popcount, which x86-64's baseline lacks. */
static text_scan_t scan_text(const char *p, size_t n)
{
    const __m128i top = _mm_set1_epi8(0x1f), brace = _mm_set1_epi8('{'),
                  bracket = _mm_set1_epi8('['), zero = _mm_setzero_si128();
    __m128i low = zero, lanes = zero, sum = zero;
    text_scan_t s = {false, 0};
    size_t i = 0;
    for (unsigned k = 1; i + 16 <= n; i += 16, k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
        /* v <= 0x1f (unsigned) where min(v, 0x1f) == v */
        low = _mm_or_si128(low, _mm_cmpeq_epi8(_mm_min_epu8(v, top), v));
        lanes = _mm_sub_epi8(lanes, _mm_cmpeq_epi8(v, brace));
        lanes = _mm_sub_epi8(lanes, _mm_cmpeq_epi8(v, bracket));
        if (k % 127 == 0) { /* at most 254 per lane */
            sum = _mm_add_epi64(sum, _mm_sad_epu8(lanes, zero));
            lanes = zero;
        }
    }
    sum = _mm_add_epi64(sum, _mm_sad_epu8(lanes, zero));
    s.opens = (size_t)_mm_cvtsi128_si64(sum) + (size_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(sum, sum));
    s.controls = _mm_movemask_epi8(low) != 0;
    return scan_bytes(p + i, n - i, s);
}
#else
static text_scan_t scan_text(const char *p, size_t n)
{
    return scan_bytes(p, n, (text_scan_t){false, 0});
}
#endif

size_t cg_json_opens(const char *p, size_t n)
{
    return scan_text(p, n).opens;
}

/* A string's bytes hold no raw control byte, which jsmn lets through: JSON
 * allows them only escaped (jsmn has checked the escapes). */
static bool no_raw_control(const char *s, size_t n)
{
    for (size_t i = cg_json_plain_len(s, n); i < n; i += cg_json_plain_len(s + i, n - i)) {
        if (s[i] != '\\' || i + 1 == n)
            return false;
        i += 2; /* the escaped byte, or a u whose hex digits are plain */
    }
    return true;
}

/* A primitive is a literal or a number and never a member name; a string
 * is a member name exactly when its parent is an object, and holds no raw
 * control byte. */
static bool token_ok(const cg_json_t *j, const jsmntok_t *t, bool controls)
{
    const char *s = j->js + t->start;
    size_t n = (size_t)(t->end - t->start);
    bool in_object = t->parent >= 0 && j->tok[t->parent].type == JSMN_OBJECT;
    if (t->type == JSMN_PRIMITIVE)
        return t->size == 0 && !in_object && (is_number(s, n) || is_literal(s, n));
    if (t->type == JSMN_STRING)
        return t->size == (in_object ? 1 : 0) && (!controls || no_raw_control(s, n));
    return true;
}

/* An open container while the tokens are walked: where its last member
 * (or element) ended, and how many it has had. */
typedef struct open_box {
    int tok;
    unsigned members;
    size_t pos;
} open_box_t;

/* Deepest nesting grammar_ok meets: a text of up to CG_JSON_SHALLOW_BYTES
 * nests at most half as deep (each level takes two brackets), a longer one
 * at most CG_JSON_MAX_DEPTH (the parse refused it otherwise). */
#define BOX_STACK (CG_JSON_SHALLOW_BYTES / 2 > CG_JSON_MAX_DEPTH ? CG_JSON_SHALLOW_BYTES / 2 \
                                                                  : CG_JSON_MAX_DEPTH)

/* Closes the open containers down to `keep` (exclusive): after the last
 * member only white space may stand. */
static bool close_to(const cg_json_t *j, open_box_t *st, size_t *depth, int keep)
{
    while (*depth > 0 && st[*depth - 1].tok != keep) {
        const open_box_t *b = &st[--*depth];
        if (!sep_ok(j->js, b->pos, (size_t)j->tok[b->tok].end - 1, 0))
            return false;
    }
    return true;
}

/* Token i's place in its container: after the previous member, one `,`
 * (none before the first); after its key, one `:`. */
static bool place_ok(const cg_json_t *j, open_box_t *st, size_t *depth, int i)
{
    int p = j->tok[i].parent;
    bool value = j->tok[p].type == JSMN_STRING; /* a member's value: its parent is the key */
    if (!close_to(j, st, depth, value ? j->tok[p].parent : p) || *depth == 0)
        return false;
    open_box_t *b = &st[*depth - 1];
    bool ok = value ? sep_ok(j->js, cg_json_end(j, p), cg_json_begin(j, i), ':')
                    : sep_ok(j->js, b->pos, cg_json_begin(j, i), b->members++ ? ',' : 0);
    b->pos = cg_json_end(j, i);
    return ok;
}

/* jsmn checks brackets and strings but takes `[1:2]`, `{"a"::1}`, `[1 2]`,
 * `[1,]` or `tru` for JSON. Its tokens make the rest easy to check in one
 * walk over them (in document order, each naming its parent): every token
 * as token_ok says, and between tokens only white space with exactly the
 * one `,` or `:` the grammar puts there. Only separators are scanned. */
static bool grammar_ok(const cg_json_t *j, bool controls)
{
    open_box_t st[BOX_STACK];
    size_t depth = 0;
    for (int i = 0; i < j->ntok; i++) {
        const jsmntok_t *t = &j->tok[i];
        if (!token_ok(j, t, controls) || (i > 0 && !place_ok(j, st, &depth, i)))
            return false;
        if (t->type == JSMN_OBJECT || t->type == JSMN_ARRAY) {
            if (depth == BOX_STACK)
                return false;
            st[depth++] = (open_box_t){i, 0, (size_t)t->start + 1};
        }
    }
    return close_to(j, st, &depth, -1);
}

/* The end of the string whose opening quote is at s[i - 1]: the index of
 * its closing quote, or n. */
static size_t string_end(const char *s, size_t n, size_t i)
{
    while (i < n) {
        i += cg_json_plain_len(s + i, n - i);
        if (i >= n || s[i] == '"')
            break;
        i += s[i] == '\\' ? 2 : 1; /* an escape's backslash may be the last byte */
    }
    return i < n ? i : n;
}

/* Whether js nests arrays and objects at most CG_JSON_MAX_DEPTH deep (see
 * json.h); brackets inside strings do not count. */
static bool depth_ok(const char *js, size_t len)
{
    unsigned depth = 0;
    for (size_t i = 0; i < len; i++) {
        char c = js[i];
        if (c == '"')
            i = string_end(js, len, i + 1);
        else if ((c == '[' || c == '{') && ++depth > CG_JSON_MAX_DEPTH)
            return false;
        else if ((c == ']' || c == '}') && depth > 0)
            depth--;
    }
    return true;
}

int cg_json_parse(cg_json_t *j, const char *js, size_t len)
{
    jsmn_parser parser;
    jsmn_init(&parser);
    j->js = js;
    j->len = len;
    j->ntok = 0;
    if (j->cap == 0) {
        j->cap = j->max < CG_JSON_FIRST_TOKENS ? j->max : CG_JSON_FIRST_TOKENS;
        j->tok = cg_xrealloc(j->tok, j->cap * sizeof(jsmntok_t));
    }
    size_t first = 0;
    while (first < len && is_ws(js[first]))
        first++;
    if (first == len || (js[first] != '{' && js[first] != '['))
        return CG_JSON_E_INVALID;
    text_scan_t scan = scan_text(js, len);
    if (len > CG_JSON_SHALLOW_BYTES && scan.opens > CG_JSON_MAX_DEPTH && !depth_ok(js, len))
        return CG_JSON_E_DEEP;
    int r;
    while ((r = jsmn_parse(&parser, js, len, j->tok, j->cap)) == JSMN_ERROR_NOMEM) {
        if (j->cap >= j->max)
            return CG_JSON_E_TOOBIG;
        unsigned cap = j->cap * 2 > j->max ? j->max : j->cap * 2;
        j->tok = cg_xrealloc(j->tok, cap * sizeof(jsmntok_t));
        j->cap = cap;
    }
    if (r < 1)
        return CG_JSON_E_INVALID;
    j->ntok = r;
    /* jsmn stops at a NUL byte and accepts several top-level values: insist
     * on exactly one value spanning the whole text. */
    if (cg_json_skip(j, 0) != r)
        return CG_JSON_E_INVALID;
    size_t end = cg_json_end(j, 0);
    while (end < len && is_ws(js[end]))
        end++;
    if (end != len)
        return CG_JSON_E_INVALID;
    return grammar_ok(j, scan.controls) ? CG_JSON_OK : CG_JSON_E_INVALID;
}

int cg_json_skip(const cg_json_t *j, int i)
{
    /* Each token's size counts its direct children (a key has its value as
     * its one child), so walking forward until no child is pending skips
     * exactly one subtree. */
    int pending = 1;
    while (pending > 0 && i < j->ntok) {
        pending += j->tok[i].size - 1;
        i++;
    }
    return i;
}

int cg_json_get(const cg_json_t *j, int obj, const char *key)
{
    if (cg_json_type(j, obj) != JSMN_OBJECT)
        return -1;
    size_t klen = strlen(key);
    int n = j->tok[obj].size;
    int i = obj + 1;
    for (int k = 0; k < n && i + 1 < j->ntok; k++) {
        const jsmntok_t *t = &j->tok[i];
        if (t->type == JSMN_STRING && (size_t)(t->end - t->start) == klen &&
            memcmp(j->js + t->start, key, klen) == 0)
            return i + 1;
        i = cg_json_skip(j, i + 1);
    }
    return -1;
}

bool cg_json_is_str(const cg_json_t *j, int i)
{
    return cg_json_type(j, i) == JSMN_STRING;
}

bool cg_json_is_null(const cg_json_t *j, int i)
{
    return cg_json_type(j, i) == JSMN_PRIMITIVE && j->js[j->tok[i].start] == 'n';
}

cg_span_t cg_json_raw(const cg_json_t *j, int i)
{
    const jsmntok_t *t = &j->tok[i];
    return cg_span(j->js + t->start, (size_t)(t->end - t->start));
}

size_t cg_json_begin(const cg_json_t *j, int i)
{
    const jsmntok_t *t = &j->tok[i];
    return (size_t)t->start - (t->type == JSMN_STRING ? 1 : 0);
}

size_t cg_json_end(const cg_json_t *j, int i)
{
    const jsmntok_t *t = &j->tok[i];
    return (size_t)t->end + (t->type == JSMN_STRING ? 1 : 0);
}

bool cg_json_number(const cg_json_t *j, int i, double *out)
{
    int type = cg_json_type(j, i);
    if (type != JSMN_PRIMITIVE && type != JSMN_STRING)
        return false;
    cg_span_t s = cg_json_raw(j, i);
    char tmp[64];
    if (s.n == 0 || s.n >= sizeof(tmp))
        return false;
    memcpy(tmp, s.p, s.n);
    tmp[s.n] = '\0';
    char *end;
    double v = strtod(tmp, &end);
    if (*end != '\0' || !isfinite(v))
        return false;
    *out = v;
    return true;
}

char *cg_json_strdup(const cg_json_t *j, int i, size_t *len)
{
    if (!cg_json_is_str(j, i))
        return NULL;
    cg_span_t s = cg_json_raw(j, i);
    char *out = cg_xmalloc(s.n + 1);
    size_t n = cg_json_unescape(s.p, s.n, out);
    out[n] = '\0';
    if (len)
        *len = n;
    return out;
}

char *cg_json_strdup_nonempty(const cg_json_t *j, int i)
{
    size_t n;
    char *s = cg_json_strdup(j, i, &n);
    if (s && n == 0) {
        free(s);
        return NULL;
    }
    return s;
}

static long hex4(const char *s, size_t n)
{
    if (n < 4)
        return -1;
    long v = 0;
    for (int k = 0; k < 4; k++) {
        int h = cg_hex_digit(s[k]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

static size_t put_utf8(char *out, unsigned long cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes one \u escape (s points after "\u"); sets *used to the bytes read. */
static unsigned long decode_u(const char *s, size_t n, size_t *used)
{
    long hi = hex4(s, n);
    *used = 4;
    if (hi < 0) {
        *used = 0;
        return 0xFFFD;
    }
    if (hi >= 0xD800 && hi <= 0xDBFF && n >= 10 && s[4] == '\\' && s[5] == 'u') {
        long lo = hex4(s + 6, n - 6);
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
            *used = 10;
            return 0x10000 + (((unsigned long)hi - 0xD800) << 10) + ((unsigned long)lo - 0xDC00);
        }
    }
    if (hi >= 0xD800 && hi <= 0xDFFF)
        return 0xFFFD;
    return (unsigned long)hi;
}

size_t cg_json_unescape(const char *s, size_t n, char *out)
{
    size_t o = 0;
    size_t i = 0;
    while (i < n) {
        const char *bs = memchr(s + i, '\\', n - i);
        size_t run = bs ? (size_t)(bs - (s + i)) : n - i;
        memmove(out + o, s + i, run);
        o += run;
        i += run;
        if (i >= n)
            break;
        if (i + 1 >= n) { /* lone trailing backslash: keep it */
            out[o++] = '\\';
            break;
        }
        char c = s[i + 1];
        i += 2;
        switch (c) {
        case 'n': out[o++] = '\n'; break;
        case 't': out[o++] = '\t'; break;
        case 'r': out[o++] = '\r'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'u': {
            size_t used;
            unsigned long cp = decode_u(s + i, n - i, &used);
            if (used == 0) { /* not an escape: keep the bytes, never grow */
                out[o++] = '\\';
                out[o++] = 'u';
                break;
            }
            i += used;
            o += put_utf8(out + o, cp);
            break;
        }
        default: out[o++] = c; break;
        }
    }
    return o;
}

/* The value of the backslash-u escape (four hex digits) at p[0..n), or -1 when there is none. */
static long u_escape(const char *p, size_t n)
{
    if (n < 6 || p[0] != '\\' || p[1] != 'u')
        return -1;
    return hex4(p + 2, n - 2);
}

/* Bytes of the character at p[0..n): an escape (a surrogate pair's two
 * together: a half alone is no character to a client), or a UTF-8
 * sequence with its continuation bytes. */
static size_t char_len(const char *p, size_t n)
{
    size_t i;
    long hi = u_escape(p, n);
    if (hi >= 0xD800 && hi <= 0xDBFF) {
        long lo = u_escape(p + 6, n - 6); /* hi is a whole escape: n >= 6 */
        i = lo >= 0xDC00 && lo <= 0xDFFF ? 12 : 6;
    } else if (p[0] == '\\') {
        i = hi >= 0 ? 6 : 2;
    } else {
        i = 1;
    }
    while (i < n && ((unsigned char)p[i] & 0xC0) == 0x80)
        i++;
    return i < n ? i : n;
}

size_t cg_json_safe_cut(const char *p, size_t n, size_t max)
{
    if (n <= max)
        return n;
    size_t i = 0, last = 0;
    while (i < n && i <= max) {
        last = i;
        i += char_len(p + i, n - i);
    }
    return last ? last : (i < n ? i : n);
}

void cg_json_put_escaped(cg_buf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t i = 0;
    while (i < n) {
        size_t run = i + cg_json_plain_len(s + i, n - i);
        cg_buf_put(b, s + i, run - i);
        if (run >= n)
            break;
        unsigned char c = (unsigned char)s[run];
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t elen = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            elen = 6;
        }
        cg_buf_put(b, esc, elen);
        i = run + 1;
    }
}

void cg_json_put_str(cg_buf_t *b, const char *s, size_t n)
{
    cg_buf_putc(b, '"');
    cg_json_put_escaped(b, s, n);
    cg_buf_putc(b, '"');
}

void cg_json_put_cstr(cg_buf_t *b, const char *s)
{
    cg_json_put_str(b, s, strlen(s));
}

void cg_json_put_double(cg_buf_t *b, double v)
{
    if (!isfinite(v))
        v = 0;
    char tmp[32];
    snprintf(tmp, sizeof(tmp), "%.15g", v);
    cg_buf_puts(b, tmp);
}
