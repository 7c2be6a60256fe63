/* Citation aliases: see include/citegate/alias.h. */
#include "citegate/alias.h"

#include "citegate/json.h"

#include <stdlib.h>
#include <string.h>

/* One distinct string aliased: it is P<num> or B<num>. */
typedef struct entry {
    uint32_t off, len; /* its decoded bytes in strings */
    uint32_t tools;    /* its first link + 1 (0: none yet) */
    uint32_t last;     /* the tool message it was last seen in + 1 */
    uint32_t num;
    uint8_t kind;      /* KIND_PATH or KIND_BOX */
} entry_t;

/* One tool message a string was aliased in. */
typedef struct link {
    uint32_t tool, next; /* next: the next link + 1 (0: the last) */
} link_t;

/* One replaced string: its bytes in its tool message's text, quotes
 * included. */
typedef struct occurrence {
    uint32_t tool, start, end, id;
} occurrence_t;

/* A tool message's content, rewritten: for cg_aliases_moved. */
typedef struct moved {
    uint32_t off, len, new_len;
} moved_t;

enum { KIND_PATH, KIND_BOX };
static const char kind_letter[2] = {'P', 'B'};

struct cg_aliases {
    cg_buf_t strings;
    entry_t *e;
    size_t n, cap;
    uint32_t *slot; /* hash of the decoded strings: id + 1, 0 empty */
    size_t nslot;   /* a power of two, at least twice n */
    uint32_t *by_num[2]; /* the id of P<k> at by_num[KIND_PATH][k-1] */
    size_t nnum[2], capnum[2];
    link_t *link;
    size_t nlink, caplink;
    occurrence_t *occ;
    size_t nocc, capocc;
    moved_t *moved;
    size_t nmoved, capmoved;
    uint64_t saved;
    /* The smallest k of a string value spelled like an alias, P<k> or
     * B<k>, in any tool output (UINT32_MAX: none). */
    uint32_t least[2];
};

/* --- what gets an alias ------------------------------------------------------- */

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Digits at s[*i..n); false when there are none. */
static bool digits(const char *s, size_t n, size_t *i)
{
    size_t start = *i;
    while (*i < n && is_digit(s[*i]))
        (*i)++;
    return *i > start;
}

/* A decimal number: an optional sign, digits, optionally '.' and digits. */
static bool decimal(const char *s, size_t n, size_t *i)
{
    if (*i < n && (s[*i] == '-' || s[*i] == '+'))
        (*i)++;
    if (!digits(s, n, i))
        return false;
    if (*i < n && s[*i] == '.') {
        (*i)++;
        return digits(s, n, i);
    }
    return true;
}

/* One D(PAGE,X1,Y1,X2,Y2,X3,Y3,X4,Y4) at s[*i..n). */
static bool region(const char *s, size_t n, size_t *i)
{
    if (*i + 2 > n || s[*i] != 'D' || s[*i + 1] != '(')
        return false;
    *i += 2;
    if (!digits(s, n, i))
        return false;
    for (int k = 0; k < 8; k++) {
        if (*i >= n || s[*i] != ',')
            return false;
        (*i)++;
        while (*i < n && s[*i] == ' ')
            (*i)++;
        if (!decimal(s, n, i))
            return false;
    }
    if (*i >= n || s[*i] != ')')
        return false;
    (*i)++;
    return true;
}

bool cg_alias_is_box(const char *s, size_t n)
{
    size_t i = 0;
    if (!region(s, n, &i))
        return false;
    while (i < n) {
        if (s[i] != ';')
            return false;
        i++;
        if (!region(s, n, &i))
            return false;
    }
    return true;
}

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* "scheme://" at s (RFC 3986: a letter, then letters, digits, + - .). */
static bool scheme(const char *s, size_t n)
{
    if (n == 0 || !is_alpha(s[0]))
        return false;
    size_t i = 1;
    while (i < n && (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.'))
        i++;
    return i + 3 <= n && memcmp(s + i, "://", 3) == 0;
}

bool cg_alias_is_path(const char *s, size_t n)
{
    if (n < 16 || (s[0] != '/' && !scheme(s, n)))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c == 0x7f)
            return false;
    }
    return true;
}

/* P<k> or B<k> (k from 1, no leading zero): its kind and k, else -1. */
static int alias_spelling(const char *s, size_t n, uint32_t *k)
{
    if (n < 2 || n > 10 || (s[0] != 'P' && s[0] != 'B') || s[1] == '0')
        return -1;
    uint32_t v = 0;
    for (size_t i = 1; i < n; i++) {
        if (!is_digit(s[i]))
            return -1;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    *k = v;
    return s[0] == 'P' ? KIND_PATH : KIND_BOX;
}

/* --- the table ----------------------------------------------------------------- */

/* A word at a time: the strings are paths and box strings, 20 to 200
 * bytes, hashed once per occurrence. */
static uint64_t hash(const char *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, s + i, n - i);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

static const char *entry_str(const cg_aliases_t *a, const entry_t *e)
{
    return a->strings.p + e->off;
}

static void rehash(cg_aliases_t *a)
{
    free(a->slot);
    a->nslot = a->nslot ? a->nslot * 2 : 64;
    a->slot = cg_xcalloc(a->nslot, sizeof(*a->slot));
    for (size_t id = 0; id < a->n; id++) {
        const entry_t *e = &a->e[id];
        size_t i = hash(entry_str(a, e), e->len) & (a->nslot - 1);
        while (a->slot[i])
            i = (i + 1) & (a->nslot - 1);
        a->slot[i] = (uint32_t)id + 1;
    }
}

/* The id of string s, aliased as `kind` when it is new. */
static uint32_t intern(cg_aliases_t *a, int kind, const char *s, size_t n)
{
    if (2 * (a->n + 1) > a->nslot)
        rehash(a);
    size_t i = hash(s, n) & (a->nslot - 1);
    for (; a->slot[i]; i = (i + 1) & (a->nslot - 1)) {
        const entry_t *e = &a->e[a->slot[i] - 1];
        if (e->len == n && memcmp(entry_str(a, e), s, n) == 0)
            return a->slot[i] - 1;
    }
    a->e = cg_grow(a->e, a->n, &a->cap, 64, sizeof(*a->e));
    a->by_num[kind] = cg_grow(a->by_num[kind], a->nnum[kind], &a->capnum[kind], 64,
                              sizeof(uint32_t));
    uint32_t id = (uint32_t)a->n++;
    a->by_num[kind][a->nnum[kind]++] = id;
    a->e[id] = (entry_t){.off = (uint32_t)a->strings.len, .len = (uint32_t)n,
                         .num = (uint32_t)a->nnum[kind], .kind = (uint8_t)kind};
    cg_buf_put(&a->strings, s, n);
    a->slot[i] = id + 1;
    return id;
}

static size_t alias_len(const entry_t *e)
{
    size_t d = 1;
    for (uint32_t v = e->num; v >= 10; v /= 10)
        d++;
    return 1 + d;
}

/* String `id` was aliased in tool message `tool` (tools come in order). */
static void seen_in(cg_aliases_t *a, uint32_t id, size_t tool)
{
    entry_t *e = &a->e[id];
    if (e->last == tool + 1)
        return;
    a->link = cg_grow(a->link, a->nlink, &a->caplink, 64, sizeof(*a->link));
    a->link[a->nlink] = (link_t){(uint32_t)tool, e->tools};
    e->tools = (uint32_t)++a->nlink;
    e->last = (uint32_t)tool + 1;
}

/* --- reading the tool outputs -------------------------------------------------- */

/* A member name: with parent links, a value's parent is its name, and a
 * name's parent is its object. */
static bool is_name(const cg_json_t *j, int t)
{
    int p = j->tok[t].parent;
    return p >= 0 && j->tok[p].type == JSMN_OBJECT;
}

/* One string value of tool message `tool`, raw (escaped) at text offset
 * `at` (its opening quote). */
static void string_value(cg_aliases_t *a, size_t tool, cg_span_t raw, size_t at,
                         cg_buf_t *scratch)
{
    cg_span_t s = raw;
    if (cg_json_plain_len(raw.p, raw.n) < raw.n) {
        char *dst = cg_buf_reserve(scratch, raw.n);
        s = cg_span(dst, cg_json_unescape(raw.p, raw.n, dst));
    }
    int kind = cg_alias_is_path(s.p, s.n) ? KIND_PATH : cg_alias_is_box(s.p, s.n) ? KIND_BOX : -1;
    if (kind < 0) {
        uint32_t k;
        int like = alias_spelling(s.p, s.n, &k);
        if (like >= 0 && k < a->least[like])
            a->least[like] = k;
        return;
    }
    uint32_t id = intern(a, kind, s.p, s.n);
    seen_in(a, id, tool);
    a->occ = cg_grow(a->occ, a->nocc, &a->capocc, 256, sizeof(*a->occ));
    a->occ[a->nocc++] = (occurrence_t){(uint32_t)tool, (uint32_t)at,
                                       (uint32_t)(at + raw.n + 2), id};
    a->saved += raw.n - alias_len(&a->e[id]);
}

/* A bare string is one JSON value too, which cg_json_parse, made for
 * objects and arrays, refuses: wrapped in brackets, it parses as an array
 * of exactly one element. */
static bool bare_string(cg_span_t text)
{
    size_t i = 0;
    while (i < text.n && (text.p[i] == ' ' || text.p[i] == '\t' || text.p[i] == '\n' ||
                          text.p[i] == '\r'))
        i++;
    return i < text.n && text.p[i] == '"';
}

/* The string values of one tool message's text, when it is one JSON
 * value. */
static void read_tool(cg_aliases_t *a, cg_json_t *j, cg_buf_t *wrap, cg_buf_t *scratch,
                      size_t tool, cg_span_t text)
{
    size_t shift = 0;
    if (cg_json_parse(j, text.p, text.n) != CG_JSON_OK) {
        if (!bare_string(text))
            return;
        wrap->len = 0;
        cg_buf_putc(wrap, '[');
        cg_buf_put(wrap, text.p, text.n);
        cg_buf_putc(wrap, ']');
        if (cg_json_parse(j, wrap->p, wrap->len) != CG_JSON_OK || j->tok[0].size != 1)
            return;
        shift = 1;
    }
    for (int t = 0; t < j->ntok; t++) {
        scratch->len = 0;
        if (j->tok[t].type == JSMN_STRING && !is_name(j, t))
            string_value(a, tool, cg_json_raw(j, t), (size_t)j->tok[t].start - 1 - shift, scratch);
    }
}

/* --- writing the request --------------------------------------------------------- */

/* "P12", with its quotes escaped when it goes inside a JSON string. */
static void put_alias(cg_buf_t *o, const entry_t *e, bool escaped)
{
    char tmp[16], *p = tmp + sizeof(tmp);
    uint32_t v = e->num;
    *--p = '"';
    if (escaped)
        *--p = '\\';
    do
        *--p = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    *--p = kind_letter[e->kind];
    *--p = '"';
    if (escaped)
        *--p = '\\';
    cg_buf_put(o, p, (size_t)(tmp + sizeof(tmp) - p));
}

/* Tool text with its occurrences occ[0..n) replaced; escaped: as the
 * bytes of a JSON string (no quotes around). */
static void put_text(const cg_aliases_t *a, cg_span_t text, const occurrence_t *occ, size_t n,
                     bool escaped, cg_buf_t *o)
{
    size_t cur = 0;
    for (size_t i = 0; i <= n; i++) {
        size_t end = i < n ? occ[i].start : text.n;
        if (escaped)
            cg_json_put_escaped(o, text.p + cur, end - cur);
        else
            cg_buf_put(o, text.p + cur, end - cur);
        if (i == n)
            break;
        put_alias(o, &a->e[occ[i].id], escaped);
        cur = occ[i].end;
    }
}

/* A content array of parts: the first text part carries the whole new
 * text, later ones "", the rest as it came. */
static void put_parts(cg_span_t value, const cg_buf_t *text, cg_buf_t *o)
{
    cg_json_t j;
    cg_json_init(&j, 1u << 22);
    size_t cur = 0;
    bool first = true;
    if (cg_json_parse(&j, value.p, value.n) == CG_JSON_OK) {
        int n = j.tok[0].size;
        for (int k = 0, i = 1; k < n; k++, i = cg_json_skip(&j, i)) {
            int t = cg_json_get(&j, i, "text");
            if (!cg_json_is_str(&j, t))
                continue;
            size_t b = cg_json_begin(&j, t);
            cg_buf_put(o, value.p + cur, b - cur);
            cg_json_put_str(o, first ? text->p : "", first ? text->len : 0);
            cur = cg_json_end(&j, t);
            first = false;
        }
    }
    cg_buf_put(o, value.p + cur, value.n - cur);
    cg_json_free(&j);
}

/* The body with the content of each tool message that lost strings
 * rewritten. */
static void write_body(cg_aliases_t *a, const cg_request_t *r, const char *body, size_t len,
                       cg_buf_t *out)
{
    size_t cur = 0, o = 0;
    cg_buf_t text = {0};
    cg_buf_reserve(out, len);
    for (size_t t = 0; t < r->ntools && o < a->nocc; t++) {
        size_t first = o;
        while (o < a->nocc && a->occ[o].tool == t)
            o++;
        if (o == first)
            continue;
        cg_body_range_t at = r->tool_at[t];
        cg_buf_put(out, body + cur, at.off - cur);
        size_t before = out->len;
        if (body[at.off] == '"') {
            cg_buf_putc(out, '"');
            put_text(a, r->tools[t], a->occ + first, o - first, true, out);
            cg_buf_putc(out, '"');
        } else {
            text.len = 0;
            put_text(a, r->tools[t], a->occ + first, o - first, false, &text);
            put_parts(cg_span(body + at.off, at.len), &text, out);
        }
        a->moved = cg_grow(a->moved, a->nmoved, &a->capmoved, 16, sizeof(*a->moved));
        a->moved[a->nmoved++] = (moved_t){at.off, at.len, (uint32_t)(out->len - before)};
        cur = at.off + at.len;
    }
    cg_buf_put(out, body + cur, len - cur);
    cg_buf_free(&text);
}

/* A tool output that already holds P<k> or B<k> with k up to the number
 * of its kind would make the alias ambiguous. */
static bool clash(const cg_aliases_t *a)
{
    return a->least[KIND_PATH] <= a->nnum[KIND_PATH] || a->least[KIND_BOX] <= a->nnum[KIND_BOX];
}

cg_aliases_t *cg_aliases_make(const cg_request_t *r, const char *body, size_t len,
                              cg_buf_t *out)
{
    cg_aliases_t *a = cg_xcalloc(1, sizeof(*a));
    a->least[KIND_PATH] = a->least[KIND_BOX] = UINT32_MAX;
    cg_json_t j;
    cg_json_init(&j, 1u << 22); /* as cg_request_parse */
    cg_buf_t wrap = {0}, scratch = {0};
    for (size_t t = 0; t < r->ntools; t++)
        read_tool(a, &j, &wrap, &scratch, t, r->tools[t]);
    cg_json_free(&j);
    cg_buf_free(&wrap);
    cg_buf_free(&scratch);
    if (a->n == 0 || clash(a)) {
        cg_aliases_free(a);
        return NULL;
    }
    write_body(a, r, body, len, out);
    return a;
}

void cg_aliases_free(cg_aliases_t *a)
{
    if (a == NULL)
        return;
    cg_buf_free(&a->strings);
    free(a->e);
    free(a->slot);
    free(a->by_num[0]);
    free(a->by_num[1]);
    free(a->link);
    free(a->occ);
    free(a->moved);
    free(a);
}

/* --- reading the answer ---------------------------------------------------------- */

size_t cg_aliases_count(const cg_aliases_t *a)
{
    return a ? a->n : 0;
}

uint64_t cg_aliases_saved(const cg_aliases_t *a)
{
    return a ? a->saved : 0;
}

size_t cg_aliases_moved(const cg_aliases_t *a, size_t off)
{
    size_t to = off;
    for (size_t i = 0; i < a->nmoved && a->moved[i].off < off; i++)
        to = to + a->moved[i].new_len - a->moved[i].len;
    return to;
}

int cg_aliases_find(const cg_aliases_t *a, const char *s, size_t n, cg_span_t *orig)
{
    uint32_t k;
    int kind = a ? alias_spelling(s, n, &k) : -1;
    if (kind < 0 || k == 0 || k > a->nnum[kind])
        return -1;
    uint32_t id = a->by_num[kind][k - 1];
    *orig = cg_span(entry_str(a, &a->e[id]), a->e[id].len);
    return (int)id;
}

bool cg_aliases_in_tool(const cg_aliases_t *a, int id, size_t tool)
{
    if (a == NULL || id < 0 || (size_t)id >= a->n)
        return false;
    for (uint32_t l = a->e[id].tools; l; l = a->link[l - 1].next)
        if (a->link[l - 1].tool == tool)
            return true;
    return false;
}
