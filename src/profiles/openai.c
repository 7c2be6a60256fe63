/*
 * Profile "openai" (SPEC §7): the content rewrite of openwebui, plus the
 * standard url_citation annotations the OpenAI SDKs read. Offsets are UTF-16
 * code units of the final content, which is how JavaScript indexes strings
 * (the SDKs hand the content and the indices to the application unchanged).
 * Citations without a URL cannot be url_citations: they go in a top-level
 * "citations" list of SOURCE objects.
 */
#include "core/xform_int.h"

#include <inttypes.h>
#include <stdint.h>
#include <string.h>

static void put_annotation(cg_buf_t *b, const cg_annot_t *a)
{
    cg_buf_puts(b, "{\"type\":\"url_citation\",\"url_citation\":{\"url\":\"");
    cg_buf_puts(b, a->cite->link); /* already escaped for JSON */
    cg_buf_puts(b, "\",\"title\":");
    cg_json_put_cstr(b, a->cite->title);
    cg_buf_printf(b, ",\"start_index\":%" PRIu64 ",\"end_index\":%" PRIu64 "}}", a->start, a->end);
}

/* Writes one choice's annotations, comma separated; returns how many. In
 * the stream's one annotations chunk, those that would take its line past
 * CG_XFORM_LINE_MAX (SPEC §6) are left out: the links stay in the content.
 * line_from is where that line starts in b, or SIZE_MAX for a body. */
static size_t put_choice_annotations(const cg_xform_t *x, size_t choice, cg_buf_t *b, bool comma,
                                     size_t line_from)
{
    size_t n = 0;
    for (size_t i = 0; i < x->nannots; i++) {
        if (x->annots[i].choice != choice)
            continue;
        size_t before = b->len;
        if (n || comma)
            cg_buf_putc(b, ',');
        put_annotation(b, &x->annots[i]);
        if (line_from != SIZE_MAX && b->len - line_from > CG_XFORM_LINE_MAX - 1024) {
            b->len = before;
            break;
        }
        n++;
    }
    return n;
}

static size_t count_annotations(const cg_xform_t *x, size_t choice)
{
    size_t n = 0;
    for (size_t i = 0; i < x->nannots; i++)
        n += x->annots[i].choice == choice;
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
    if (c->url)
        return;
    if (s->b) {
        if (s->n)
            cg_buf_putc(s->b, ',');
        cg__openwebui_put_source_cut(x, s->b, c, s->max_doc);
    }
    s->n++;
}

/* The referenced citations without a URL: how many. */
static size_t count_nonurl(cg_xform_t *x)
{
    nonurl_t s = {NULL, 0, SIZE_MAX};
    cg__xform_each_cited(x, put_nonurl, &s);
    return s.n;
}

/* Their `"citations":[SOURCE…]` member. In the stream's one chunk
 * (line_from: where its line starts in b) the snippets are cut shorter
 * until the line fits in CG_XFORM_LINE_MAX (SPEC §6); a body has no limit. */
static void put_nonurl_member(cg_xform_t *x, cg_buf_t *b, size_t line_from)
{
    size_t from = b->len;
    for (size_t max_doc = SIZE_MAX;; max_doc = max_doc == SIZE_MAX ? x->cfg.max_doc_bytes / 2 : max_doc / 2) {
        b->len = from;
        nonurl_t s = {b, 0, max_doc};
        cg_buf_puts(b, "\"citations\":[");
        cg__xform_each_cited(x, put_nonurl, &s);
        cg_buf_putc(b, ']');
        if (line_from == SIZE_MAX || b->len - line_from <= CG_XFORM_LINE_MAX - 64 || max_doc == 0)
            return;
    }
}

bool cg__openai_stream_end(cg_xform_t *x)
{
    size_t nonurl = count_nonurl(x);
    if (x->nannots == 0 && nonurl == 0)
        return false;
    x->stats.citations_emitted += cg__xform_each_cited(x, NULL, NULL);
    cg_out_t *o = x->out;
    cg_buf_t *b = &o->arena;
    size_t from = b->len;
    cg__xform_chunk_open(x, b);
    cg_buf_puts(b, ",\"choices\":[");
    bool first = true;
    for (size_t i = 0; i < x->nchoices; i++) {
        if (count_annotations(x, i) == 0)
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
    cg__out_arena_since(o, from);
    x->stats.events_out++;
    return true;
}

/* Called right after a body choice's content: its annotations become the
 * message's last member, or join an "annotations" array that follows the
 * content. One that precedes the content has already gone out unchanged. */
void cg__openai_body_message(cg_xform_t *x, int msg, size_t choice)
{
    const cg_json_t *j = &x->json;
    if (cg_json_type(j, msg) != JSMN_OBJECT || count_annotations(x, choice) == 0)
        return;
    int ann = cg_json_get(j, msg, "annotations");
    int content = cg_json_get(j, msg, "content");
    if (ann >= 0 && (cg_json_type(j, ann) != JSMN_ARRAY || ann < content))
        return;
    cg_out_t *o = x->out;
    int close = ann >= 0 ? ann : msg;
    cg__xform_put_until(x, cg_json_end(j, close) - 1);
    size_t from = o->arena.len;
    if (ann >= 0) {
        put_choice_annotations(x, choice, &o->arena, j->tok[ann].size > 0, SIZE_MAX);
    } else {
        cg_buf_puts(&o->arena, ",\"annotations\":[");
        put_choice_annotations(x, choice, &o->arena, false, SIZE_MAX);
        cg_buf_putc(&o->arena, ']');
    }
    cg__out_arena_since(o, from);
    x->changed = true;
}

void cg__openai_body_end(cg_xform_t *x, bool comma)
{
    const cg_json_t *j = &x->json;
    x->stats.citations_emitted += cg__xform_each_cited(x, NULL, NULL);
    if (cg_json_get(j, 0, "citations") >= 0 || count_nonurl(x) == 0)
        return;
    cg_out_t *o = x->out;
    size_t from = o->arena.len;
    if (comma)
        cg_buf_putc(&o->arena, ',');
    put_nonurl_member(x, &o->arena, SIZE_MAX);
    cg__out_arena_since(o, from);
}
