/*
 * Profile "webchat" (SPEC §7): Bot Framework Web Chat's citation contract.
 * References become dense [P] positions, the answer ends with Markdown
 * reference definitions, and one schema.org Message entity carries a Claim
 * per position. Both are written from the same position table, so the
 * Markdown and the entity cannot disagree.
 */
#include "core/xform_int.h"

#include <string.h>

#define ABSTRACT_MAX 200 /* characters, as Web Chat's own samples */

static bool uses(const cg_choice_t *ch, size_t pos)
{
    return ch->used && (ch->used[(pos - 1) / 8] & (1u << ((pos - 1) % 8)));
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

void cg__webchat_put_defs(const cg_xform_t *x, const cg_choice_t *ch, cg_buf_t *b)
{
    cg_buf_t md = {0};
    for (size_t pos = 1; pos <= x->npos; pos++) {
        if (!uses(ch, pos))
            continue;
        cg_buf_puts(&md, md.len ? "\n" : "\n\n");
        put_def(&md, pos, x->bypos[pos - 1]);
    }
    cg_json_put_escaped(b, md.p, md.len);
    cg_buf_free(&md);
}

static void put_claim(cg_buf_t *b, size_t pos, const cg_citation_t *c, bool text)
{
    cg_buf_printf(b, "{\"@type\":\"Claim\",\"position\":\"%zu\",\"appearance\":"
                     "{\"@type\":\"DigitalDocument\",\"name\":", pos);
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
    cg_buf_puts(b, "{\"@context\":\"https://schema.org\",\"@id\":\"\",\"@type\":\"Message\","
                   "\"type\":\"https://schema.org/Message\",\"keywords\":[\"AIGeneratedContent\"],"
                   "\"citation\":[");
    for (size_t pos = 1; pos <= x->npos; pos++) {
        if (pos > 1)
            cg_buf_putc(b, ',');
        put_claim(b, pos, x->bypos[pos - 1], text);
    }
    cg_buf_puts(b, "]}");
}

bool cg__webchat_stream_end(cg_xform_t *x)
{
    if (x->npos == 0)
        return false;
    cg_out_t *o = x->out;
    cg_buf_t *b = &o->arena;
    size_t from = b->len;
    cg_buf_t defs = {0};
    for (size_t i = 0; i < x->nchoices; i++) {
        if (x->choices[i].used == NULL)
            continue;
        defs.len = 0;
        cg__webchat_put_defs(x, &x->choices[i], &defs);
        /* Many long definitions go out in several content chunks (SPEC §6). */
        for (size_t at = 0; at < defs.len;) {
            size_t take = cg__json_safe_cut(defs.p + at, defs.len - at, CG_XFORM_SPLIT_CHUNK);
            cg__xform_content_open(x, b, i);
            cg_buf_put(b, defs.p + at, take);
            cg_buf_puts(b, cg__xform_content_close);
            x->stats.events_out++;
            at += take;
        }
    }
    cg_buf_free(&defs);
    size_t line = b->len;
    cg__xform_chunk_open(x, b);
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
    cg__out_arena_since(o, from);
    x->stats.events_out++;
    x->stats.citations_emitted += x->npos;
    return true;
}

void cg__webchat_body_end(cg_xform_t *x, bool comma)
{
    if (x->npos == 0)
        return;
    cg_out_t *o = x->out;
    size_t from = o->arena.len;
    cg_buf_puts(&o->arena, comma ? ",\"entities\":[" : "\"entities\":[");
    put_message(x, &o->arena, true);
    cg_buf_putc(&o->arena, ']');
    cg__out_arena_since(o, from);
    x->stats.citations_emitted += x->npos;
}
