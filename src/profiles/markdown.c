/*
 * Profile "markdown" (SPEC §7): plain Markdown, for any chat UI that renders
 * it (LibreChat, SillyTavern, a terminal). A reference becomes [N](URL), or
 * [N] when its citation has no URL, N the citation's position as in webchat
 * (webchat.h); a choice that cites ends with a Sources list:
 *
 *     \n\n**Sources**\n1. [TITLE](URL)\n2. TITLE
 *
 * one line per position it cites, in position order.
 *
 * Unlike webchat, adjacent references get no U+200B between them. By
 * CommonMark an inline link ends at its ")", so [1](u)[2](v) is two links
 * and nothing after one can join it; and [N] without a URL is text, since
 * the Sources list is a list, not link reference definitions ([1][2] is a
 * reference link only when a definition [2]: … exists). The rewrite keeps
 * the brackets the upstream wrote, so it gives the text no Markdown meaning
 * it did not have ("![doc1]" was an image already, and stays one).
 *
 * An annotation-sourced citation (SPEC §6) takes its position where its
 * annotation arrives, and a line in that choice's Sources. Citations the
 * answer references only before the citations were known still get a
 * line: the next positions, in first-reference order, in the first choice
 * that has content.
 *
 * State: webchat's position table (two 2-byte entries per citation, at most
 * CG_CITE_MAX), and per choice a bitmap of its positions (125 bytes, once it
 * cites) and whether it has content.
 */
#include "webchat.h"

#include "core/emit.h"

#include <stdlib.h>
#include <string.h>

typedef struct markdown {
    cg_positions_t pos;
    bool adopted; /* the citations without a rewritten reference have positions */
} markdown_t;

typedef struct markdown_choice {
    uint8_t *used; /* bitmap of the positions this choice cites, or NULL */
    bool wrote;    /* it has content */
} markdown_choice_t;

static void state_free(void *state)
{
    markdown_t *s = state;
    cg__webchat_positions_free(&s->pos);
}

static void choice_free(void *state)
{
    markdown_choice_t *mc = state;
    free(mc->used);
}

static bool on_text(cg_xform_t *x, cg_choice_t *ch, const char *p, size_t n)
{
    markdown_choice_t *mc = ch->state;
    mc->wrote = true;
    return false;
}

/* `[N](LINK)` or `[N]`. A reference the stream could not record (its table
 * of distinct references is full) stays as written, as in webchat. */
static bool on_ref(cg_xform_t *x, cg_choice_t *ch, const cg_refrec_t *rec, const cg_citation_t *c,
                   cg_span_t text)
{
    if (rec == NULL)
        return false;
    markdown_t *s = x->state;
    markdown_choice_t *mc = ch->state;
    size_t pos = cg__webchat_position(&s->pos, x, c);
    cg_out_t *o = x->out;
    size_t from = o->arena.len;
    if (c->link)
        cg_buf_printf(&o->arena, "[%zu](%s)", pos, c->link); /* link: escaped for JSON */
    else
        cg_buf_printf(&o->arena, "[%zu]", pos);
    cg__emit_arena_since(o, from);
    cg__webchat_use(&mc->used, pos);
    mc->wrote = true;
    return true;
}

/* An annotation's citation (SPEC §6): no link in the text, but its position
 * and its Sources line in this choice, as if it had been referenced here. */
static void on_mention(cg_xform_t *x, cg_choice_t *ch, const cg_citation_t *c)
{
    markdown_t *s = x->state;
    markdown_choice_t *mc = ch->state;
    cg__webchat_use(&mc->used, cg__webchat_position(&s->pos, x, c));
}

typedef struct adopt {
    markdown_t *s;
    markdown_choice_t *into;
} adopt_t;

static void adopt_one(cg_xform_t *x, const cg_citation_t *c, void *arg)
{
    adopt_t *a = arg;
    if (!cg__webchat_position_known(&a->s->pos, x, c))
        cg__webchat_use(&a->into->used, cg__webchat_position(&a->s->pos, x, c));
}

/* Once, into the first choice that has content: the next positions for the
 * citations the answer references that no rewritten reference numbered. */
static void adopt_unnumbered(cg_xform_t *x, markdown_choice_t *mc)
{
    markdown_t *s = x->state;
    if (s->adopted || !mc->wrote)
        return;
    s->adopted = true;
    adopt_t a = {s, mc};
    cg__emit_each_cited(x, adopt_one, &a);
}

/* TITLE with \ ` * _ [ ] < > backslash-escaped, so Markdown shows it as it is. */
static void put_title(cg_buf_t *b, const char *s)
{
    for (; *s; s++) {
        if (strchr("\\`*_[]<>", *s))
            cg_buf_putc(b, '\\');
        cg_buf_putc(b, *s);
    }
}

/* `N. [TITLE](URL)` or `N. TITLE`, as Markdown text (not yet JSON-escaped). */
static void put_line(cg_buf_t *b, size_t pos, const cg_citation_t *c)
{
    cg_buf_printf(b, "%zu. ", pos);
    if (c->url == NULL) {
        put_title(b, c->title);
        return;
    }
    cg_buf_putc(b, '[');
    put_title(b, c->title);
    cg_buf_puts(b, "](");
    cg_url_put_link(b, c->url);
    cg_buf_putc(b, ')');
}

/* A choice's Sources block, JSON-escaped for inside its content. */
static void put_sources(const cg_xform_t *x, const markdown_choice_t *mc, cg_buf_t *b)
{
    const markdown_t *s = x->state;
    cg_buf_t md = {0};
    cg_buf_puts(&md, "\n\n**Sources**");
    for (size_t pos = 1; pos <= s->pos.n; pos++) {
        if (!cg__webchat_uses(mc->used, pos))
            continue;
        cg_buf_putc(&md, '\n');
        put_line(&md, pos, cg__webchat_position_cite(&s->pos, x, pos));
    }
    cg_json_put_escaped(b, md.p, md.len);
    cg_buf_free(&md);
}

/* Each citing choice's Sources, in one content delta unless it is too long
 * for one line (then in several, SPEC §6 rule 5). */
static bool stream_end(cg_xform_t *x)
{
    markdown_t *s = x->state;
    for (size_t i = 0; i < x->nchoices && !s->adopted; i++)
        adopt_unnumbered(x, x->choices[i].state);
    if (s->pos.n == 0)
        return false;
    cg_buf_t esc = {0};
    for (size_t i = 0; i < x->nchoices; i++) {
        const markdown_choice_t *mc = x->choices[i].state;
        if (mc->used == NULL)
            continue;
        esc.len = 0;
        put_sources(x, mc, &esc);
        cg__webchat_put_content(x, i, esc.p, esc.len);
    }
    cg_buf_free(&esc);
    x->stats.citations_emitted += s->pos.n;
    return true;
}

/* The Sources block ends a body message's own content. */
static void body_message(cg_xform_t *x, cg_choice_t *ch, int msg)
{
    markdown_choice_t *mc = ch->state;
    adopt_unnumbered(x, mc);
    if (mc->used == NULL)
        return;
    size_t from = x->out->arena.len;
    put_sources(x, mc, &x->out->arena);
    cg__emit_arena_since(x->out, from);
}

static void body_end(cg_xform_t *x, bool comma)
{
    const markdown_t *s = x->state;
    x->stats.citations_emitted += s->pos.n;
}

const cg_profile_t cg__profile_markdown = {
    .name = "markdown",
    .transforms = true,
    .tracked = true,
    .state_size = sizeof(markdown_t),
    .choice_size = sizeof(markdown_choice_t),
    .state_free = state_free,
    .choice_free = choice_free,
    .text = on_text,
    .mention = on_mention,
    .ref = on_ref,
    .stream_end = stream_end,
    .body_message = body_message,
    .body_end = body_end,
};
