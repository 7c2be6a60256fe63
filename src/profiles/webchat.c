/*
 * Profile "webchat" (SPEC §7): Bot Framework Web Chat's citation contract.
 * References become dense [P] positions, the answer ends with Markdown
 * reference definitions, and one schema.org Message entity carries a Claim
 * per position. Both are written from the same position table, so the
 * Markdown and the entity cannot disagree.
 *
 * State: the position table (webchat.h: two 2-byte entries per citation, at
 * most CG_CITE_MAX), and per choice the last byte written and, once it
 * cites, a bitmap of its positions (125 bytes).
 */
#include "webchat.h"

#include "core/emit.h"

#include <stdlib.h>
#include <string.h>

#define ABSTRACT_MAX 200            /* characters, as Web Chat's own samples */
#define ZWSP         "\xE2\x80\x8B" /* U+200B ZERO WIDTH SPACE */

typedef struct webchat {
    cg_positions_t pos;
} webchat_t;

typedef struct webchat_choice {
    uint8_t *used;  /* bitmap of the positions this choice cites, or NULL */
    bool after_ref; /* the last content bytes were a badge */
    char last;      /* the last content byte written */
} webchat_choice_t;

/* --- Shared with markdown (webchat.h) -------------------------------------- */

void cg__webchat_positions_free(cg_positions_t *t)
{
    free(t->cite);
    free(t->pos);
}

/* Room for every citation of the table, which may have grown since. */
static void reserve(cg_positions_t *t, size_t n)
{
    if (n <= t->cap)
        return;
    t->pos = cg_xrealloc(t->pos, n * sizeof(*t->pos));
    memset(t->pos + t->cap, 0, (n - t->cap) * sizeof(*t->pos));
    t->cite = cg_xrealloc(t->cite, n * sizeof(*t->cite));
    t->cap = n;
}

size_t cg__webchat_position(cg_positions_t *t, const cg_xform_t *x, const cg_citation_t *c)
{
    reserve(t, x->cites.n);
    size_t k = (size_t)(c - x->cites.v);
    if (t->pos[k] == 0) {
        t->cite[t->n++] = (uint16_t)k;
        t->pos[k] = (uint16_t)t->n;
    }
    return t->pos[k];
}

const cg_citation_t *cg__webchat_position_cite(const cg_positions_t *t, const cg_xform_t *x,
                                               size_t p)
{
    return &x->cites.v[t->cite[p - 1]];
}

bool cg__webchat_position_known(const cg_positions_t *t, const cg_xform_t *x,
                                const cg_citation_t *c)
{
    size_t k = (size_t)(c - x->cites.v);
    return k < t->cap && t->pos[k] != 0;
}

void cg__webchat_use(uint8_t **set, size_t pos)
{
    if (*set == NULL)
        *set = cg_xcalloc((CG_CITE_MAX + 7) / 8, 1);
    (*set)[(pos - 1) / 8] |= (uint8_t)(1u << ((pos - 1) % 8));
}

bool cg__webchat_uses(const uint8_t *set, size_t pos)
{
    return set && (set[(pos - 1) / 8] & (1u << ((pos - 1) % 8)));
}

void cg__webchat_put_content(cg_xform_t *x, size_t index, const char *esc, size_t n)
{
    cg_out_t *o = x->out;
    cg_buf_t *b = &o->arena;
    size_t from = b->len;
    for (size_t at = 0; at < n;) {
        size_t take = cg_json_safe_cut(esc + at, n - at, CG_XFORM_SPLIT_CHUNK);
        cg__emit_content_open(x, b, index);
        cg_buf_put(b, esc + at, take);
        cg_buf_puts(b, cg__emit_content_close);
        x->stats.events_out++;
        at += take;
    }
    cg__emit_arena_since(o, from);
}

/* --- The profile ------------------------------------------------------------ */

static void state_free(void *state)
{
    webchat_t *s = state;
    cg__webchat_positions_free(&s->pos);
}

static void choice_free(void *state)
{
    webchat_choice_t *wc = state;
    free(wc->used);
}

/* Markdown would read a badge followed by "[", "(" or ":" as part of a
 * longer link or a definition; U+200B between them keeps it a badge. */
static bool on_text(cg_xform_t *x, cg_choice_t *ch, const char *p, size_t n)
{
    webchat_choice_t *wc = ch->state;
    bool guard = wc->after_ref && (p[0] == '[' || p[0] == '(' || p[0] == ':');
    if (guard)
        cg__emit_str(x->out, ZWSP);
    wc->after_ref = false;
    wc->last = p[n - 1];
    return guard;
}

/* `[P]`, P the citation's position, with U+200B after a "]" so Markdown
 * doesn't read `[1][2]` (or `[x][2]`) as a link labelled 1 pointing at
 * definition 2. A reference the stream could not record stays as written. */
static bool on_ref(cg_xform_t *x, cg_choice_t *ch, const cg_refrec_t *rec, const cg_citation_t *c,
                   cg_span_t text)
{
    if (rec == NULL)
        return false;
    webchat_choice_t *wc = ch->state;
    webchat_t *s = x->state;
    size_t pos = cg__webchat_position(&s->pos, x, c);
    cg_out_t *o = x->out;
    size_t from = o->arena.len;
    if (wc->last == ']')
        cg_buf_puts(&o->arena, ZWSP);
    cg_buf_printf(&o->arena, "[%zu]", pos);
    cg__emit_arena_since(o, from);
    wc->after_ref = true;
    wc->last = ']';
    cg__webchat_use(&wc->used, pos);
    return true;
}

/* An annotation's citation has no badge in the text, but its position,
 * definition and Claim, as if it had been referenced here. */
static void on_mention(cg_xform_t *x, cg_choice_t *ch, const cg_citation_t *c)
{
    webchat_t *s = x->state;
    webchat_choice_t *wc = ch->state;
    cg__webchat_use(&wc->used, cg__webchat_position(&s->pos, x, c));
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* The snippet with each run of white space as one space, trimmed. */
static void put_collapsed(cg_buf_t *b, const char *s)
{
    size_t from = b->len;
    for (; *s; s++) {
        if (!is_space(*s))
            cg_buf_putc(b, *s);
        else if (b->len > from && b->p[b->len - 1] != ' ')
            cg_buf_putc(b, ' ');
    }
    if (b->len > from && b->p[b->len - 1] == ' ')
        b->len--;
}

/* Byte length of the first `chars` UTF-8 characters of s[0..n). */
static size_t utf8_prefix(const char *s, size_t n, size_t chars)
{
    size_t i = 0;
    for (size_t seen = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80 && seen++ == chars)
            break;
    }
    return i;
}

/* ABSTRACT: the collapsed snippet, or when longer than ABSTRACT_MAX
 * characters its first ABSTRACT_MAX - 1 cut back to a word boundary, then
 * "…". An empty snippet gives the title. */
static void put_abstract(const cg_citation_t *c, cg_buf_t *b)
{
    size_t from = b->len;
    put_collapsed(b, c->content);
    size_t n = b->len - from;
    if (n == 0) {
        cg_buf_puts(b, c->title);
        return;
    }
    size_t keep = utf8_prefix(b->p + from, n, ABSTRACT_MAX);
    if (keep < n) {
        keep = utf8_prefix(b->p + from, n, ABSTRACT_MAX - 1);
        const char *sp = memrchr(b->p + from, ' ', keep);
        if (sp)
            keep = (size_t)(sp - (b->p + from));
        b->len = from + keep;
        cg_buf_puts(b, "\xE2\x80\xA6");
    }
}

/* A Markdown link title between double quotes. */
static void put_md_title(cg_buf_t *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '\\' || ch == '"')
            cg_buf_putc(b, '\\');
        cg_buf_putc(b, (ch == '\r' || ch == '\n' || ch == '\t') ? ' ' : ch);
    }
}

/* One definition line, as Markdown text (not yet escaped for JSON). */
static void put_def(cg_buf_t *b, size_t pos, const cg_citation_t *c)
{
    cg_buf_printf(b, "[%zu]: ", pos);
    if (c->url) {
        cg_url_put_link(b, c->url);
        cg_buf_puts(b, " \"");
        put_md_title(b, c->title, strlen(c->title));
    } else {
        cg_buf_printf(b, "cite:%zu \"", pos);
        cg_buf_t abs = {0};
        put_abstract(c, &abs);
        put_md_title(b, abs.p, abs.len);
        cg_buf_free(&abs);
    }
    cg_buf_putc(b, '"');
}

/* A choice's Markdown definitions, JSON-escaped for inside its content. */
static void put_defs(const cg_xform_t *x, const webchat_choice_t *wc, cg_buf_t *b)
{
    const webchat_t *s = x->state;
    cg_buf_t md = {0};
    for (size_t pos = 1; pos <= s->pos.n; pos++) {
        if (!cg__webchat_uses(wc->used, pos))
            continue;
        cg_buf_puts(&md, md.len ? "\n" : "\n\n");
        put_def(&md, pos, cg__webchat_position_cite(&s->pos, x, pos));
    }
    cg_json_put_escaped(b, md.p, md.len);
    cg_buf_free(&md);
}

/* How much of each Claim the entity carries. It must fit one SSE line
 * (SPEC §6 rule 5): first everything, then without the snippets ("text"
 * empty), then name and abstract cut short and no url, and as many claims
 * as fit, for an answer that cites hundreds of sources with long links. */
typedef enum claim_detail { CLAIM_FULL, CLAIM_NO_TEXT, CLAIM_BRIEF } claim_detail_t;

#define BRIEF_MAX 60 /* characters of a brief claim's name and abstract */

/* s, JSON-escaped, cut to BRIEF_MAX characters and "…" when longer. */
static void put_brief(cg_buf_t *b, const char *s, size_t n)
{
    size_t keep = utf8_prefix(s, n, BRIEF_MAX);
    cg_json_put_escaped(b, s, keep);
    if (keep < n)
        cg_buf_puts(b, "\xE2\x80\xA6");
}

static void put_claim(cg_buf_t *b, size_t pos, const cg_citation_t *c, claim_detail_t d)
{
    cg_buf_printf(b,
                  "{\"@type\":\"Claim\",\"position\":\"%zu\",\"appearance\":"
                  "{\"@type\":\"DigitalDocument\",\"name\":\"",
                  pos);
    if (d == CLAIM_BRIEF)
        put_brief(b, c->title, strlen(c->title));
    else
        cg_json_put_escaped(b, c->title, strlen(c->title));
    cg_buf_putc(b, '"');
    if (c->link && d != CLAIM_BRIEF) {
        cg_buf_puts(b, ",\"url\":\"");
        cg_buf_puts(b, c->link); /* already escaped for JSON */
        cg_buf_putc(b, '"');
    }
    cg_buf_puts(b, ",\"abstract\":\"");
    cg_buf_t abs = {0};
    put_abstract(c, &abs);
    if (d == CLAIM_BRIEF)
        put_brief(b, abs.p, abs.len);
    else
        cg_json_put_escaped(b, abs.p, abs.len);
    cg_buf_free(&abs);
    cg_buf_putc(b, '"');
    /* "text" is always there: Web Chat's citation dialog fails without it. */
    cg_buf_puts(b, ",\"text\":");
    cg_json_put_cstr(b, d == CLAIM_FULL ? c->content : "");
    cg_buf_puts(b, ",\"encodingFormat\":\"text/markdown\"}}");
}

/* The schema.org Message thing of the answer. A brief one stops before the
 * claim that would take it past `end` bytes of b. */
static void put_message(const cg_xform_t *x, cg_buf_t *b, claim_detail_t d, size_t end)
{
    const webchat_t *s = x->state;
    cg_buf_puts(b, "{\"@context\":\"https://schema.org\",\"@id\":\"\",\"@type\":\"Message\","
                   "\"type\":\"https://schema.org/Message\",\"keywords\":[\"AIGeneratedContent\"],"
                   "\"citation\":[");
    for (size_t pos = 1; pos <= s->pos.n; pos++) {
        size_t before = b->len;
        if (pos > 1)
            cg_buf_putc(b, ',');
        put_claim(b, pos, cg__webchat_position_cite(&s->pos, x, pos), d);
        if (d == CLAIM_BRIEF && b->len > end) {
            b->len = before;
            break;
        }
    }
    cg_buf_puts(b, "]}");
}

/* Each citing choice's definitions in content chunks, then the entity. */
static bool stream_end(cg_xform_t *x)
{
    const webchat_t *s = x->state;
    if (s->pos.n == 0)
        return false;
    cg_buf_t defs = {0};
    for (size_t i = 0; i < x->nchoices; i++) {
        const webchat_choice_t *wc = x->choices[i].state;
        if (wc->used == NULL)
            continue;
        defs.len = 0;
        put_defs(x, wc, &defs);
        cg__webchat_put_content(x, i, defs.p, defs.len);
    }
    cg_buf_free(&defs);
    cg_out_t *o = x->out;
    cg_buf_t *b = &o->arena;
    size_t from = b->len;
    size_t line = b->len;
    cg__emit_chunk_open(x, b);
    cg_buf_puts(b, ",\"choices\":[],\"entities\":[");
    size_t entity = b->len;
    size_t end = line + CG_XFORM_LINE_MAX - 64; /* room for the closing bytes */
    for (claim_detail_t d = CLAIM_FULL; d <= CLAIM_BRIEF; d++) {
        b->len = entity;
        put_message(x, b, d, end);
        if (b->len <= end)
            break;
    }
    cg_buf_puts(b, "]}\n\n");
    cg__emit_arena_since(o, from);
    x->stats.events_out++;
    x->stats.citations_emitted += s->pos.n;
    return true;
}

/* The Markdown definitions end a body message's own content. */
static void body_message(cg_xform_t *x, cg_choice_t *ch, int msg)
{
    const webchat_choice_t *wc = ch->state;
    if (wc->used == NULL)
        return;
    size_t from = x->out->arena.len;
    put_defs(x, wc, &x->out->arena);
    cg__emit_arena_since(x->out, from);
}

static void body_end(cg_xform_t *x, bool comma)
{
    const webchat_t *s = x->state;
    if (s->pos.n == 0)
        return;
    cg_out_t *o = x->out;
    size_t from = o->arena.len;
    cg_buf_puts(&o->arena, comma ? ",\"entities\":[" : "\"entities\":[");
    put_message(x, &o->arena, CLAIM_FULL, SIZE_MAX); /* a body has no line to fit */
    cg_buf_putc(&o->arena, ']');
    cg__emit_arena_since(o, from);
    x->stats.citations_emitted += s->pos.n;
}

const cg_profile_t cg__profile_webchat = {
    .name = "webchat",
    .transforms = true,
    .tracked = true,
    .state_size = sizeof(webchat_t),
    .choice_size = sizeof(webchat_choice_t),
    .state_free = state_free,
    .choice_free = choice_free,
    .text = on_text,
    .ref = on_ref,
    .mention = on_mention,
    .stream_end = stream_end,
    .body_message = body_message,
    .body_end = body_end,
};
