/*
 * Citation tracking (SPEC §8). Everything comes from the transformer's
 * reference table (distinct references in first-appearance order, with
 * their counts) and its citation table, both already bounded per stream.
 */
#include "citegate/track.h"

#include "xform_int.h"

#include <stdlib.h>
#include <string.h>

#define DETAIL_MAX 100 /* citations described per answer (log lines stay short) */

static const char DONT_KNOW[] = "I do not know";

static bool starts_dont_know(const cg_xform_t *x)
{
    if (x->nchoices == 0)
        return false;
    const cg_choice_t *ch = &x->choices[0];
    return ch->headlen >= sizeof(DONT_KNOW) - 1 &&
           memcmp(ch->head, DONT_KNOW, sizeof(DONT_KNOW) - 1) == 0;
}

static void put_label(const cg_xform_t *x, cg_buf_t *b, const cg_citation_t *c)
{
    cg_buf_printf(b, x->style == CG_REF_DOC ? "\"doc%u\"" : "\"%u\"", c->id);
}

/* References per citation (indexed like the citation table). */
static uint32_t *count_refs(const cg_xform_t *x, cg_track_t *t)
{
    uint32_t *per = cg_xcalloc(x->cites.n ? x->cites.n : 1, sizeof(uint32_t));
    double score_sum = 0;
    unsigned scored = 0;
    cg_buf_putc(&t->cited_ids, '[');
    for (size_t i = 0; i < x->nrefs; i++) {
        if (!cg__refrec_cites(x, &x->refs[i]))
            continue; /* a form the stream does not use */
        const cg_citation_t *c = cg_cites_find(&x->cites, cg__refrec_n(&x->refs[i]));
        if (c == NULL)
            continue;
        size_t k = (size_t)(c - x->cites.v);
        if (per[k] == 0) {
            if (t->cited++)
                cg_buf_putc(&t->cited_ids, ',');
            put_label(x, &t->cited_ids, c);
            if (c->has_score) {
                score_sum += c->score;
                scored++;
            }
        }
        per[k] += x->refs[i].count;
        t->references += x->refs[i].count;
    }
    cg_buf_putc(&t->cited_ids, ']');
    t->avg_score = scored ? score_sum / scored : -1;
    return per;
}

static void describe(const cg_xform_t *x, const uint32_t *per, cg_track_t *t)
{
    cg_buf_putc(&t->detail, '[');
    for (size_t k = 0; k < x->cites.n && k < DETAIL_MAX; k++) {
        if (k)
            cg_buf_putc(&t->detail, ',');
        cg_buf_puts(&t->detail, "{\"id\":");
        put_label(x, &t->detail, &x->cites.v[k]);
        cg_buf_printf(&t->detail, ",\"was_cited\":%s,\"citation_density\":",
                      per[k] ? "true" : "false");
        cg_json_put_double(&t->detail, t->references ? (double)per[k] / (double)t->references : 0);
        cg_buf_putc(&t->detail, '}');
    }
    cg_buf_putc(&t->detail, ']');
}

void cg_track_answer(const cg_xform_t *x, cg_track_t *t)
{
    memset(t, 0, sizeof(*t));
    t->tracked = x->cfg.profile->tracked;
    if (!t->tracked)
        return;
    t->skipped = starts_dont_know(x);
    if (t->skipped)
        return;
    /* References of a form the stream does not use never name a citation;
     * a mention (an annotation's citation) counts as one reference. */
    t->available = x->cites_set ? (unsigned)x->cites.n : 0;
    if (t->available == 0) {
        cg_buf_puts(&t->cited_ids, "[]");
        cg_buf_puts(&t->detail, "[]");
        t->avg_score = -1;
        return;
    }
    uint32_t *per = count_refs(x, t);
    describe(x, per, t);
    free(per);
    t->rate = (double)t->cited / (double)t->available;
}

void cg_track_free(cg_track_t *t)
{
    cg_buf_free(&t->cited_ids);
    cg_buf_free(&t->detail);
}
