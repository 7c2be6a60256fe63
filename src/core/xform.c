/*
 * Stream transformer: SSE tokenizer -> JSON event view -> per-choice
 * reference finders -> the profile's hooks. See include/citegate/xform.h;
 * the profile interface is include/citegate/profile.h. Nothing here names a
 * profile: what differs between them is in their hooks and properties.
 *
 * Per event the steady path allocates nothing: the token array, segment
 * list and arena keep their capacity between events, and an unchanged event
 * goes out as one span of the caller's input.
 */
#include "citegate/xform.h"

#include "citegate/json.h"
#include "citegate/sse.h"
#include "emit.h"
#include "xform_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- Output segments ------------------------------------------------------ */

void cg_out_free(cg_out_t *o)
{
    free(o->seg);
    cg_buf_free(&o->arena);
    cg_json_store_free(&o->toks[0]);
    cg_json_store_free(&o->toks[1]);
    memset(o, 0, sizeof(*o));
}

size_t cg_out_len(const cg_out_t *o)
{
    size_t n = 0;
    for (size_t i = 0; i < o->nseg; i++)
        n += o->seg[i].n;
    return n;
}

static void out_begin(cg_out_t *o)
{
    o->nseg = 0;
    o->arena.len = 0;
    /* One huge call must not pin its arena for the rest of the stream. */
    if (o->arena.cap > (1u << 20))
        cg_buf_free(&o->arena);
    if (o->arena.cap == 0)
        cg_buf_reserve(&o->arena, 2048);
}

/* A point to roll back to: an event written speculatively that turns out
 * unchanged goes out as its raw bytes instead. */
typedef struct cg_out_mark {
    size_t nseg, last_n, arena_len;
} cg_out_mark_t;

static cg_out_mark_t out_mark(const cg_out_t *o)
{
    cg_out_mark_t m = {o->nseg, o->nseg ? o->seg[o->nseg - 1].n : 0, o->arena.len};
    return m;
}

static void out_rollback(cg_out_t *o, const cg_out_mark_t *m)
{
    o->nseg = m->nseg;
    if (m->nseg)
        o->seg[m->nseg - 1].n = m->last_n;
    o->arena.len = m->arena_len;
}

static void out_end(cg_out_t *o)
{
    for (size_t i = 0; i < o->nseg; i++) {
        if (o->seg[i].p == NULL)
            o->seg[i].p = o->arena.p + o->seg[i].off;
    }
}

/* Every call writes to out and parses with its tokens (cg_out_t). */
static void call_begin(cg_xform_t *x, cg_out_t *out)
{
    out_begin(out);
    x->out = out;
    cg_json_borrow(&x->json, &out->toks[0]);
}

static void call_end(cg_xform_t *x)
{
    cg_json_give_back(&x->json, &x->out->toks[0]);
    out_end(x->out);
}

/* --- Configuration -------------------------------------------------------- */

void cg_xform_cfg_default(cg_xform_cfg_t *cfg, const cg_profile_t *profile)
{
    cfg->profile = profile;
    cfg->style = CG_REF_ANY;
    cfg->max_doc_bytes = 8192;
    cfg->scores = true;
    cfg->max_event = CG_SSE_MAX_EVENT_DEFAULT;
}

/* --- Stream state ---------------------------------------------------------- */

static void settle_style(cg_xform_t *x);

cg_xform_t *cg_xform_new(const cg_xform_cfg_t *cfg, const cg_request_t *req)
{
    cg_xform_t *x = cg_xcalloc(1, sizeof(*x));
    x->cfg = *cfg;
    if (cfg->profile->state_size)
        x->state = cg_xcalloc(1, cfg->profile->state_size);
    x->req = req;
    cg_sse_init(&x->sse, cfg->max_event);
    cg_json_init(&x->json, CG_XFORM_MAX_TOKENS);
    x->style = cfg->style;
    x->auto_style = cfg->style == CG_REF_ANY;
    settle_style(x);
    return x;
}

void cg_xform_free(cg_xform_t *x)
{
    if (x == NULL)
        return;
    cg_sse_free(&x->sse);
    cg_json_free(&x->json);
    cg_cites_free(&x->cites);
    const cg_profile_t *p = x->cfg.profile;
    for (size_t i = 0; i < x->nchoices; i++) {
        if (p->choice_free && x->choices[i].state)
            p->choice_free(x->choices[i].state);
        free(x->choices[i].state);
    }
    if (p->state_free && x->state)
        p->state_free(x->state);
    free(x->state);
    free(x->choices);
    free(x->refs);
    free(x->url_hash);
    free(x->cuts);
    cg_buf_free(&x->hold);
    cg_buf_free(&x->scratch);
    cg_buf_free(&x->tpl);
    cg_buf_free(&x->meta_id);
    cg_buf_free(&x->meta_created);
    cg_buf_free(&x->meta_model);
    if (x->view && x->view->state_free && x->view_state)
        x->view->state_free(x->view_state);
    free(x->view_state);
    if (x->dv) {
        cg_buf_free(&x->dv->synth);
        cg_buf_free(&x->dv->chead);
        for (size_t i = 0; i < x->dv->nkept; i++)
            cg_buf_free(&x->dv->kept[i]);
        free(x->dv->kept);
        cg_buf_free(&x->dv->dbody);
        if (x->dv->evs)
            cg_evs_free(x->dv->evs);
        free(x->dv->evs);
        free(x->dv);
    }
    free(x);
}

void cg_xform_set_dialect(cg_xform_t *x, const cg_dialect_view_t *view,
                          const cg_dialect_req_t *dreq, int64_t created)
{
    x->view = view;
    x->dreq = dreq;
    x->created = created;
    if (x->view == NULL)
        return;
    if (x->view->state_size)
        x->view_state = cg_xcalloc(1, x->view->state_size);
    if (x->dv == NULL)
        x->dv = cg_xcalloc(1, sizeof(*x->dv));
    if (x->view->message && x->dv->evs == NULL) {
        x->dv->evs = cg_xmalloc(sizeof(*x->dv->evs));
        cg_evs_init(x->dv->evs);
        cg_evs_expect(x->dv->evs, x->view->message_size);
    }
    x->meta_created.len = 0;
    cg_buf_printf(&x->meta_created, "%lld", (long long)created);
    /* Every reference these dialects write is [N] (SPEC §6a). Under `auto`
     * that holds even when the request has data_sources, which an upstream
     * of another dialect never reads and so never answers in [docN]. */
    if (x->auto_style) {
        x->auto_style = false;
        x->style = CG_REF_NUMERIC;
    }
}

const cg_xform_stats_t *cg_xform_stats(const cg_xform_t *x)
{
    return &x->stats;
}

const cg_cites_t *cg_xform_cites(const cg_xform_t *x)
{
    return &x->cites;
}

static cg_choice_t *choice_at(cg_xform_t *x, double index)
{
    if (!(index >= 0 && index < CG_XFORM_MAX_CHOICES))
        return NULL;
    size_t i = (size_t)index;
    if (i >= x->nchoices) {
        x->choices = cg_xrealloc(x->choices, (i + 1) * sizeof(cg_choice_t));
        size_t size = x->cfg.profile->choice_size;
        for (size_t k = x->nchoices; k <= i; k++) {
            memset(&x->choices[k], 0, sizeof(cg_choice_t));
            cg_ref_init(&x->choices[k].ref, x->style);
            x->choices[k].state = size ? cg_xcalloc(1, size) : NULL;
        }
        x->nchoices = i + 1;
    }
    return &x->choices[i];
}

static void set_style(cg_xform_t *x, cg_ref_style_t style)
{
    x->style = style;
    for (size_t i = 0; i < x->nchoices; i++)
        cg_ref_set_styles(&x->choices[i].ref, style);
}

/*
 * SPEC §3, CITEGATE_REF_STYLE=auto: doc when the citations come from Azure
 * context (or the request carries Azure data sources, whose answers cite
 * [docN]); otherwise citation when the first reference seen is
 * [citation:N], numeric when it is [N]. What is not known yet stays open:
 * the finders look for every form still possible. A [docN] never decides
 * between the other two: outside Azure context it is no reference.
 */
static cg_ref_style_t auto_style(const cg_xform_t *x)
{
    bool sources = x->req && x->req->sources.n > 0;
    if ((x->req && x->req->has_data_sources) || (x->cites_set && x->cites.kind == CG_CITES_AZURE))
        return CG_REF_DOC;
    cg_ref_style_t rest = x->first_ref ? (cg_ref_style_t)x->first_ref
                                       : (cg_ref_style_t)(CG_REF_NUMERIC | CG_REF_CITATION);
    if (x->cites_set || sources)
        return rest;
    return (cg_ref_style_t)(rest | CG_REF_DOC); /* Azure context may still come */
}

static void settle_style(cg_xform_t *x)
{
    if (!x->auto_style)
        return;
    cg_ref_style_t s = auto_style(x);
    if (s != x->style)
        set_style(x, s);
}

/* Adopts the stream's citations: the first source kind seen wins (SPEC §6). */
static void learn_cites(cg_xform_t *x, const cg_json_t *j, int choices, int msg_key)
{
    cg_cite_opts_t o = {x->cfg.max_doc_bytes, x->cfg.scores};
    if (cg_json_type(j, choices) == JSMN_ARRAY) {
        int n = j->tok[choices].size;
        for (int k = 0, c = choices + 1; k < n; k++, c = cg_json_skip(j, c)) {
            int msg = cg_json_get(j, c, msg_key ? "message" : "delta");
            int ctx = cg_json_get(j, msg, "context");
            if (ctx >= 0 && cg_cites_from_azure(&x->cites, j, ctx, &o) > 0) {
                x->cites_set = true;
                settle_style(x);
                return;
            }
        }
    }
    if (cg_cites_from_web(&x->cites, j, 0, &o) > 0) {
        x->cites_set = true;
        settle_style(x);
    }
}

/* Request-side sources count only when the upstream brought none before
 * the first content. */
static void adopt_request_sources(cg_xform_t *x)
{
    if (x->cites_set || x->req == NULL || x->req->sources.n == 0)
        return;
    cg_cites_copy(&x->cites, &x->req->sources);
    x->cites_set = true;
    settle_style(x);
}

/* --- Annotations (SPEC §6) -------------------------------------------------- */

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211u;
    return h;
}

/* The number of the annotation-sourced citation of this url, or 0. The
 * hashes keep a long list of long urls from costing a compare each. */
static unsigned annotated(const cg_xform_t *x, const char *url, size_t n, uint64_t h)
{
    for (size_t i = 0; i < x->cites.n; i++) {
        const char *key = x->cites.v[i].key;
        if (x->url_hash[i] == h && strlen(key) == n && memcmp(key, url, n) == 0)
            return x->cites.v[i].id;
    }
    return 0;
}

static bool str_is(const cg_json_t *j, int tok, const char *want)
{
    char *s = cg_json_strdup(j, tok, NULL);
    bool eq = s && strcmp(s, want) == 0;
    free(s);
    return eq;
}

/* Decoded string member `key` of obj as a span, empty when absent (the
 * caller frees .p). */
static cg_span_t member_span(const cg_json_t *j, int obj, const char *key)
{
    char *s = cg_json_strdup(j, cg_json_get(j, obj, key), NULL);
    return cg_span(s, s ? strlen(s) : 0); /* a NUL inside ends it, as in the table */
}

/* One annotation of choice `choice`: a url_citation with a url (inside
 * "url_citation", or at its top level as some servers send it) adds a
 * citation unless one has that url, and mentions it. */
static void learn_annotation(cg_xform_t *x, size_t choice, int ann)
{
    const cg_json_t *j = &x->json;
    if (!str_is(j, cg_json_get(j, ann, "type"), "url_citation"))
        return;
    int obj = cg_json_get(j, ann, "url_citation");
    if (cg_json_type(j, obj) != JSMN_OBJECT)
        obj = ann;
    cg_span_t url = member_span(j, obj, "url"), key = url;
    if (key.n > CG_CITE_MAX_FIELD)
        key.n = cg_utf8_cut(key.p, CG_CITE_MAX_FIELD); /* as the table keeps it */
    uint64_t h = hash_bytes(key.p, key.n);
    if (key.n > 0 && annotated(x, key.p, key.n, h) == 0) {
        cg_cite_in_t in = {0};
        in.title = member_span(j, obj, "title");
        in.content = member_span(j, obj, "content"); /* OpenRouter's snippet */
        in.url = url; /* whole: the table keeps no link it would have to cut */
        in.key = key;
        in.id = (unsigned)x->cites.n + 1; /* in order of arrival */
        size_t i = x->cites.n;
        unsigned n = cg__xform_cite(x, &in);
        if (n) {
            x->url_hash = cg_grow(x->url_hash, i, &x->url_hash_cap, 8, sizeof(uint64_t));
            x->url_hash[i] = h;
            cg__xform_mention(x, choice, n);
        }
        free((char *)in.title.p);
        free((char *)in.content.p);
    }
    free((char *)url.p);
}

/*
 * Upstream url_citation annotations (choices[i].delta.annotations, or
 * message.annotations in a body) are the last citation source: they count
 * when nothing else matched first, nor will (request-side sources). A
 * dialect view names its citations itself.
 */
static void learn_annotations(cg_xform_t *x, int choices, const char *msg_key)
{
    const cg_json_t *j = &x->json;
    if (x->view || cg_json_type(j, choices) != JSMN_ARRAY)
        return;
    if (x->cites_set ? x->cites.kind != CG_CITES_DIALECT : (x->req && x->req->sources.n > 0))
        return;
    int n = j->tok[choices].size;
    for (int k = 0, c = choices + 1; k < n; k++, c = cg_json_skip(j, c)) {
        int anns = cg_json_get(j, cg_json_get(j, c, msg_key), "annotations");
        if (cg_json_type(j, anns) != JSMN_ARRAY)
            continue;
        double index = k;
        cg_json_number(j, cg_json_get(j, c, "index"), &index);
        if (!(index >= 0 && index < CG_XFORM_MAX_CHOICES))
            continue;
        int m = j->tok[anns].size;
        for (int a = 0, t = anns + 1; a < m; a++, t = cg_json_skip(j, t))
            learn_annotation(x, (size_t)index, t);
    }
}

static void remember(cg_buf_t *b, const cg_json_t *j, int tok)
{
    if (b->len || tok < 0)
        return;
    int type = cg_json_type(j, tok);
    if (type != JSMN_STRING && type != JSMN_PRIMITIVE)
        return;
    cg_span_t raw = cg_json_raw(j, tok);
    if (raw.n == 0 || raw.n > 256 || cg_json_is_null(j, tok) || cg_span_eq(raw, "0"))
        return;
    /* The whole token, quotes included: written back as the same JSON value. */
    size_t b0 = cg_json_begin(j, tok), e0 = cg_json_end(j, tok);
    cg_buf_set(b, j->js + b0, e0 - b0);
}

static void learn_meta(cg_xform_t *x, const cg_json_t *j)
{
    if (x->meta_id.len && x->meta_created.len && x->meta_model.len)
        return;
    remember(&x->meta_id, j, cg_json_get(j, 0, "id"));
    remember(&x->meta_created, j, cg_json_get(j, 0, "created"));
    remember(&x->meta_model, j, cg_json_get(j, 0, "model"));
}

/* --- References ------------------------------------------------------------ */

static cg_refrec_t *find_ref(cg_xform_t *x, uint32_t code)
{
    for (size_t i = 0; i < x->nrefs; i++)
        if (x->refs[i].code == code)
            return &x->refs[i];
    return NULL;
}

/* Records a reference in first-reference order (bounded, see xform.h). */
static cg_refrec_t *record_ref(cg_xform_t *x, cg_ref_style_t kind, unsigned n)
{
    uint32_t code = ((uint32_t)kind << 16) | n;
    cg_refrec_t *old = find_ref(x, code);
    if (old) {
        old->count++;
        return old;
    }
    if (x->nrefs == CG_XFORM_MAX_REFS)
        return NULL;
    x->refs = cg_grow(x->refs, x->nrefs, &x->refs_cap, 8, sizeof(cg_refrec_t));
    cg_refrec_t *r = &x->refs[x->nrefs++];
    r->code = code;
    r->count = 1;
    return r;
}

/* Keeps the first bytes of a choice's upstream content. */
static void note_head(cg_choice_t *ch, const char *p, size_t n)
{
    size_t room = sizeof(ch->head) - ch->headlen;
    if (n > room)
        n = room;
    memcpy(ch->head + ch->headlen, p, n);
    ch->headlen = (uint8_t)(ch->headlen + n);
}

static size_t split_room(cg_xform_t *x);

/* Content bytes that go out as they came; the profile sees them first. */
static void put_text(cg_xform_t *x, const char *p, size_t n, bool by_ref)
{
    const cg_profile_t *prof = x->cfg.profile;
    if (x->splitting)
        split_room(x);
    if (prof->text && prof->text(x, x->cur_ch, p, n))
        x->changed = true;
    if (by_ref)
        cg__emit_span(x->out, p, n);
    else
        cg__emit_copy(x->out, p, n);
}

static void sink_text(void *ctx, const char *p, size_t n, bool stable)
{
    cg_xform_t *x = ctx;
    while (n > 0) {
        size_t take = x->splitting ? cg_json_safe_cut(p, n, split_room(x)) : n;
        put_text(x, p, take, stable && x->content_stable);
        p += take;
        n -= take;
    }
}

static void count_ref(cg_xform_t *x, const cg_citation_t *c)
{
    if (c == NULL) {
        if (x->cites_set)
            x->stats.refs_out_of_range++;
        else
            x->stats.refs_unlinked++;
    } else if (c->link == NULL) {
        x->stats.refs_unlinked++;
    } else {
        x->stats.refs_linked++;
    }
}

/* auto: the first [N] or [citation:N] decides between the two. */
static void note_first_ref(cg_xform_t *x, cg_ref_style_t kind)
{
    if (x->first_ref || (kind != CG_REF_NUMERIC && kind != CG_REF_CITATION))
        return;
    x->first_ref = (uint8_t)kind;
    settle_style(x);
}

static void sink_ref(void *ctx, cg_ref_style_t kind, unsigned n, const char *text, size_t len)
{
    cg_xform_t *x = ctx;
    if (cg_ref_style_open(x->style) && (kind & x->style))
        note_first_ref(x, kind);
    if (kind != x->style) {
        /* A form this stream does not use, or the style is still open (no
         * citations yet): remember it, in case it turns out to be one. */
        if (kind & x->style)
            record_ref(x, kind, n);
        put_text(x, text, len, false);
        return;
    }
    cg_refrec_t *rec = record_ref(x, kind, n);
    const cg_citation_t *c = x->cites_set ? cg_cites_find(&x->cites, n) : NULL;
    count_ref(x, c);
    const cg_profile_t *p = x->cfg.profile;
    if (c && p->ref) {
        if (x->splitting)
            split_room(x);
        if (p->ref(x, x->cur_ch, rec, c, cg_span(text, len))) {
            x->changed = true;
            return;
        }
    }
    put_text(x, text, len, false);
}

static void ref_sink(cg_xform_t *x, cg_ref_sink_t *s)
{
    s->text = sink_text;
    s->ref = sink_ref;
    s->ctx = x;
}

/* Emits one chunk that carries a choice's held bytes (before its end). */
static void flush_choice(cg_xform_t *x, size_t index)
{
    cg_choice_t *ch = &x->choices[index];
    if (cg_ref_held(&ch->ref) == 0)
        return;
    cg_out_t *o = x->out;
    size_t from = o->arena.len;
    cg__emit_content_open(x, &o->arena, index);
    cg__emit_arena_since(o, from);
    cg_ref_sink_t sink;
    ref_sink(x, &sink);
    x->content_stable = false;
    x->cur_ch = ch;
    cg_ref_flush(&ch->ref, &sink);
    cg__emit_str(o, cg__emit_content_close);
    x->stats.events_out++;
    x->last_raw = false;
}

static void flush_all(cg_xform_t *x)
{
    for (size_t i = 0; i < x->nchoices; i++)
        flush_choice(x, i);
}

/* Emits the profile's citation events and ends the stream. */
static void end_stream(cg_xform_t *x, bool done_event)
{
    flush_all(x);
    const cg_profile_t *p = x->cfg.profile;
    if (p->stream_end && p->stream_end(x))
        x->last_raw = false;
    if (done_event) {
        cg__emit_str(x->out, "data: [DONE]\n\n");
        x->stats.events_out++;
    }
    x->ended = true;
}

/* --- Events ---------------------------------------------------------------- */

static void put_ev(cg_xform_t *x, const char *p, size_t n)
{
    if (x->ev_stable)
        cg__emit_span(x->out, p, n);
    else
        cg__emit_copy(x->out, p, n);
}

static void pass_raw(cg_xform_t *x, const cg_sse_event_t *ev)
{
    put_ev(x, ev->raw.p + ev->lead, ev->raw.n - ev->lead);
    x->last_raw = true;
    x->stats.events_out++;
}

static void put_data_ev(cg_xform_t *x, const char *p, size_t n)
{
    if (x->data_stable)
        put_ev(x, p, n);
    else
        cg__emit_copy(x->out, p, n);
}

/* Is raw (a member name's escaped bytes) "event" once unescaped? */
static bool names_event(cg_span_t raw)
{
    char name[30]; /* "event" with every letter escaped: 5 x 6 bytes */
    if (raw.n < 5 || raw.n > sizeof(name))
        return false;
    return cg_json_unescape(raw.p, raw.n, name) == 5 && memcmp(name, "event", 5) == 0;
}

/* Adds a cut after the others; one that touches the last joins it. */
static void add_cut(cg_xform_t *x, size_t start, size_t end)
{
    cg_cut_t *last = x->ncuts ? &x->cuts[x->ncuts - 1] : NULL;
    if (last && start <= last->end) {
        if (start < last->start)
            last->start = start;
        last->end = end;
        return;
    }
    x->cuts = cg_grow(x->cuts, x->ncuts, &x->cuts_cap, 4, sizeof(cg_cut_t));
    x->cuts[x->ncuts++] = (cg_cut_t){start, end};
}

/*
 * SPEC §6 rule 4: every top-level member whose name is "event" once
 * unescaped goes, duplicates and escaped spellings included (an upstream
 * could otherwise inject UI events into Open WebUI). A member goes with the
 * comma after it; the members after the last one kept go with the comma
 * before them, so the object stays valid. Returns how many go.
 */
static int find_cuts(cg_xform_t *x, const cg_json_t *j)
{
    x->ncuts = x->next_cut = 0;
    int n = j->tok[0].size, gone = 0, kept_val = -1;
    for (int k = 0, key = 1; k < n; k++) {
        int val = key + 1, next = cg_json_skip(j, val);
        if (!names_event(cg_json_raw(j, key))) {
            kept_val = val;
        } else {
            bool last = k + 1 == n;
            size_t start = last && kept_val >= 0 ? cg_json_end(j, kept_val) : cg_json_begin(j, key);
            add_cut(x, start, last ? cg_json_end(j, val) : cg_json_begin(j, next));
            gone++;
        }
        key = next;
    }
    return gone;
}

/* Writes one choice's new content: the profile's own, or what the choice's
 * finder and the profile's hooks make of it. */
static void rewrite_content(cg_xform_t *x, cg_choice_t *ch, int content, bool finished)
{
    const cg_json_t *j = &x->json;
    if (x->cfg.profile->content) {
        x->cfg.profile->content(x, ch, content);
        return;
    }
    if (ch->emptied) {
        /* Its bytes went out just before this event: the event keeps "". */
        cg__emit_drop_content(x, content);
        ch->emptied = false;
        return;
    }
    x->cur_ch = ch;
    cg_ref_sink_t sink;
    ref_sink(x, &sink);
    cg__emit_data_until(x, (size_t)j->tok[content].start);
    x->content_stable = x->data_stable && x->ev_stable;
    if (cg_ref_held(&ch->ref))
        x->changed = true;
    cg_span_t s = cg_json_raw(j, content);
    note_head(ch, s.p, s.n);
    cg_ref_feed(&ch->ref, s.p, s.n, &sink);
    if (cg_ref_held(&ch->ref)) {
        if (finished)
            cg_ref_flush(&ch->ref, &sink);
        else
            x->changed = true; /* bytes held for the next event */
    }
    x->cur = (size_t)j->tok[content].end;
}

/* Walks the choices of a parsed chunk or body and writes their contents;
 * the data before each one goes out on the way (up to x->cur). Sets
 * x->changed when the event's data must be rewritten. */
static void walk_choices(cg_xform_t *x, int choices, const char *msg_key)
{
    const cg_json_t *j = &x->json;
    const cg_profile_t *p = x->cfg.profile;
    int n = j->tok[choices].size;
    for (int k = 0, c = choices + 1; k < n; k++, c = cg_json_skip(j, c)) {
        if (cg_json_type(j, c) != JSMN_OBJECT)
            continue;
        double index = k;
        cg_json_number(j, cg_json_get(j, c, "index"), &index);
        int fr = cg_json_get(j, c, "finish_reason");
        bool finished = fr >= 0 && !cg_json_is_null(j, fr);
        /* A choice past the ones rewritten (CG_XFORM_MAX_CHOICES) goes out as
         * it came, but its finish still ends the answer. */
        x->stats.saw_finish |= finished;
        cg_choice_t *ch = choice_at(x, index);
        if (ch == NULL)
            continue;
        int msg = cg_json_get(j, c, msg_key);
        int content = cg_json_get(j, msg, "content");
        if (cg_json_is_str(j, content)) {
            adopt_request_sources(x);
            rewrite_content(x, ch, content, finished || x->body_mode);
            if (x->body_mode && p->body_message)
                p->body_message(x, ch, msg);
        }
    }
}

/* Before a chunk that finishes a choice without content, that choice's held
 * bytes go out in a chunk of their own. */
static void flush_finishing(cg_xform_t *x, int choices)
{
    const cg_json_t *j = &x->json;
    int n = j->tok[choices].size;
    for (int k = 0, c = choices + 1; k < n; k++, c = cg_json_skip(j, c)) {
        int fr = cg_json_get(j, c, "finish_reason");
        if (fr < 0 || cg_json_is_null(j, fr))
            continue;
        if (cg_json_is_str(j, cg_json_get(j, cg_json_get(j, c, "delta"), "content")))
            continue;
        double index = k;
        cg_json_number(j, cg_json_get(j, c, "index"), &index);
        if (index >= 0 && index < (double)x->nchoices)
            flush_choice(x, (size_t)index);
    }
}

static bool any_held(const cg_xform_t *x)
{
    for (size_t i = 0; i < x->nchoices; i++)
        if (cg_ref_held(&x->choices[i].ref))
            return true;
    return false;
}

/* Writes the non-data lines of a rewritten event, as they came. */
static void put_other_lines(cg_xform_t *x, const cg_sse_event_t *ev)
{
    const char *p = ev->raw.p + ev->lead;
    const char *end = ev->raw.p + ev->raw.n;
    while (p < end) {
        const char *e = p;
        while (e < end && *e != '\r' && *e != '\n')
            e++;
        if (e == p)
            break; /* the blank line that ends the event */
        const char *next = e;
        if (next < end && *next == '\r')
            next++;
        if (next < end && *next == '\n' && next[-1] != '\n')
            next++;
        if (x->stats.events_in == 1 && p == ev->raw.p + ev->lead && e - p >= 3 &&
            memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
            /* The stream's byte order mark: keep it, judge the line after it. */
            put_ev(x, p, 3);
            p += 3;
        }
        bool is_data = (e - p >= 4 && memcmp(p, "data", 4) == 0 && (e - p == 4 || p[4] == ':'));
        if (!is_data)
            put_ev(x, p, (size_t)(next - p));
        p = next;
    }
}

/* Members no code reads: their values may change between chunks that
 * share a template. Anything read anywhere (at any depth) is not one. */
static bool value_unread(cg_span_t key)
{
    static const char *const read[] = {
        "all_retrieved_documents", "annotations", "choices", "citations", "content", "context",
        "created", "data_sources", "delta", "error", "event", "finish_reason", "id", "index",
        "model", "object", "response", "role", "search_results", "text", "type", "usage",
    };
    for (size_t i = 0; i < sizeof(read) / sizeof(read[0]); i++)
        if (cg_span_eq(key, read[i]))
            return false;
    return true;
}

/* Records the template's holes: the number and string values of top-level
 * members after the content (content_end: its closing quote in the parsed
 * text) that no code reads. False when there are more than fit. */
static bool find_holes(cg_xform_t *x, size_t content_end)
{
    const cg_json_t *j = &x->json;
    size_t shift = content_end - x->tpl_prefix; /* parsed text -> tpl */
    x->tpl_nholes = 0;
    for (int k = 0, t = 1; k < j->tok[0].size; k++) {
        int v = t + 1;
        const jsmntok_t *val = &j->tok[v];
        bool str = val->type == JSMN_STRING, num = val->type == JSMN_PRIMITIVE &&
                                                   (j->js[val->start] == '-' ||
                                                    isdigit((unsigned char)j->js[val->start]));
        if ((size_t)val->start > content_end && (str || num) &&
            value_unread(cg_json_raw(j, t))) {
            if (x->tpl_nholes == CG_XFORM_TEMPLATE_HOLES)
                return false;
            /* A string's hole takes its quotes: they are matched with it. */
            size_t from = (size_t)val->start - str, to = (size_t)val->end + str;
            x->tpl_hole[x->tpl_nholes++] =
                (cg_tpl_hole_t){(uint16_t)(from - shift), (uint16_t)(to - shift), str};
        }
        t = cg_json_skip(j, v);
    }
    return true;
}

/* The end of a JSON number starting at p (before e), or NULL. */
static const char *number_end(const char *p, const char *e)
{
    if (p < e && *p == '-')
        p++;
    if (p == e || !isdigit((unsigned char)*p))
        return NULL;
    if (*p == '0')
        p++;
    else
        while (p < e && isdigit((unsigned char)*p))
            p++;
    if (p < e && *p == '.') {
        if (++p == e || !isdigit((unsigned char)*p))
            return NULL;
        while (p < e && isdigit((unsigned char)*p))
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        if (++p < e && (*p == '+' || *p == '-'))
            p++;
        if (p == e || !isdigit((unsigned char)*p))
            return NULL;
        while (p < e && isdigit((unsigned char)*p))
            p++;
    }
    return p;
}

/*
 * Template fast path. Streaming chunks of one answer differ only in their
 * content string: once jsmn has validated a chunk of that shape, a later
 * chunk with the very same bytes before and after its content string is the
 * same JSON with other content, so it needs no full parse. Only the content
 * string itself is checked (closing quote, escapes).
 */
static void save_template(cg_xform_t *x, const cg_sse_event_t *ev, int choices, bool learned)
{
    const cg_json_t *j = &x->json;
    x->tpl_valid = false;
    /* A chunk that matches the template has the template's members, so with
     * no "event" member here (rule 4) it has none either. */
    if (ev->ndata != 1 || ev->nother != 0 || learned || x->ncuts > 0 || j->tok[choices].size != 1)
        return;
    int c = choices + 1;
    int fr = cg_json_get(j, c, "finish_reason");
    int content = cg_json_get(j, cg_json_get(j, c, "delta"), "content");
    if ((fr >= 0 && !cg_json_is_null(j, fr)) || !cg_json_is_str(j, content))
        return;
    double index = 0;
    cg_json_number(j, cg_json_get(j, c, "index"), &index);
    size_t start = (size_t)j->tok[content].start, end = (size_t)j->tok[content].end;
    if (start + (j->len - end) > CG_XFORM_TEMPLATE_MAX || !(index >= 0 && index < (double)x->nchoices))
        return;
    x->tpl.len = 0;
    cg_buf_put(&x->tpl, j->js, start);
    cg_buf_put(&x->tpl, j->js + end, j->len - end);
    x->tpl_prefix = start;
    x->tpl_choice = (size_t)index;
    x->tpl_valid = find_holes(x, end);
}

/* Length of a valid JSON string body starting at s (up to its closing
 * quote), or -1 when there is none or an escape is invalid. */
static ssize_t string_body(const char *s, size_t n)
{
    for (size_t i = cg_json_plain_len(s, n); i < n; i += cg_json_plain_len(s + i, n - i)) {
        if (s[i] == '"')
            return (ssize_t)i;
        if (s[i] != '\\' || ++i >= n)
            return -1; /* a raw control byte, or an escape cut short */
        if (s[i] == 'u') {
            for (int k = 1; k <= 4; k++)
                if (i + k >= n || !isxdigit((unsigned char)s[i + k]))
                    return -1;
            i += 4;
        } else if (!strchr("\"\\/bfnrt", s[i]) || s[i] == '\0') {
            return -1;
        }
        i++;
    }
    return -1;
}

static bool may_overflow(cg_xform_t *x, size_t others, cg_span_t s);

/* Matches the bytes of a chunk from its content's closing quote to its end
 * ([p, e)) against the template's suffix: equal but for the holes, each of
 * which holds a value of its kind. Returns their length, or 0. */
static size_t match_suffix(const cg_xform_t *x, const char *p, const char *e)
{
    const char *start = p;
    size_t from = x->tpl_prefix;
    for (size_t h = 0; h < x->tpl_nholes; h++) {
        const cg_tpl_hole_t *hole = &x->tpl_hole[h];
        size_t fixed = hole->start - from;
        if ((size_t)(e - p) < fixed || memcmp(p, x->tpl.p + from, fixed) != 0)
            return 0;
        p += fixed;
        const char *ve = NULL;
        if (!hole->str) {
            ve = number_end(p, e);
        } else if (p < e && *p == '"') {
            ssize_t n = string_body(p + 1, (size_t)(e - p - 1));
            ve = n < 0 ? NULL : p + 1 + n + 1;
        }
        if (ve == NULL)
            return 0;
        p = ve;
        from = hole->end;
    }
    size_t rest = x->tpl.len - from;
    if ((size_t)(e - p) != rest || memcmp(p, x->tpl.p + from, rest) != 0)
        return 0;
    return (size_t)(e - start);
}

static bool fast_event(cg_xform_t *x, const cg_sse_event_t *ev)
{
    cg_span_t d = ev->data;
    size_t pre = x->tpl_prefix;
    if (!x->tpl_valid || ev->ndata != 1 || ev->nother != 0 || d.n <= pre ||
        memcmp(d.p, x->tpl.p, pre) != 0)
        return false;
    ssize_t body = string_body(d.p + pre, d.n - pre);
    if (body < 0)
        return false;
    /* The template's suffix starts with the content's closing quote. */
    size_t post = match_suffix(x, d.p + pre + body, d.p + d.n);
    if (post == 0)
        return false;
    if (may_overflow(x, pre + post, cg_span(d.p + pre, (size_t)body)))
        return false; /* its content must be split (on_json_event) */

    cg_choice_t *ch = &x->choices[x->tpl_choice];
    cg_out_t *o = x->out;
    cg_out_mark_t mark = out_mark(o);
    cg_ref_sink_t sink;
    ref_sink(x, &sink);
    x->cur_ch = ch;
    x->data_stable = true;
    x->content_stable = x->ev_stable;
    x->changed = cg_ref_held(&ch->ref) > 0;
    cg__emit_str(o, "data: ");
    put_ev(x, d.p, pre);
    note_head(ch, d.p + pre, (size_t)body);
    cg_ref_feed(&ch->ref, d.p + pre, (size_t)body, &sink);
    x->changed |= cg_ref_held(&ch->ref) > 0;
    if (!x->changed) {
        out_rollback(o, &mark);
        pass_raw(x, ev);
        return true;
    }
    put_ev(x, d.p + pre + body, post);
    cg__emit_str(o, "\n\n");
    x->last_raw = false;
    x->stats.events_out++;
    return true;
}

/*
 * SPEC §6 Fidelity 5: no line we write may exceed 64 KiB. A rewritten event
 * is one line, and references can grow it (a link per reference), so an
 * event whose rewritten line could pass the limit has its content sent
 * ahead, through the same finder, in chunks of our own of at most
 * CG_XFORM_SPLIT_CHUNK bytes; the event itself then carries "". The check
 * is a bound: content bytes plus, per '[' in it, the longest link.
 */
static size_t longest_link(cg_xform_t *x)
{
    if (!x->max_link_known && x->cites_set) {
        for (size_t i = 0; i < x->cites.n; i++)
            if (x->cites.v[i].link && strlen(x->cites.v[i].link) > x->max_link)
                x->max_link = strlen(x->cites.v[i].link);
        x->max_link_known = true;
    }
    return x->max_link;
}

static bool may_overflow(cg_xform_t *x, size_t others, cg_span_t s)
{
    size_t per_ref = longest_link(x) + 16; /* "[", "](", ")", or [P] and U+200B */
    size_t base = others + s.n + CG_REF_HELD_MAX + 64;
    if (base + (s.n / 3 + 1) * per_ref <= CG_XFORM_LINE_MAX)
        return false;
    size_t brackets = 1; /* held bytes from the previous event */
    for (const char *p = s.p, *e = s.p + s.n; (p = memchr(p, '[', (size_t)(e - p))) != NULL; p++)
        brackets++;
    return base + brackets * per_ref > CG_XFORM_LINE_MAX;
}

/* Opens a chunk of our own for the content being split, or closes a full one
 * and opens the next. */
/* The longest character of a JSON string: an escaped surrogate pair. */
#define SPLIT_MIN_ROOM 12

/* Room left in the chunk that a split content is being written into. A new
 * chunk opens when none is, or when the open one has no room for the
 * longest character; pieces taken to the room keep each chunk's content
 * under CG_XFORM_SPLIT_CHUNK plus one reference's link. */
static size_t split_room(cg_xform_t *x)
{
    cg_buf_t *a = &x->out->arena;
    size_t fill = x->split_open ? cg_out_len(x->out) - x->split_from : 0;
    if (x->split_open && fill + SPLIT_MIN_ROOM <= CG_XFORM_SPLIT_CHUNK)
        return CG_XFORM_SPLIT_CHUNK - fill;
    if (x->split_open) {
        cg__emit_str(x->out, cg__emit_content_close);
        x->stats.events_out++;
    }
    size_t from = a->len;
    cg__emit_content_open(x, a, x->split_index);
    cg__emit_arena_since(x->out, from);
    x->split_open = true;
    x->split_from = cg_out_len(x->out);
    return CG_XFORM_SPLIT_CHUNK;
}

static void split_content(cg_xform_t *x, cg_choice_t *ch, size_t index, cg_span_t s, bool finished)
{
    cg_ref_sink_t sink;
    ref_sink(x, &sink);
    x->cur_ch = ch;
    x->content_stable = x->data_stable && x->ev_stable;
    x->splitting = true;
    x->split_open = false;
    x->split_index = index;
    note_head(ch, s.p, s.n);
    cg_ref_feed(&ch->ref, s.p, s.n, &sink);
    if (finished)
        cg_ref_flush(&ch->ref, &sink);
    if (x->split_open) {
        cg__emit_str(x->out, cg__emit_content_close);
        x->stats.events_out++;
        x->last_raw = false;
    }
    x->splitting = false;
    ch->emptied = true;
}

static void split_long_contents(cg_xform_t *x, int choices)
{
    const cg_json_t *j = &x->json;
    if (x->cfg.profile->content)
        return; /* the profile writes content itself, not through the finder */
    int n = j->tok[choices].size;
    for (int k = 0, c = choices + 1; k < n; k++, c = cg_json_skip(j, c)) {
        int content = cg_json_get(j, cg_json_get(j, c, "delta"), "content");
        if (!cg_json_is_str(j, content))
            continue;
        cg_span_t s = cg_json_raw(j, content);
        adopt_request_sources(x);
        if (!may_overflow(x, j->len - s.n, s))
            continue;
        double index = k;
        cg_json_number(j, cg_json_get(j, c, "index"), &index);
        cg_choice_t *ch = choice_at(x, index);
        int fr = cg_json_get(j, c, "finish_reason");
        if (ch)
            split_content(x, ch, (size_t)index, s, fr >= 0 && !cg_json_is_null(j, fr));
    }
}

bool cg__xform_parse_data(cg_json_t *j, const cg_sse_event_t *ev, cg_buf_t *buf)
{
    if (cg_json_parse(j, ev->data.p, ev->data.n) != CG_JSON_OK || j->tok[0].type != JSMN_OBJECT)
        return false;
    if (ev->ndata > 1) {
        buf->len = 0;
        cg_buf_put(buf, ev->data.p, ev->data.n);
        for (size_t i = 0; i < buf->len; i++)
            if (buf->p[i] == '\n')
                buf->p[i] = ' ';
        j->js = buf->p;
    }
    return true;
}

/* Parses an event's data into x->json; false when it is not a JSON object. */
static bool parse_event(cg_xform_t *x, const cg_sse_event_t *ev)
{
    x->data_stable = ev->ndata == 1;
    return cg__xform_parse_data(&x->json, ev, &x->scratch);
}

/* A rewritten event: its other lines as they came, then its data on one line. */
static void begin_rewrite(cg_xform_t *x, const cg_sse_event_t *ev)
{
    if (ev->nother)
        put_other_lines(x, ev);
    cg__emit_str(x->out, "data: ");
    x->cur = 0;
}

static void end_rewrite(cg_xform_t *x)
{
    cg__emit_data_until(x, x->json.len);
    cg__emit_str(x->out, "\n\n");
    x->last_raw = false;
    x->stats.events_out++;
}

static void on_json_event(cg_xform_t *x, const cg_sse_event_t *ev)
{
    cg_json_t *j = &x->json;
    learn_meta(x, j);
    bool had_cites = x->cites_set;
    int choices = cg_json_get(j, 0, "choices");
    if (!x->cites_set)
        learn_cites(x, j, choices, 0);
    learn_annotations(x, choices, "delta");
    bool has_choices = cg_json_type(j, choices) == JSMN_ARRAY;
    if (has_choices && any_held(x))
        flush_finishing(x, choices);
    if (has_choices)
        split_long_contents(x, choices);

    cg_out_mark_t mark = out_mark(x->out);
    x->changed = find_cuts(x, j) > 0;
    begin_rewrite(x, ev);
    if (has_choices)
        walk_choices(x, choices, "delta");
    if (has_choices)
        save_template(x, ev, choices, had_cites != x->cites_set);
    if (!x->changed) {
        out_rollback(x->out, &mark);
        pass_raw(x, ev);
        return;
    }
    end_rewrite(x);
}

/* After the end of the stream nothing is rewritten any more, but an
 * upstream "event" member still goes (rule 4: always). */
static void on_late_event(cg_xform_t *x, const cg_sse_event_t *ev)
{
    if (!parse_event(x, ev) || find_cuts(x, &x->json) == 0) {
        pass_raw(x, ev);
        return;
    }
    begin_rewrite(x, ev);
    end_rewrite(x);
}

/* A hostile event may need thousands of cuts; chunks after it need few:
 * don't keep the peak. */
static void trim_peaks(cg_xform_t *x)
{
    if (x->cuts_cap > 64) {
        free(x->cuts);
        x->cuts = NULL;
        x->cuts_cap = 0;
    }
}

static void view_event(cg_xform_t *x, const cg_sse_event_t *ev);
static void reset_kept(cg_xform_t *x);

static void on_event(cg_xform_t *x, const cg_sse_event_t *ev)
{
    /* The LF of a CRLF split across reads ends the previous event: it goes
     * out right behind it if that event went out unchanged (before anything
     * this event makes us write), and is dropped after our own line ends. */
    if (ev->lead && x->last_raw)
        put_ev(x, ev->raw.p, ev->lead);
    x->json.ntok = 0; /* tokens describe one event; trim_peaks reads this one's */
    if (ev->ndata == 0) {
        pass_raw(x, ev);
    } else if (x->ended) {
        on_late_event(x, ev);
    } else if (cg_span_eq(ev->data, "[DONE]")) {
        x->stats.saw_done = true;
        end_stream(x, false);
        pass_raw(x, ev);
    } else if (!x->cfg.profile->content && fast_event(x, ev)) {
        return; /* the template fast path fed the finder */
    } else if (parse_event(x, ev)) {
        on_json_event(x, ev);
    } else {
        x->stats.malformed++;
        pass_raw(x, ev);
    }
    trim_peaks(x);
}

/*
 * SPEC §6 rule 6: an event over max_event goes out unchanged, as it
 * streams in, and the events around it as usual. Bytes held back from
 * earlier events go first, in a chunk of our own (nothing is reordered,
 * and the held bytes cannot wait: the big event may carry that choice's
 * content). Its bytes taken so far are pending in the tokenizer; the rest
 * comes as pieces (oversized_piece).
 */
static void begin_oversized(cg_xform_t *x)
{
    cg_span_t pending = cg_sse_pending(&x->sse);
    uint8_t lead = x->sse.lead; /* see on_event; with none pending, the first piece's */
    x->stats.events_in++;
    x->stats.oversized++;
    if (x->view)
        return; /* not the client's format: it cannot go out as it came */
    x->stats.events_out++;
    if (lead && x->last_raw)
        cg__emit_str(x->out, "\n");
    if (!x->ended)
        flush_all(x);
    /* The next chunk is parsed in full: the template is the last parsed
     * chunk's, and that is no longer the previous event. */
    x->tpl_valid = false;
    if (pending.n > lead) {
        cg__emit_copy(x->out, pending.p + lead, pending.n - lead);
        x->last_raw = true;
    }
}

static void oversized_piece(cg_xform_t *x, const cg_sse_event_t *ev)
{
    if (ev->raw.n > ev->lead) {
        put_ev(x, ev->raw.p + ev->lead, ev->raw.n - ev->lead);
        x->last_raw = true;
    }
}

/* A profile that holds the stream gets it whole at its end, up to max_event
 * bytes; a longer one goes through unchanged from the first byte. */
static void hold_feed(cg_xform_t *x, const char *in, size_t len)
{
    if (x->hold.len + len <= x->cfg.max_event) {
        cg_buf_put(&x->hold, in, len);
        return;
    }
    x->stats.passthrough = true;
    cg__emit_copy(x->out, x->hold.p, x->hold.len);
    cg__emit_span(x->out, in, len);
    cg_buf_free(&x->hold);
}

/* Calls fn for every complete event of the held stream. */
static void each_held_event(cg_xform_t *x, void (*fn)(cg_xform_t *, const cg_sse_event_t *))
{
    cg_sse_t sse;
    cg_sse_init(&sse, x->cfg.max_event);
    size_t pos = 0;
    while (pos < x->hold.len) {
        cg_sse_event_t ev;
        ssize_t r = cg_sse_feed(&sse, x->hold.p + pos, x->hold.len - pos, &ev);
        if (r <= 0)
            break;
        fn(x, &ev);
        pos += (size_t)r;
    }
    cg_sse_free(&sse);
}

/* First pass over a held stream: the profile sees every content. */
static void show_held_content(cg_xform_t *x, const cg_sse_event_t *ev)
{
    if (ev->ndata == 0 || cg_span_eq(ev->data, "[DONE]") || !parse_event(x, ev))
        return;
    const cg_json_t *j = &x->json;
    int choices = cg_json_get(j, 0, "choices");
    if (cg_json_type(j, choices) != JSMN_ARRAY)
        return;
    int n = j->tok[choices].size;
    for (int k = 0, c = choices + 1; k < n; k++, c = cg_json_skip(j, c)) {
        int content = cg_json_get(j, cg_json_get(j, c, "delta"), "content");
        double index = k;
        cg_json_number(j, cg_json_get(j, c, "index"), &index);
        cg_choice_t *ch = cg_json_is_str(j, content) ? choice_at(x, index) : NULL;
        if (ch)
            x->cfg.profile->held_content(x, ch, cg_json_raw(j, content));
    }
}

static void replay_event(cg_xform_t *x, const cg_sse_event_t *ev)
{
    x->ev_stable = false; /* the held buffer is not the caller's input */
    if (x->view == NULL)
        x->stats.events_in++; /* a view's chunks are not upstream events */
    on_event(x, ev);
}

/* The held stream is complete: the profile sees all of it, then it goes
 * through as if it had just arrived. */
static void replay_held(cg_xform_t *x)
{
    const cg_profile_t *p = x->cfg.profile;
    if (p->held_content)
        each_held_event(x, show_held_content);
    if (p->held_end)
        p->held_end(x);
    each_held_event(x, replay_event);
    cg_buf_free(&x->hold);
}

static void view_message(cg_xform_t *x, const cg_evs_msg_t *m);

/* An event-stream upstream whose framing broke: nothing after the break
 * can be trusted, so the stream ends here with the error event (SPEC
 * §6a), and the caller closes the connection. */
static void framing_error(cg_xform_t *x, int err)
{
    x->stats.framing_error = true;
    x->stats.malformed++;
    if (x->ended)
        return;
    char msg[160];
    snprintf(msg, sizeof(msg), "\"%s\"", cg_evs_strerror(err));
    cg__xform_error(x, cg_span(msg, strlen(msg)), CG_SPAN_LIT("\"upstream_protocol_error\""));
}

/* One read of an event-stream upstream: each message to the view. */
static void feed_messages(cg_xform_t *x, const char *in, size_t len)
{
    size_t pos = 0;
    while (pos < len && !x->stats.framing_error) {
        cg_evs_msg_t m;
        ssize_t r = cg_evs_feed(x->dv->evs, in + pos, len - pos, &m);
        if (r == CG_EVS_AGAIN)
            break;
        if (r < 0) {
            framing_error(x, (int)r);
            break;
        }
        x->ev_stable = m.payload.p >= in && m.payload.p + m.payload.n <= in + len;
        x->stats.events_in++;
        view_message(x, &m);
        pos += (size_t)r;
    }
}

/* One read's events, into the call's output. */
static void feed_events(cg_xform_t *x, const char *in, size_t len)
{
    x->put = put_data_ev;
    if (x->view && x->view->message) {
        feed_messages(x, in, len);
        return;
    }
    if (x->view == NULL && (!x->cfg.profile->transforms || x->stats.passthrough)) {
        cg__emit_span(x->out, in, len);
        return;
    }
    if (x->cfg.profile->holds_stream && x->view == NULL) {
        hold_feed(x, in, len);
        return;
    }
    size_t pos = 0;
    while (pos < len) {
        cg_sse_event_t ev;
        ssize_t r = cg_sse_feed(&x->sse, in + pos, len - pos, &ev);
        if (r == CG_SSE_AGAIN)
            break;
        if (r == CG_SSE_E_TOOBIG) {
            begin_oversized(x); /* nothing taken: the pieces come next */
            continue;
        }
        x->ev_stable = ev.raw.p >= in && ev.raw.p + ev.raw.n <= in + len;
        if (ev.oversized) {
            if (x->view == NULL)
                oversized_piece(x, &ev);
        } else {
            x->stats.events_in++;
            if (x->view)
                view_event(x, &ev);
            else
                on_event(x, &ev);
        }
        pos += (size_t)r;
    }
}

int cg_xform_feed(cg_xform_t *x, const char *in, size_t len, cg_out_t *out)
{
    call_begin(x, out);
    reset_kept(x);
    feed_events(x, in, len);
    call_end(x);
    return 0;
}

/* The end of the stream, into the call's output. */
static void finish_events(cg_xform_t *x, cg_end_t why)
{
    cg_out_t *out = x->out;
    x->end_why = why;
    /* An event-stream message cut short is dropped, as an SSE event is. */
    cg_span_t pending = x->view && x->view->message ? cg_span("", 0) : cg_sse_pending(&x->sse);
    if (x->sse.lead && pending.n && x->last_raw && !x->stats.passthrough && !x->view)
        cg__emit_copy(out, pending.p, x->sse.lead); /* the LF that ends the last event */
    x->put = put_data_ev;
    const cg_profile_t *p = x->cfg.profile;
    if (x->view && x->view->end && !x->ended)
        x->view->end(x, x->view_state, pending);
    if (p->holds_stream && !x->stats.passthrough && !x->ended)
        replay_held(x);
    if ((p->transforms || x->view) && (!x->stats.passthrough || x->view) && !x->ended) {
        /* The upstream ended inside an oversized event, whose bytes went out
         * already: end it, so that what we write stands apart. */
        if (x->sse.oversized && !x->view)
            cg__emit_str(out, x->sse.bol && !x->sse.cr ? "\n" : "\n\n");
        if (x->stats.saw_finish) {
            end_stream(x, true);
        } else {
            static const char *const why_text[] = {
                [CG_END_EOF] = "upstream closed the stream before the answer finished",
                [CG_END_RESET] = "upstream connection failed before the answer finished",
                [CG_END_TIMEOUT] = "upstream went idle before the answer finished",
                [CG_END_SHUTDOWN] = "gateway is shutting down",
            };
            x->stats.truncated = true;
            end_stream(x, false);
            size_t from = out->arena.len;
            cg_buf_puts(&out->arena, "data: {\"error\":{\"message\":");
            cg_json_put_cstr(&out->arena, why_text[why]);
            cg_buf_puts(&out->arena,
                        ",\"type\":\"upstream_error\",\"code\":\"upstream_closed\"}}\n\n");
            cg__emit_arena_since(out, from);
            x->stats.events_out++;
        }
    }
}

int cg_xform_finish(cg_xform_t *x, cg_end_t why, cg_out_t *out)
{
    call_begin(x, out);
    reset_kept(x);
    finish_events(x, why);
    call_end(x);
    return 0;
}

/* One call, so the kept chunks of the read stay put under the end's output
 * (reset_kept runs once). */
int cg_xform_feed_finish(cg_xform_t *x, const char *in, size_t len, cg_end_t why, cg_out_t *out)
{
    call_begin(x, out);
    reset_kept(x);
    feed_events(x, in, len);
    finish_events(x, why);
    call_end(x);
    return 0;
}

/* --- Non-streaming bodies -------------------------------------------------- */

static void put_body(cg_xform_t *x, const char *p, size_t n)
{
    cg__emit_span(x->out, p, n);
}

int cg_xform_body(cg_xform_t *x, const char *body, size_t len, cg_out_t *out)
{
    call_begin(x, out);
    x->put = put_body;
    x->body_mode = true;
    x->data_stable = x->ev_stable = true;
    cg_json_t *j = &x->json;
    const cg_profile_t *p = x->cfg.profile;
    if (x->view) {
        x->dv->dbody.len = 0;
        if (x->view->body == NULL ||
            x->view->body(x, x->view_state, body, len, &x->dv->dbody) != 0) {
            x->stats.malformed++;
            cg__emit_span(out, body, len);
            call_end(x);
            return -1;
        }
        body = x->dv->dbody.p;
        len = x->dv->dbody.len;
    }
    if (!p->transforms) {
        cg__emit_span(out, body, len);
        call_end(x);
        return 0;
    }
    if (cg_json_parse(j, body, len) != CG_JSON_OK || j->tok[0].type != JSMN_OBJECT) {
        x->stats.malformed++;
        cg__emit_span(out, body, len);
        call_end(x);
        return -1;
    }
    learn_meta(x, j);
    int choices = cg_json_get(j, 0, "choices");
    learn_cites(x, j, choices, 1);
    learn_annotations(x, choices, "message");
    int members = j->tok[0].size - find_cuts(x, j); /* rule 4: the same injection */
    x->cur = 0;
    if (cg_json_type(j, choices) == JSMN_ARRAY)
        walk_choices(x, choices, "message");
    /* Additions go just before the root object's closing brace. */
    cg__emit_data_until(x, cg_json_end(j, 0) - 1);
    if (p->body_end)
        p->body_end(x, members > 0);
    cg__emit_data_until(x, len);
    x->ended = true;
    call_end(x);
    return 0;
}

/* --- Dialect views (xform_int.h) ------------------------------------------- */

static void view_event(cg_xform_t *x, const cg_sse_event_t *ev)
{
    if (!x->ended)
        x->view->event(x, x->view_state, ev);
    trim_peaks(x);
}

static void view_message(cg_xform_t *x, const cg_evs_msg_t *m)
{
    if (!x->ended)
        x->view->message(x, x->view_state, m);
    trim_peaks(x);
}

#define KEPT_BLOCK (64u << 10)

/* A call's output has gone to the client: the kept chunks may go too. One
 * huge call must not pin its blocks for the rest of the stream. */
static void reset_kept(cg_xform_t *x)
{
    cg_xform_dv_t *d = x->dv;
    if (d == NULL)
        return;
    size_t total = 0;
    for (size_t i = 0; i < d->nkept; i++) {
        total += d->kept[i].cap;
        d->kept[i].len = 0;
    }
    d->kept_cur = 0;
    if (total <= (1u << 20))
        return;
    for (size_t i = 0; i < d->nkept; i++)
        cg_buf_free(&d->kept[i]);
    d->nkept = 0;
}

/* A copy of chunk p[0..n) that does not move before the caller's next call:
 * blocks are only appended to, never grown, within one call. */
static const char *keep_chunk(cg_xform_t *x, const char *p, size_t n)
{
    cg_xform_dv_t *d = x->dv;
    while (d->kept_cur < d->nkept && d->kept[d->kept_cur].cap - d->kept[d->kept_cur].len < n) {
        if (d->kept[d->kept_cur].len == 0) /* an empty block too small: make it fit */
            cg_buf_reserve(&d->kept[d->kept_cur], n > KEPT_BLOCK ? n : KEPT_BLOCK);
        else
            d->kept_cur++;
    }
    if (d->kept_cur == d->nkept) {
        d->kept = cg_grow(d->kept, d->nkept, &d->kept_cap, 4, sizeof(cg_buf_t));
        memset(&d->kept[d->nkept], 0, sizeof(cg_buf_t));
        cg_buf_reserve(&d->kept[d->nkept++], n > KEPT_BLOCK ? n : KEPT_BLOCK);
    }
    cg_buf_t *b = &d->kept[d->kept_cur];
    char *at = b->p + b->len;
    memcpy(at, p, n);
    b->len += n;
    return at;
}

cg_buf_t *cg__xform_chunk_begin(cg_xform_t *x)
{
    x->dv->synth.len = 0;
    cg_buf_puts(&x->dv->synth, "data: ");
    return &x->dv->synth;
}

/* A holding profile holds the view's chunks, not the upstream's bytes;
 * beyond max_event they go out as they are. Unlike an upstream's bytes, they
 * end only when the view wrote [DONE]: the end of the stream (cg_xform_finish)
 * is still ours to write otherwise. */
static void hold_chunk(cg_xform_t *x, const char *p, size_t n)
{
    if (!x->stats.passthrough && x->hold.len + n <= x->cfg.max_event) {
        cg_buf_put(&x->hold, p, n);
        return;
    }
    if (!x->stats.passthrough) {
        x->stats.passthrough = true;
        cg__emit_copy(x->out, x->hold.p, x->hold.len);
        cg_buf_free(&x->hold);
    }
    cg__emit_copy(x->out, p, n);
    if (n == 14 && memcmp(p, "data: [DONE]\n\n", 14) == 0) {
        x->stats.saw_done = true;
        x->ended = true;
    }
}

void cg__xform_chunk_end(cg_xform_t *x)
{
    cg_buf_t *b = &x->dv->synth;
    cg_buf_puts(b, "\n\n");
    if (x->cfg.profile->holds_stream && !x->body_mode) {
        hold_chunk(x, b->p, b->len);
        return;
    }
    const char *p = keep_chunk(x, b->p, b->len);
    cg_sse_event_t ev = {0};
    ev.raw = cg_span(p, b->len);
    ev.data = cg_span(p + 6, b->len - 8);
    ev.ndata = 1;
    x->ev_stable = true; /* kept until the caller's next call, like its input */
    on_event(x, &ev);
}

/* The chunk written out and put through on_event, as any view chunk: for
 * profiles that hold the stream or write content themselves, and after the
 * end. */
static void content_chunk(cg_xform_t *x, size_t index, cg_span_t raw)
{
    static const char close[] = "\"},\"finish_reason\":null}]}";
    x->dv->synth.len = 0;
    cg__emit_content_open(x, &x->dv->synth, index);
    cg_buf_put(&x->dv->synth, raw.p, raw.n);
    cg_buf_put(&x->dv->synth, close, sizeof(close) - 1);
    cg__xform_chunk_end(x);
}

/* The opening of a content chunk of choice index, made again only when the
 * choice or the meta changes: a meta value is set once, from empty, so its
 * lengths tell whether it changed. */
static const cg_buf_t *content_head(cg_xform_t *x, size_t index)
{
    size_t meta = x->meta_id.len << 20 ^ x->meta_created.len << 10 ^ x->meta_model.len;
    if (x->dv->chead.len == 0 || x->dv->chead_index != index || x->dv->chead_meta != meta) {
        x->dv->chead.len = 0;
        cg__emit_content_open(x, &x->dv->chead, index);
        x->dv->chead_index = index;
        x->dv->chead_meta = meta;
    }
    return &x->dv->chead;
}

void cg__xform_content(cg_xform_t *x, size_t index, cg_span_t raw)
{
    const cg_profile_t *p = x->cfg.profile;
    cg_choice_t *ch = NULL;
    if (!p->holds_stream && !p->content && !x->ended)
        ch = choice_at(x, (double)index);
    while (ch == NULL && raw.n > 0) {
        /* No line we write passes 64 KiB (SPEC §6 rule 5), held or not. */
        size_t take = cg_json_safe_cut(raw.p, raw.n, CG_XFORM_SPLIT_CHUNK);
        content_chunk(x, index, cg_span(raw.p, take));
        raw.p += take;
        raw.n -= take;
    }
    if (ch == NULL)
        return;
    adopt_request_sources(x);
    x->content_stable = false;
    /* A meta of at most 256 bytes a value, and the chunk's own members. */
    if (may_overflow(x, x->meta_id.len + x->meta_model.len + 128, raw)) {
        split_content(x, ch, index, raw, false);
        ch->emptied = false; /* there is no chunk of the upstream's to empty */
        return;
    }
    const cg_buf_t *head = content_head(x, index);
    cg__emit_copy(x->out, head->p, head->len);
    cg_ref_sink_t sink;
    ref_sink(x, &sink);
    x->cur_ch = ch;
    note_head(ch, raw.p, raw.n);
    cg_ref_feed(&ch->ref, raw.p, raw.n, &sink);
    cg__emit_str(x->out, cg__emit_content_close);
    x->stats.events_out++;
    x->last_raw = false;
}

void cg__xform_chunk_meta(const cg_xform_t *x, cg_buf_t *b)
{
    cg__emit_meta(x, b);
}

static void remember_raw(cg_buf_t *b, cg_span_t v)
{
    if (b->len == 0 && v.n > 0 && v.n <= 256 && !cg_span_eq(v, "null") && !cg_span_eq(v, "\"\""))
        cg_buf_set(b, v.p, v.n);
}

void cg__xform_meta(cg_xform_t *x, cg_span_t id, cg_span_t model)
{
    remember_raw(&x->meta_id, id);
    remember_raw(&x->meta_model, model);
}

unsigned cg__xform_cite(cg_xform_t *x, cg_cite_in_t *in)
{
    adopt_request_sources(x);
    if (x->cites_set && x->cites.kind != CG_CITES_REQUEST && x->cites.kind != CG_CITES_DIALECT)
        return 0; /* the stream's citations came from elsewhere (first match wins) */
    if (in->id == 0)
        in->id = cg_cites_max_id(&x->cites) + 1;
    if (in->id > CG_REF_MAX_N)
        return 0;
    cg_cite_opts_t o = {x->cfg.max_doc_bytes, x->cfg.scores};
    if (cg_cites_add(&x->cites, in, &o) == NULL)
        return 0;
    x->cites_set = true;
    x->max_link_known = false;
    settle_style(x);
    return in->id;
}

void cg__xform_cite_more(cg_xform_t *x, unsigned n, cg_span_t content)
{
    cg_cite_opts_t o = {x->cfg.max_doc_bytes, x->cfg.scores};
    if (x->cites_set)
        cg_cites_append_content(&x->cites, n, content, &o);
}

void cg__xform_mention(cg_xform_t *x, size_t choice, unsigned n)
{
    uint32_t code = (CG_REFREC_MENTION << 16) | n;
    if (find_ref(x, code) || record_ref(x, (cg_ref_style_t)CG_REFREC_MENTION, n) == NULL)
        return;
    const cg_citation_t *c = x->cites_set ? cg_cites_find(&x->cites, n) : NULL;
    cg_choice_t *ch = choice_at(x, (double)choice);
    const cg_profile_t *p = x->cfg.profile;
    if (c && ch && p->mention)
        p->mention(x, ch, c);
}

void cg__xform_reserve(cg_xform_t *x, size_t choice, unsigned n)
{
    uint32_t code = ((uint32_t)x->style << 16) | n;
    if (find_ref(x, code) || x->nrefs == CG_XFORM_MAX_REFS)
        return;
    x->refs = cg_grow(x->refs, x->nrefs, &x->refs_cap, 8, sizeof(cg_refrec_t));
    x->refs[x->nrefs++] = (cg_refrec_t){.code = code, .count = 0};
    /* The profiles that number by first reference place it now. */
    const cg_citation_t *c = x->cites_set ? cg_cites_find(&x->cites, n) : NULL;
    cg_choice_t *ch = choice_at(x, (double)choice);
    const cg_profile_t *p = x->cfg.profile;
    if (c && ch && p->mention)
        p->mention(x, ch, c);
}

/* An upstream's error goes out on one line (SPEC §6 rule 5): its message
 * and code, JSON strings with their quotes, are cut past these sizes. */
#define ERROR_MESSAGE_MAX 8192
#define ERROR_CODE_MAX    256

static void put_capped_string(cg_buf_t *b, cg_span_t raw, size_t max)
{
    if (raw.n <= max + 2) {
        cg_buf_put(b, raw.p, raw.n);
        return;
    }
    cg_buf_put(b, raw.p, 1 + cg_json_safe_cut(raw.p + 1, raw.n - 2, max));
    cg_buf_puts(b, "\xE2\x80\xA6\"");
}

void cg__xform_error(cg_xform_t *x, cg_span_t message, cg_span_t code)
{
    if (x->ended)
        return;
    if (x->cfg.profile->holds_stream && !x->stats.passthrough)
        replay_held(x); /* what was held goes first, as at any end */
    x->stats.truncated = true;
    end_stream(x, false);
    cg_out_t *o = x->out;
    size_t from = o->arena.len;
    cg_buf_puts(&o->arena, "data: {\"error\":{\"message\":");
    put_capped_string(&o->arena, message, ERROR_MESSAGE_MAX);
    cg_buf_puts(&o->arena, ",\"type\":\"upstream_error\",\"code\":");
    put_capped_string(&o->arena, code, ERROR_CODE_MAX);
    cg_buf_puts(&o->arena, "}}\n\n");
    cg__emit_arena_since(o, from);
    x->stats.events_out++;
}
