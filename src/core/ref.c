/*
 * Reference finder: see include/citegate/ref.h.
 *
 * States: IDLE (no candidate), OPEN ("["), WORD (inside the word of a form:
 * "[d", "[do", "[doc", "[c", ... "[citation:"), DIGITS ("[", "[doc" or
 * "[citation:" followed by 1-4 digits). A byte that cannot continue the
 * candidate ends it: the candidate's bytes go out as text and, if that byte
 * is "[", it starts the next candidate (no other byte of a reference prefix
 * is "[", so this is exactly leftmost-match semantics).
 */
#include "citegate/ref.h"

#include <string.h>

enum { IDLE, OPEN, WORD, DIGITS };

void cg_ref_init(cg_ref_t *r, cg_ref_style_t styles)
{
    memset(r, 0, sizeof(*r));
    r->styles = (uint8_t)styles;
}

void cg_ref_set_styles(cg_ref_t *r, cg_ref_style_t styles)
{
    r->styles = (uint8_t)styles;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The word between "[" and the digits of a form with one. */
static const char *word_of(uint8_t kind)
{
    return kind == CG_REF_DOC ? "doc" : "citation:";
}

static int first_digit(cg_ref_t *r, uint8_t kind, char c)
{
    if (!is_digit(c) || !(r->styles & kind))
        return IDLE;
    r->kind = kind;
    r->digits = 1;
    r->num = (unsigned)(c - '0');
    return DIGITS;
}

/* Next state after byte c, or IDLE when c cannot continue the candidate. */
static int step(cg_ref_t *r, char c)
{
    switch (r->state) {
    case OPEN:
        if (c == 'd' || c == 'c') {
            r->kind = c == 'd' ? CG_REF_DOC : CG_REF_CITATION;
            r->word = 1;
            return (r->styles & r->kind) ? WORD : IDLE;
        }
        return first_digit(r, CG_REF_NUMERIC, c);
    case WORD: {
        const char *w = word_of(r->kind);
        if (w[r->word] == '\0')
            return first_digit(r, r->kind, c);
        if (c != w[r->word])
            return IDLE;
        r->word++;
        return WORD;
    }
    case DIGITS:
        if (is_digit(c) && r->digits < 4) {
            r->digits++;
            r->num = r->num * 10 + (unsigned)(c - '0');
            return DIGITS;
        }
        return IDLE;
    }
    return IDLE;
}

/* Emits the candidate: held bytes, then s[from..to) of the current input. */
static void emit_candidate(cg_ref_t *r, const char *s, size_t from, size_t to,
                           const cg_ref_sink_t *sink)
{
    if (r->nheld)
        sink->text(sink->ctx, r->held, r->nheld, false);
    if (to > from)
        sink->text(sink->ctx, s + from, to - from, true);
    r->nheld = 0;
    r->state = IDLE;
}

static void emit_ref(cg_ref_t *r, const char *s, size_t from, size_t to,
                     const cg_ref_sink_t *sink)
{
    char text[CG_REF_HELD_MAX + 1];
    size_t len = r->nheld;
    memcpy(text, r->held, len);
    memcpy(text + len, s + from, to - from);
    len += to - from;
    r->nheld = 0;
    r->state = IDLE;
    sink->ref(sink->ctx, (cg_ref_style_t)r->kind, r->num, text, len);
}

void cg_ref_feed(cg_ref_t *r, const char *s, size_t n, const cg_ref_sink_t *sink)
{
    size_t i = 0;
    size_t text_from = 0; /* start of bytes not yet handed out (IDLE) */
    size_t cand = 0;      /* start of the candidate's bytes in s */
    while (i < n) {
        if (r->state == IDLE) {
            const char *open = memchr(s + i, '[', n - i);
            if (open == NULL) {
                i = n;
                break;
            }
            i = (size_t)(open - s);
            if (i > text_from)
                sink->text(sink->ctx, s + text_from, i - text_from, true);
            r->state = OPEN;
            cand = i++;
            continue;
        }
        char c = s[i];
        if (r->state == DIGITS && c == ']') {
            emit_ref(r, s, cand, i + 1, sink);
            text_from = ++i;
            continue;
        }
        int next = step(r, c);
        if (next != IDLE) {
            r->state = (uint8_t)next;
            i++;
            continue;
        }
        /* The candidate cannot become a reference: it is text. */
        emit_candidate(r, s, cand, i, sink);
        text_from = i;
        if (c == '[') {
            r->state = OPEN;
            cand = i++;
        }
    }
    if (r->state == IDLE) {
        if (n > text_from)
            sink->text(sink->ctx, s + text_from, n - text_from, true);
        return;
    }
    /* Keep the candidate's bytes from this input for the next one. */
    memcpy(r->held + r->nheld, s + cand, n - cand);
    r->nheld = (uint8_t)(r->nheld + (n - cand));
}

void cg_ref_flush(cg_ref_t *r, const cg_ref_sink_t *sink)
{
    if (r->state != IDLE)
        emit_candidate(r, NULL, 0, 0, sink);
}
