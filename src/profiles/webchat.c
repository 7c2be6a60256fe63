/*
 * Profile "webchat" (SPEC §7): Bot Framework Web Chat's citation contract.
 * References become dense [P] positions, the answer ends with Markdown
 * reference definitions, and one schema.org Message entity carries a Claim
 * per position. Both are written from the same position table, so the
 * Markdown and the entity cannot disagree.
 *
 * State: the position table (a citation pointer per position and a 2-byte
 * position per citation, at most CG_CITE_MAX each), and per choice the last
 * byte written and, once it cites, a bitmap of its positions.
 */
#include "core/emit.h"
#include "core/xform_int.h"

#include <stdlib.h>
#include <string.h>

#define ABSTRACT_MAX 200            /* characters, as Web Chat's own samples */
#define ZWSP         "\xE2\x80\x8B" /* U+200B ZERO WIDTH SPACE */

/* Citations are kept by their place in x->cites, and the tables are sized
 * for the most the citation table can hold: a dialect view adds citations
 * while the stream runs, and the table may move. */
typedef struct webchat {
    uint16_t *bypos; /* place of the citation of position i + 1 */
    uint16_t *pos;   /* position of citation i (of x->cites), 0: none yet */
    size_t npos;
} webchat_t;

typedef struct webchat_choice {
    uint8_t *used;  /* bitmap of the positions this choice cites, or NULL */
    bool after_ref; /* the last content bytes were a badge */
    char last;      /* the last content byte written */
} webchat_choice_t;

static void state_free(void *state)
{
    webchat_t *s = state;
    free(s->bypos);
    free(s->pos);
}

static void choice_free(void *state)
{
    webchat_choice_t *wc = state;
    free(wc->used);
}

static bool uses(const webchat_choice_t *wc, size_t pos)
{
    return wc->used && (wc->used[(pos - 1) / 8] & (1u << ((pos - 1) % 8)));
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

/* The position of citation c, given in first-reference order. */
static size_t position(cg_xform_t *x, const cg_citation_t *c)
{
    webchat_t *s = x->state;
    if (s->pos == NULL) {
        s->pos = cg_xcalloc(CG_CITE_MAX, sizeof(*s->pos));
        s->bypos = cg_xcalloc(CG_CITE_MAX, sizeof(*s->bypos));
    }
    size_t k = (size_t)(c - x->cites.v);
    if (s->pos[k] == 0) {
        s->bypos[s->npos++] = (uint16_t)k;
        s->pos[k] = (uint16_t)s->npos;
    }
    return s->pos[k];
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
    size_t pos = position(x, c);
    cg_out_t *o = x->out;
    size_t from = o->arena.len;
    if (wc->last == ']')
        cg_buf_puts(&o->arena, ZWSP);
    cg_buf_printf(&o->arena, "[%zu]", pos);
    cg__emit_arena_since(o, from);
    wc->after_ref = true;
    wc->last = ']';
    if (wc->used == NULL)
        wc->used = cg_xcalloc((CG_CITE_MAX + 7) / 8, 1);
    wc->used[(pos - 1) / 8] |= (uint8_t)(1u << ((pos - 1) % 8));
    return true;
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
    for (size_t pos = 1; pos <= s->npos; pos++) {
        if (!uses(wc, pos))
            continue;
        cg_buf_puts(&md, md.len ? "\n" : "\n\n");
        put_def(&md, pos, &x->cites.v[s->bypos[pos - 1]]);
    }
    cg_json_put_escaped(b, md.p, md.len);
    cg_buf_free(&md);
}

static void put_claim(cg_buf_t *b, size_t pos, const cg_citation_t *c, bool text)
{
    cg_buf_printf(b,
                  "{\"@type\":\"Claim\",\"position\":\"%zu\",\"appearance\":"
                  "{\"@type\":\"DigitalDocument\",\"name\":",
                  pos);
    cg_json_put_cstr(b, c->title);
    if (c->link) {
        cg_buf_puts(b, ",\"url\":\"");
        cg_buf_puts(b, c->link); /* already escaped for JSON */
        cg_buf_putc(b, '"');
    }
    cg_buf_puts(b, ",\"abstract\":\"");
    cg_buf_t abs = {0};
    put_abstract(c, &abs);
    cg_json_put_escaped(b, abs.p, abs.len);
    cg_buf_free(&abs);
    cg_buf_putc(b, '"');
    /* "text" is always there: Web Chat's citation dialog fails without it. */
    cg_buf_puts(b, ",\"text\":");
    cg_json_put_cstr(b, text ? c->content : "");
    cg_buf_puts(b, ",\"encodingFormat\":\"text/markdown\"}}");
}

/* The schema.org Message thing of the answer; "text" is optional. */
static void put_message(const cg_xform_t *x, cg_buf_t *b, bool text)
{
    const webchat_t *s = x->state;
    cg_buf_puts(b, "{\"@context\":\"https://schema.org\",\"@id\":\"\",\"@type\":\"Message\","
                   "\"type\":\"https://schema.org/Message\",\"keywords\":[\"AIGeneratedContent\"],"
                   "\"citation\":[");
    for (size_t pos = 1; pos <= s->npos; pos++) {
        if (pos > 1)
            cg_buf_putc(b, ',');
        put_claim(b, pos, &x->cites.v[s->bypos[pos - 1]], text);
    }
    cg_buf_puts(b, "]}");
}

/* Each citing choice's definitions in content chunks, then the entity. */
static bool stream_end(cg_xform_t *x)
{
    const webchat_t *s = x->state;
    if (s->npos == 0)
        return false;
    cg_out_t *o = x->out;
    cg_buf_t *b = &o->arena;
    size_t from = b->len;
    cg_buf_t defs = {0};
    for (size_t i = 0; i < x->nchoices; i++) {
        const webchat_choice_t *wc = x->choices[i].state;
        if (wc->used == NULL)
            continue;
        defs.len = 0;
        put_defs(x, wc, &defs);
        /* Many long definitions go out in several content chunks (SPEC §6). */
        for (size_t at = 0; at < defs.len;) {
            size_t take = cg_json_safe_cut(defs.p + at, defs.len - at, CG_XFORM_SPLIT_CHUNK);
            cg__emit_content_open(x, b, i);
            cg_buf_put(b, defs.p + at, take);
            cg_buf_puts(b, cg__emit_content_close);
            x->stats.events_out++;
            at += take;
        }
    }
    cg_buf_free(&defs);
    size_t line = b->len;
    cg__emit_chunk_open(x, b);
    cg_buf_puts(b, ",\"choices\":[],\"entities\":[");
    size_t entity = b->len;
    put_message(x, b, true);
    if (b->len - line > CG_XFORM_LINE_MAX - 64) {
        /* Too long for one SSE line (SPEC §6): the snippets are emptied;
         * name, url and abstract remain, so the badges still work. */
        b->len = entity;
        put_message(x, b, false);
    }
    cg_buf_puts(b, "]}\n\n");
    cg__emit_arena_since(o, from);
    x->stats.events_out++;
    x->stats.citations_emitted += s->npos;
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
    if (s->npos == 0)
        return;
    cg_out_t *o = x->out;
    size_t from = o->arena.len;
    cg_buf_puts(&o->arena, comma ? ",\"entities\":[" : "\"entities\":[");
    put_message(x, &o->arena, true);
    cg_buf_putc(&o->arena, ']');
    cg__emit_arena_since(o, from);
    x->stats.citations_emitted += s->npos;
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
    .stream_end = stream_end,
    .body_message = body_message,
    .body_end = body_end,
};
