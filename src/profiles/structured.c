/*
 * Profile "structured" (SPEC §7): answers shaped {"response", "citations"},
 * where each citation must be a [PATH, BOXES] pair found in the output of
 * one of the request's tool calls. Invalid citations are removed and the
 * inline [k] markers renumbered, so [k] always points at the k-th citation
 * that is left: removing one never shifts the others onto the wrong source.
 * When the request went upstream with citation aliases, the citations'
 * strings are read with the aliases expanded first.
 *
 * A response header reports how many were removed, so a stream is held to
 * its end (holds_stream): the first content of each choice then carries the
 * whole corrected answer, later ones "". State per choice: the decoded
 * answer of a held stream and its correction.
 */
#include "citegate/alias.h"
#include "core/emit.h"
#include "core/xform_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct structured_choice {
    cg_buf_t text;  /* the decoded content of a held stream */
    cg_buf_t fixed; /* the corrected content, when there is one */
    bool fix_set, fix_sent;
} structured_choice_t;

static void choice_free(void *state)
{
    structured_choice_t *sc = state;
    cg_buf_free(&sc->text);
    cg_buf_free(&sc->fixed);
}

/* True when s occurs in the text of one tool message. */
static bool in_tool(const cg_span_t *tool, const char *s, size_t n)
{
    return n <= tool->n && memmem(tool->p, tool->n, s, n) != NULL;
}

/* One string of a citation: as the model wrote it, or, when it is an alias
 * of this request (SPEC §7, "Aliases"), the string it stands for. */
typedef struct cited {
    char *own;   /* decoded as written */
    cg_span_t s; /* what it stands for */
    int alias;   /* its alias, or -1 */
} cited_t;

static void read_cited(const cg_request_t *req, const cg_json_t *j, int tok, cited_t *c)
{
    size_t n;
    c->own = cg_json_strdup(j, tok, &n);
    c->s = cg_span(c->own, n);
    c->alias = cg_aliases_find(req->aliases, c->own, n, &c->s);
}

/* An alias stood for a string of the tool messages it was made in; any
 * string counts where it occurs in a tool message's text. */
static bool cited_in(const cg_request_t *req, const cited_t *c, size_t tool)
{
    return cg_aliases_in_tool(req->aliases, c->alias, tool) ||
           in_tool(&req->tools[tool], c->s.p, c->s.n);
}

/* A citation is valid when it is two strings that both occur in the output
 * of one and the same tool message; pair gets them when it is. */
static bool citation_valid(const cg_request_t *req, const cg_json_t *j, int c, cited_t pair[2])
{
    if (cg_json_type(j, c) != JSMN_ARRAY || j->tok[c].size != 2 || req == NULL)
        return false;
    int a = c + 1, b = cg_json_skip(j, a);
    if (!cg_json_is_str(j, a) || !cg_json_is_str(j, b))
        return false;
    read_cited(req, j, a, &pair[0]);
    read_cited(req, j, b, &pair[1]);
    for (size_t i = 0; i < req->ntools; i++)
        if (cited_in(req, &pair[0], i) && cited_in(req, &pair[1], i))
            return true;
    free(pair[0].own);
    free(pair[1].own);
    return false;
}

/* Length of the [k] marker at s (1-4 digits), or 0 when there is none. */
static size_t marker_at(const char *s, size_t n, unsigned *k)
{
    size_t d = 0;
    *k = 0;
    while (d < 4 && 1 + d < n && s[1 + d] >= '0' && s[1 + d] <= '9') {
        *k = *k * 10 + (unsigned)(s[1 + d] - '0');
        d++;
    }
    if (d == 0 || 1 + d >= n || s[1 + d] != ']')
        return 0;
    return d + 2;
}

/* Rewrites the markers of response text s: kept citations get their new
 * number, removed ones vanish with one space before them. */
static void renumber(const char *s, size_t n, const unsigned *newnum, size_t ncit, cg_buf_t *o)
{
    for (size_t i = 0; i < n;) {
        unsigned k;
        size_t m = s[i] == '[' ? marker_at(s + i, n - i, &k) : 0;
        if (m == 0 || k == 0 || k > ncit) {
            size_t run = m ? m : 1;
            cg_buf_put(o, s + i, run);
            i += run;
            continue;
        }
        if (newnum[k - 1])
            cg_buf_printf(o, "[%u]", newnum[k - 1]);
        else if (i > 0 && s[i - 1] == ' ' && o->len > 0 && o->p[o->len - 1] == ' ')
            o->len--;
        i += m;
    }
}

static void put_raw(cg_buf_t *o, const cg_json_t *j, int tok)
{
    size_t b = cg_json_begin(j, tok);
    cg_buf_put(o, j->js + b, cg_json_end(j, tok) - b);
}

/* A kept citation, compact: ["PATH","BOXES"]. */
static void put_pair(cg_buf_t *o, const cited_t pair[2])
{
    cg_buf_putc(o, '[');
    cg_json_put_str(o, pair[0].s.p, pair[0].s.n);
    cg_buf_putc(o, ',');
    cg_json_put_str(o, pair[1].s.p, pair[1].s.n);
    cg_buf_putc(o, ']');
}

/* Writes the corrected object: the same members in the same order, with
 * "response" and "citations" replaced. */
static void put_fixed(const cg_json_t *j, int resp, int cits, const cg_buf_t *text,
                      const cited_t (*kept)[2], size_t nkept, cg_buf_t *o)
{
    cg_buf_putc(o, '{');
    int n = j->tok[0].size;
    for (int k = 0, key = 1; k < n; k++) {
        int val = key + 1;
        if (k)
            cg_buf_putc(o, ',');
        put_raw(o, j, key);
        cg_buf_putc(o, ':');
        if (val == resp) {
            cg_json_put_str(o, text->p, text->len);
        } else if (val == cits) {
            cg_buf_putc(o, '[');
            for (size_t e = 0; e < nkept; e++) {
                if (e)
                    cg_buf_putc(o, ',');
                put_pair(o, kept[e]);
            }
            cg_buf_putc(o, ']');
        } else {
            put_raw(o, j, val);
        }
        key = cg_json_skip(j, val);
    }
    cg_buf_putc(o, '}');
}

/* The corrected {response, citations} object of one answer's content;
 * false when the content does not have that shape. */
static bool fix(const cg_request_t *req, const char *content, size_t n, cg_buf_t *out,
                unsigned *removed)
{
    cg_json_t j;
    cg_json_init(&j, CG_XFORM_MAX_TOKENS);
    bool ok = false;
    if (cg_json_parse(&j, content, n) != CG_JSON_OK || j.tok[0].type != JSMN_OBJECT)
        goto out;
    int resp = cg_json_get(&j, 0, "response");
    int cits = cg_json_get(&j, 0, "citations");
    if (!cg_json_is_str(&j, resp) || cg_json_type(&j, cits) != JSMN_ARRAY)
        goto out;
    size_t ncit = (size_t)j.tok[cits].size;
    unsigned *newnum = cg_xcalloc(ncit ? ncit : 1, sizeof(unsigned));
    cited_t(*pairs)[2] = cg_xcalloc(ncit ? ncit : 1, sizeof(*pairs));
    unsigned kept = 0;
    for (size_t e = 0, c = (size_t)cits + 1; e < ncit; e++, c = (size_t)cg_json_skip(&j, (int)c))
        if (citation_valid(req, &j, (int)c, pairs[kept]))
            newnum[e] = ++kept;
    size_t rn;
    char *rs = cg_json_strdup(&j, resp, &rn);
    cg_buf_t text = {0};
    renumber(rs, rn, newnum, ncit, &text);
    put_fixed(&j, resp, cits, &text, (const cited_t(*)[2])pairs, kept, out);
    *removed = (unsigned)ncit - kept;
    for (unsigned e = 0; e < kept; e++) {
        free(pairs[e][0].own);
        free(pairs[e][1].own);
    }
    free(pairs);
    free(rs);
    cg_buf_free(&text);
    free(newnum);
    ok = true;
out:
    cg_json_free(&j);
    return ok;
}

/* Checks one answer; a body's at its content, a held stream's before its
 * replay. */
static void check(cg_xform_t *x, structured_choice_t *sc, const char *text, size_t n)
{
    unsigned removed = 0;
    sc->fix_set = fix(x->req, text, n, &sc->fixed, &removed);
    if (sc->fix_set) {
        x->stats.structured = true;
        x->stats.citations_removed += removed;
    }
}

static void held_content(cg_xform_t *x, cg_choice_t *ch, cg_span_t raw)
{
    structured_choice_t *sc = ch->state;
    char *dst = cg_buf_reserve(&sc->text, raw.n);
    sc->text.len += cg_json_unescape(raw.p, raw.n, dst);
}

static void held_end(cg_xform_t *x)
{
    for (size_t i = 0; i < x->nchoices; i++) {
        structured_choice_t *sc = x->choices[i].state;
        check(x, sc, sc->text.p ? sc->text.p : "", sc->text.len);
        cg_buf_free(&sc->text);
    }
}

/* The first content of a choice carries the whole corrected answer, later
 * ones none; content that is not a structured answer goes out as it came. */
static void on_content(cg_xform_t *x, cg_choice_t *ch, int content)
{
    structured_choice_t *sc = ch->state;
    if (x->body_mode && !sc->fix_set) {
        size_t n;
        char *text = cg_json_strdup(&x->json, content, &n);
        check(x, sc, text, n);
        free(text);
    }
    if (!sc->fix_set)
        return;
    cg__emit_drop_content(x, content);
    if (!sc->fix_sent) {
        /* The data went out through the opening quote: the answer goes there. */
        cg_out_t *o = x->out;
        size_t from = o->arena.len;
        cg_json_put_escaped(&o->arena, sc->fixed.p, sc->fixed.len);
        cg__emit_arena_since(o, from);
        sc->fix_sent = true;
    }
}

const cg_profile_t cg__profile_structured = {
    .name = "structured",
    .transforms = true,
    .holds_stream = true,
    .aliases = true,
    .choice_size = sizeof(structured_choice_t),
    .choice_free = choice_free,
    .content = on_content,
    .held_content = held_content,
    .held_end = held_end,
};
