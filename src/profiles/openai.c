/*
 * Profile "openai" (SPEC §7): the content rewrite of openwebui, plus the
 * standard url_citation annotations the OpenAI SDKs read. Offsets are UTF-16
 * code units of the final content, which is how JavaScript indexes strings
 * (the SDKs hand the content and the indices to the application unchanged).
 * Citations without a URL cannot be url_citations: they go in a top-level
 * "citations" list of SOURCE objects.
 *
 * Citations that an openai upstream named in url_citation annotations
 * reached the client in those annotations, which pass unchanged (SPEC §6):
 * they are not repeated. A dialect view forwards its upstream's url
 * annotations as chat annotations too (src/dialects/responses.c), so a
 * mention never needs one of ours.
 *
 * State: at most MAX_ANNOTATIONS annotations of 32 bytes per stream, and
 * the UTF-16 length of the content written so far per choice.
 */
#include "openwebui.h"

#include "core/emit.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ANNOTATIONS 1024

/* One rewritten reference, in UTF-16 offsets of its choice's content. The
 * citation is kept by index: the table may still grow (and move). */
typedef struct annot {
    size_t cite;
    size_t choice;
    uint64_t start, end;
} annot_t;

typedef struct openai {
    annot_t *annots;
    size_t nannots, annots_cap;
} openai_t;

typedef struct openai_choice {
    uint64_t u16; /* UTF-16 code units of content written so far */
} openai_choice_t;

static void state_free(void *state)
{
    openai_t *s = state;
    free(s->annots);
}

/* UTF-16 code units of JSON string bytes (escapes and UTF-8 as they are in
 * the JSON text): what a JavaScript client counts as the string's length.
 * Callers pass whole escapes: the finder never cuts one, since it only
 * splits before a '['. */
static uint64_t utf16_units(const char *p, size_t n)
{
    uint64_t u = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)p[i];
        if (b == '\\') {
            i += (i + 1 < n && p[i + 1] == 'u') ? 5 : 1;
            u++;
        } else if ((b & 0xC0) != 0x80) {
            u += b >= 0xF0 ? 2 : 1;
        }
    }
    return u;
}

static bool on_text(cg_xform_t *x, cg_choice_t *ch, const char *p, size_t n)
{
    openai_choice_t *oc = ch->state;
    oc->u16 += utf16_units(p, n);
    return false;
}

/* The link of openwebui, and its annotation. */
static void add_annotation(cg_xform_t *x, cg_choice_t *ch, const cg_citation_t *c, uint64_t start)
{
    openai_t *s = x->state;
    const openai_choice_t *oc = ch->state;
    if (s->nannots == MAX_ANNOTATIONS)
        return;
    s->annots = cg_grow(s->annots, s->nannots, &s->annots_cap, 8, sizeof(annot_t));
    s->annots[s->nannots++] =
        (annot_t){(size_t)(c - x->cites.v), (size_t)(ch - x->choices), start, oc->u16};
}

static bool on_ref(cg_xform_t *x, cg_choice_t *ch, const cg_refrec_t *rec, const cg_citation_t *c,
                   cg_span_t text)
{
    cg_span_t link = cg__openwebui_link(x, c, text);
    if (link.n == 0)
        return false;
    openai_choice_t *oc = ch->state;
    uint64_t start = oc->u16;
    oc->u16 += utf16_units(link.p, link.n);
    add_annotation(x, ch, c, start);
    return true;
}

/* The stream's citations came in an openai upstream's annotations, which
 * the client has (see the top). */
static bool forwarded(const cg_xform_t *x)
{
    return x->view == NULL && x->cites.kind == CG_CITES_DIALECT;
}

static void put_annotation(const cg_xform_t *x, cg_buf_t *b, const annot_t *a)
{
    const cg_citation_t *c = &x->cites.v[a->cite];
    cg_buf_puts(b, "{\"type\":\"url_citation\",\"url_citation\":{\"url\":\"");
    cg_buf_puts(b, c->link); /* already escaped for JSON */
    cg_buf_puts(b, "\",\"title\":");
    cg_json_put_cstr(b, c->title);
    cg_buf_printf(b, ",\"start_index\":%" PRIu64 ",\"end_index\":%" PRIu64 "}}", a->start, a->end);
}

/* Writes one choice's annotations, comma separated; returns how many. In
 * the stream's one annotations chunk, those that would take its line past
 * CG_XFORM_LINE_MAX (SPEC §6) are left out: the links stay in the content.
 * line_from is where that line starts in b, or SIZE_MAX for a body. */
static size_t put_choice_annotations(const cg_xform_t *x, size_t choice, cg_buf_t *b, bool comma,
                                     size_t line_from)
{
    const openai_t *s = x->state;
    size_t n = 0;
    for (size_t i = 0; i < s->nannots; i++) {
        if (s->annots[i].choice != choice)
            continue;
        size_t before = b->len;
        if (n || comma)
            cg_buf_putc(b, ',');
        put_annotation(x, b, &s->annots[i]);
        if (line_from != SIZE_MAX && b->len - line_from > CG_XFORM_LINE_MAX - 1024) {
            b->len = before;
            break;
        }
        n++;
    }
    return n;
}

static size_t count_annotations(const openai_t *s, size_t choice)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nannots; i++)
        n += s->annots[i].choice == choice;
    return n;
}

typedef struct nonurl {
    cg_buf_t *b; /* NULL: only count */
    size_t n;
    size_t max_doc;
} nonurl_t;

static void put_nonurl(cg_xform_t *x, const cg_citation_t *c, void *arg)
{
    nonurl_t *s = arg;
    if (c->url || forwarded(x))
        return;
    if (s->b) {
        if (s->n)
            cg_buf_putc(s->b, ',');
        cg__openwebui_put_source(x, s->b, c, s->max_doc);
    }
    s->n++;
}

/* The referenced citations without a URL: how many. */
static size_t count_nonurl(cg_xform_t *x)
{
    nonurl_t s = {NULL, 0, SIZE_MAX};
    cg__emit_each_cited(x, put_nonurl, &s);
    return s.n;
}

/* Their `"citations":[SOURCE…]` member. In the stream's one chunk
 * (line_from: where its line starts in b) the snippets are cut shorter
 * until the line fits in CG_XFORM_LINE_MAX (SPEC §6); a body has no limit. */
static void put_nonurl_member(cg_xform_t *x, cg_buf_t *b, size_t line_from)
{
    size_t from = b->len;
    for (size_t max_doc = SIZE_MAX;;
         max_doc = max_doc == SIZE_MAX ? x->cfg.max_doc_bytes / 2 : max_doc / 2) {
        b->len = from;
        nonurl_t s = {b, 0, max_doc};
        cg_buf_puts(b, "\"citations\":[");
        cg__emit_each_cited(x, put_nonurl, &s);
        cg_buf_putc(b, ']');
        if (line_from == SIZE_MAX || b->len - line_from <= CG_XFORM_LINE_MAX - 64 || max_doc == 0)
            return;
    }
}

/* One chunk: each choice's annotations, and the citations without a URL. */
static bool stream_end(cg_xform_t *x)
{
    const openai_t *s = x->state;
    size_t nonurl = count_nonurl(x);
    if (s->nannots == 0 && nonurl == 0)
        return false;
    x->stats.citations_emitted += cg__emit_each_cited(x, NULL, NULL);
    cg_out_t *o = x->out;
    cg_buf_t *b = &o->arena;
    size_t from = b->len;
    cg__emit_chunk_open(x, b);
    cg_buf_puts(b, ",\"choices\":[");
    bool first = true;
    for (size_t i = 0; i < x->nchoices; i++) {
        if (count_annotations(s, i) == 0)
            continue;
        cg_buf_printf(b, "%s{\"index\":%zu,\"delta\":{\"annotations\":[", first ? "" : ",", i);
        put_choice_annotations(x, i, b, false, from);
        cg_buf_puts(b, "]}}");
        first = false;
    }
    cg_buf_putc(b, ']');
    if (nonurl) {
        cg_buf_putc(b, ',');
        put_nonurl_member(x, b, from);
    }
    cg_buf_puts(b, "}\n\n");
    cg__emit_arena_since(o, from);
    x->stats.events_out++;
    return true;
}

/* A body choice's annotations become the message's last member, or join an
 * "annotations" array that follows the content. One that precedes the
 * content has already gone out unchanged. */
static void body_message(cg_xform_t *x, cg_choice_t *ch, int msg)
{
    const openai_t *s = x->state;
    const cg_json_t *j = &x->json;
    size_t choice = (size_t)(ch - x->choices);
    if (cg_json_type(j, msg) != JSMN_OBJECT || count_annotations(s, choice) == 0)
        return;
    int ann = cg_json_get(j, msg, "annotations");
    int content = cg_json_get(j, msg, "content");
    if (ann >= 0 && (cg_json_type(j, ann) != JSMN_ARRAY || ann < content))
        return;
    cg_out_t *o = x->out;
    int close = ann >= 0 ? ann : msg;
    cg__emit_data_until(x, cg_json_end(j, close) - 1);
    size_t from = o->arena.len;
    if (ann >= 0) {
        put_choice_annotations(x, choice, &o->arena, j->tok[ann].size > 0, SIZE_MAX);
    } else {
        cg_buf_puts(&o->arena, ",\"annotations\":[");
        put_choice_annotations(x, choice, &o->arena, false, SIZE_MAX);
        cg_buf_putc(&o->arena, ']');
    }
    cg__emit_arena_since(o, from);
}

/* A body's citations without a URL, unless it has a "citations" member. */
static void body_end(cg_xform_t *x, bool comma)
{
    const cg_json_t *j = &x->json;
    x->stats.citations_emitted += cg__emit_each_cited(x, NULL, NULL);
    if (cg_json_get(j, 0, "citations") >= 0 || count_nonurl(x) == 0)
        return;
    cg_out_t *o = x->out;
    size_t from = o->arena.len;
    if (comma)
        cg_buf_putc(&o->arena, ',');
    put_nonurl_member(x, &o->arena, SIZE_MAX);
    cg__emit_arena_since(o, from);
}

const cg_profile_t cg__profile_openai = {
    .name = "openai",
    .transforms = true,
    .tracked = true,
    .state_size = sizeof(openai_t),
    .choice_size = sizeof(openai_choice_t),
    .state_free = state_free,
    .text = on_text,
    .ref = on_ref,
    .stream_end = stream_end,
    .body_message = body_message,
    .body_end = body_end,
};
