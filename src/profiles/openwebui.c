/*
 * Profile "openwebui": Open WebUI source events (SPEC §7). References with a
 * URL become Markdown links; after the last upstream event, one chunk per
 * referenced citation carries {"type":"source","data":SOURCE} in its
 * top-level "event" member. A body gets a top-level "sources" array.
 */
#include "openwebui.h"

#include "core/emit.h"

#include <stdint.h>
#include <string.h>

static void put_label(const cg_xform_t *x, cg_buf_t *b, const cg_citation_t *c)
{
    cg_buf_printf(b, x->style == CG_REF_DOC ? "doc%u" : "%u", c->id);
}

/* "[LABEL] TITLE" as a JSON string. */
static void put_name(const cg_xform_t *x, cg_buf_t *b, const cg_citation_t *c)
{
    cg_buf_puts(b, "\"[");
    put_label(x, b, c);
    cg_buf_puts(b, "] ");
    cg_json_put_escaped(b, c->title, strlen(c->title));
    cg_buf_putc(b, '"');
}

static void put_member(cg_buf_t *b, const char *key, const char *value)
{
    if (value == NULL)
        return;
    cg_buf_printf(b, ",\"%s\":", key);
    cg_json_put_cstr(b, value);
}

void cg__openwebui_put_source(const cg_xform_t *x, cg_buf_t *b, const cg_citation_t *c,
                              size_t max_doc)
{
    cg_buf_puts(b, "{\"source\":{\"id\":\"");
    put_label(x, b, c);
    cg_buf_puts(b, "\",\"name\":");
    put_name(x, b, c);
    put_member(b, "url", c->url);
    cg_buf_puts(b, "},\"document\":[");
    size_t doc = strlen(c->content);
    if (doc > max_doc)
        doc = cg_utf8_cut(c->content, max_doc);
    cg_json_put_str(b, c->content, doc);
    cg_buf_puts(b, "],\"metadata\":[{\"source\":\"");
    put_label(x, b, c);
    cg_buf_putc(b, ':');
    cg_json_put_escaped(b, c->key, strlen(c->key));
    cg_buf_puts(b, "\",\"name\":");
    put_name(x, b, c);
    put_member(b, "source_url", c->url);
    put_member(b, "filepath", c->filepath);
    put_member(b, "chunk_id", c->chunk_id);
    if (c->page)
        cg_buf_printf(b, ",\"page\":%s", c->page);
    cg_buf_putc(b, '}');
    cg_buf_putc(b, ']');
    if (c->has_score && x->cfg.scores) {
        cg_buf_puts(b, ",\"distances\":[");
        cg_json_put_double(b, c->score);
        cg_buf_putc(b, ']');
    }
    cg_buf_putc(b, '}');
}

cg_span_t cg__openwebui_link(cg_xform_t *x, const cg_citation_t *c, cg_span_t text)
{
    if (c->link == NULL)
        return cg_span(NULL, 0);
    cg_out_t *o = x->out;
    size_t from = o->arena.len;
    cg_buf_putc(&o->arena, '[');
    cg_buf_put(&o->arena, text.p, text.n);
    cg_buf_puts(&o->arena, "](");
    cg_buf_puts(&o->arena, c->link);
    cg_buf_putc(&o->arena, ')');
    cg__emit_arena_since(o, from);
    return cg_span(o->arena.p + from, o->arena.len - from);
}

static bool on_ref(cg_xform_t *x, cg_choice_t *ch, const cg_refrec_t *rec, const cg_citation_t *c,
                   cg_span_t text)
{
    return cg__openwebui_link(x, c, text).n > 0;
}

static void put_event(cg_xform_t *x, const cg_citation_t *c, void *arg)
{
    cg_out_t *o = x->out;
    size_t from = o->arena.len;
    cg__emit_chunk_open(x, &o->arena);
    cg_buf_puts(&o->arena, ",\"choices\":[],\"event\":{\"type\":\"source\",\"data\":");
    cg__openwebui_put_source(x, &o->arena, c, SIZE_MAX);
    cg_buf_puts(&o->arena, "}}\n\n");
    cg__emit_arena_since(o, from);
    x->stats.events_out++;
}

static bool stream_end(cg_xform_t *x)
{
    size_t n = cg__emit_each_cited(x, put_event, NULL);
    x->stats.citations_emitted += n;
    return n > 0;
}

static void put_array_item(cg_xform_t *x, const cg_citation_t *c, void *arg)
{
    size_t *count = arg;
    cg_buf_t *b = &x->out->arena;
    if ((*count)++)
        cg_buf_putc(b, ',');
    cg__openwebui_put_source(x, b, c, SIZE_MAX);
}

static void body_end(cg_xform_t *x, bool comma)
{
    cg_out_t *o = x->out;
    size_t from = o->arena.len;
    cg_buf_puts(&o->arena, comma ? ",\"sources\":[" : "\"sources\":[");
    size_t count = 0;
    x->stats.citations_emitted += cg__emit_each_cited(x, put_array_item, &count);
    cg_buf_putc(&o->arena, ']');
    cg__emit_arena_since(o, from);
}

const cg_profile_t cg__profile_openwebui = {
    .name = "openwebui",
    .transforms = true,
    .tracked = true,
    .ref = on_ref,
    .stream_end = stream_end,
    .body_end = body_end,
};
