/*
 * Core benchmark: throughput, per-event cost and steady-state heap
 * allocations of the streaming transformer (cg_xform_*) on realistic Azure
 * "On Your Data" SSE, against a memchr-only pass over the same bytes.
 *
 * Input (generated once, in memory, before any timing; seeded PRNG, so the
 * same seed gives the same bytes): whole "answers", each
 *   - one Azure context chunk (citations doc1..doc5 with URLs, plus
 *     all_retrieved_documents), like tests/fixtures/azure_oyd_stream.sse,
 *   - N content chunks of about 200-250 bytes, whose content carries a
 *     [docN] reference about every 300 bytes of content; 5% of references
 *     are split across two consecutive chunks ("[do" | "c2]"),
 *   - a finish_reason chunk and `data: [DONE]`,
 * repeated (different text each time) until the total is >= --mib MiB.
 *
 * Each answer is one transformer (new / feed per read / finish / free), fed
 * in reads of --read bytes (16 KiB, like socket reads); one cg_out_t serves
 * every call, as one serves every stream of a worker. The memchr pass
 * counts '\n' over the same reads. Rounds alternate the two passes.
 *
 * Heap allocations are counted by wrapping malloc/calloc/realloc at link
 * time (-Wl,--wrap=...), which also catches the calls inside
 * libcitegate_core.a.
 *
 * A second, small measurement: the upstream dialects' request translation
 * (cg_dialect_request) of a typical 4 KB chat body, per request, next to
 * cg_request_parse of the same body (what every chat request already costs).
 *
 * A third: the same transformer reading an anthropic upstream through its
 * answer view (SPEC §6a), on long Anthropic Messages streams of the same
 * size: text_delta after text_delta, the text cut into blocks that cite web
 * search results, so that each block ends with a reference to rewrite.
 * A fourth: answers made alike as an OpenAI Responses upstream streams them,
 * through the responses dialect's view (long output_text.delta streams;
 * then again with Azure AI Foundry markers and their annotations where the
 * references were), next to a memchr pass over those bytes.
 * A fifth: Gemini streamGenerateContent answers with Google Search
 * grounding on their last event, through the gemini dialect's view.
 * A sixth: Amazon Bedrock ConverseStream answers in AWS's binary event
 * stream (text deltas, web and document citation deltas, each payload
 * padded as Bedrock pads it), through the bedrock dialect's view.
 * A seventh: Amazon Bedrock Knowledge Bases retrieveAndGenerateStream
 * answers in the same event stream (output events, citation events with
 * their retrieved references), through the bedrock-kb dialect's view.
 * An eighth: Cohere v2 Chat streams (content-delta after content-delta, a
 * citation-start at character offsets after about every 300 bytes of
 * text), through the cohere dialect's view.
 *
 * Usage: core [--read N] [--mib N] [--rounds N] [--events N] [--seed N]
 *             [--only SECTION]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "citegate/dialect.h"
#include "citegate/evstream.h"
#include "citegate/json.h"
#include "citegate/xform.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc_count.h"

/* Allocations are counted by tests/support/alloc_count.c (GNU ld --wrap). */

/* --- Helpers --------------------------------------------------------------- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_state;

static uint64_t rng(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

static unsigned rng_below(unsigned n)
{
    return (unsigned)((rng() >> 32) % n);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double pct(const double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return v[rank - 1];
}

static void die(const char *msg)
{
    fprintf(stderr, "core: %s\n", msg);
    exit(2);
}

/* --- Input generation ------------------------------------------------------ */

#define NDOCS 5

typedef struct doc {
    const char *title, *url, *filepath, *chunk_id, *content;
    double search_score, rerank_score;
} doc_t;

static const doc_t docs[NDOCS] = {
    {"X100 Manual", "https://docs.example.com/x100/manual.pdf", "x100/manual.pdf", "0",
     "The X100 charges via USB-C in 2 hours. A full charge lasts 14 hours of mixed use. "
     "Use the supplied 30 W adapter; slower adapters work but take up to 5 hours.",
     42.5, 3.2},
    {"Warranty FAQ", "https://support.example.com/faq/warranty.html", "faq/warranty.html", "1",
     "All devices come with a two-year limited warranty covering manufacturing defects. "
     "Accidental damage and water damage are not covered.",
     12.0, 2.7},
    {"Service centres", "https://docs.example.com/service/battery%20swap.html",
     "service/battery swap.html", "4",
     "Battery replacement is available at authorised service centres. Bring proof of "
     "purchase; a swap takes about 40 minutes.",
     9.61, 2.1},
    {"X100 Release notes", "https://docs.example.com/x100/release-notes.md", "x100/release-notes.md",
     "2",
     "Firmware 3.2 adds fast charging (0-80% in 45 minutes) and fixes a Bluetooth "
     "reconnect issue on Android 14.",
     7.25, 1.9},
    {"Safety sheet", "https://docs.example.com/safety/x100 (rev B).pdf", "safety/x100-revB.pdf",
     "3",
     "Do not charge the device above 45 \\u00b0C. Keep away from water; the X100 is rated "
     "IP54 (splash resistant), not waterproof.",
     3.3, 0.8},
};

static const char *const words[] = {
    " the",     " X100",     " charges",  " via",        " USB-C",    " in",
    " two",     " hours",    " and",      " a",          " full",     " charge",
    " lasts",   " about",    " fourteen", " of",         " mixed",    " use",
    " battery", " warranty", " covers",   " defects",    " service",  " centre",
    " can",     " replace",  " it",       " within",     " an",       " hour",
    " firmware", " update",  " adds",     " fast",       " charging", " support",
    " for",     " devices",  " that",     " are",        " still",    " under",
    " is",      " not",      " water",    " resistant",  " only",     " splash",
    " rated",   " IP54",     " you",      " should",     " bring",    " proof",
    " purchase", " adapter", " supplied", " 30",         " W",        " minutes",
    " caf\xc3\xa9", " \\\"quick\\\"", " mode",  " settings",   " menu",     " open",
};
#define NWORDS (sizeof(words) / sizeof(words[0]))

static const char ev_head[] =
    "data: {\"id\":\"chatcmpl-A1b2\",\"model\":\"gpt-4o\",\"created\":1757592280,"
    "\"object\":\"extensions.chat.completion.chunk\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"content\":\"";
static const char ev_tail[] =
    "\"},\"end_turn\":false,\"finish_reason\":null}],"
    "\"system_fingerprint\":\"fp_68a7d165bf\"}\n\n";

typedef struct gen_totals {
    uint64_t refs, refs_split, refs_url, events, content_bytes, content_events;
} gen_totals_t;

static void put_cstr(cg_buf_t *b, const char *s)
{
    cg_buf_puts(b, s);
}

static void put_context(cg_buf_t *b)
{
    put_cstr(b, "data: {\"id\":\"chatcmpl-A1b2\",\"model\":\"gpt-4o\",\"created\":1757592280,"
                "\"object\":\"extensions.chat.completion.chunk\",\"choices\":[{\"index\":0,"
                "\"delta\":{\"role\":\"assistant\",\"context\":{\"citations\":[");
    for (int i = 0; i < NDOCS; i++) {
        const doc_t *d = &docs[i];
        cg_buf_printf(b,
                      "%s{\"content\":\"%s\",\"title\":\"%s\",\"url\":\"%s\","
                      "\"filepath\":\"%s\",\"chunk_id\":\"%s\"}",
                      i ? "," : "", d->content, d->title, d->url, d->filepath, d->chunk_id);
    }
    put_cstr(b, "],\"intent\":\"[\\\"x100 charging\\\", \\\"x100 warranty\\\"]\","
                "\"all_retrieved_documents\":[");
    for (int i = 0; i < NDOCS; i++) {
        const doc_t *d = &docs[i];
        cg_buf_printf(b,
                      "%s{\"content\":\"%s\",\"title\":\"%s\",\"url\":\"%s\","
                      "\"filepath\":\"%s\",\"chunk_id\":\"%s\","
                      "\"search_queries\":[\"x100 charging\"],\"data_source_index\":0,"
                      "\"original_search_score\":%.2f,\"rerank_score\":%.1f}",
                      i ? "," : "", d->content, d->title, d->url, d->filepath, d->chunk_id,
                      d->search_score, d->rerank_score);
    }
    put_cstr(b, ",{\"content\":\"Cats sleep up to 16 hours a day.\",\"title\":\"X100 Manual\","
                "\"url\":\"https://docs.example.com/x100/manual.pdf\","
                "\"filepath\":\"x100/manual.pdf\",\"chunk_id\":\"7\","
                "\"search_queries\":[\"x100 charging\"],\"data_source_index\":0,"
                "\"original_search_score\":3.1,\"rerank_score\":0.4,"
                "\"filter_reason\":\"rerank\"}]}},\"end_turn\":false,\"finish_reason\":null}]}\n\n");
}

/* Appends one answer: context, nev content chunks, finish, [DONE]. */
static void gen_answer(cg_buf_t *b, unsigned nev, gen_totals_t *t)
{
    put_context(b);
    t->events++;
    char text[256];
    char carry[8] = ""; /* second half of a split reference */
    long to_ref = 150 + (long)rng_below(301); /* content bytes until the next reference */
    for (unsigned e = 0; e < nev; e++) {
        size_t n = 0;
        size_t cl = strlen(carry);
        memcpy(text, carry, cl);
        n = cl;
        carry[0] = '\0';
        size_t target = 4 + rng_below(29); /* 4..32 bytes of content, mean ~18 */
        while (n < target) {
            unsigned r = rng_below(100);
            const char *w;
            if (r < 3)
                w = ".\\n\\n"; /* paragraph break (JSON-escaped) */
            else if (r < 10)
                w = ",";
            else if (r < 14)
                w = ".";
            else if (r < 15)
                w = " **";
            else
                w = words[rng_below(NWORDS)];
            size_t wl = strlen(w);
            memcpy(text + n, w, wl);
            n += wl;
            to_ref -= (long)wl;
            if (to_ref > 0)
                continue;
            /* A reference " [docN]". */
            unsigned num = 1 + rng_below(NDOCS);
            char ref[16];
            int rl = snprintf(ref, sizeof(ref), "[doc%u]", num);
            text[n++] = ' ';
            t->refs++;
            if (docs[num - 1].url != NULL)
                t->refs_url++;
            to_ref = 150 + (long)rng_below(301);
            if (e + 1 < nev && rng_below(100) < 5) {
                /* Split across this chunk and the next: "[do" | "c2]". */
                unsigned cut = 1 + rng_below((unsigned)rl - 1);
                memcpy(text + n, ref, cut);
                n += cut;
                memcpy(carry, ref + cut, (size_t)rl - cut);
                carry[(size_t)rl - cut] = '\0';
                t->refs_split++;
                break;
            }
            memcpy(text + n, ref, (size_t)rl);
            n += (size_t)rl;
        }
        cg_buf_put(b, ev_head, sizeof(ev_head) - 1);
        cg_buf_put(b, text, n);
        cg_buf_put(b, ev_tail, sizeof(ev_tail) - 1);
        t->content_bytes += n;
        t->content_events++;
        t->events++;
    }
    put_cstr(b, "data: {\"id\":\"chatcmpl-A1b2\",\"model\":\"gpt-4o\",\"created\":1757592280,"
                "\"object\":\"extensions.chat.completion.chunk\",\"choices\":[{\"index\":0,"
                "\"delta\":{},\"end_turn\":true,\"finish_reason\":\"stop\"}],"
                "\"system_fingerprint\":\"fp_68a7d165bf\"}\n\n");
    put_cstr(b, "data: [DONE]\n\n");
    t->events += 2;
}

/* --- Anthropic Messages input (SPEC §6a) ------------------------------------ */

#define NWEB 5

static const char *const web_urls[NWEB] = {
    "https://docs.example.com/x100/manual.pdf",
    "https://support.example.com/faq/warranty.html",
    "https://docs.example.com/service/battery%20swap.html",
    "https://docs.example.com/x100/release-notes.md",
    "https://en.wikipedia.org/wiki/USB-C",
};

static void put_an_event(cg_buf_t *b, const char *type, const char *data)
{
    cg_buf_printf(b, "event: %s\ndata: %s\n\n", type, data);
}

static void put_an_citation(cg_buf_t *b, unsigned k, unsigned w, gen_totals_t *t)
{
    cg_buf_printf(b,
                  "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"
                  "%u,\"delta\":{\"type\":\"citations_delta\",\"citation\":{\"type\":"
                  "\"web_search_result_location\",\"cited_text\":\"%s\",\"url\":\"%s\",\"title\":"
                  "\"%s\",\"encrypted_index\":\"Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm..\"}}}\n\n",
                  k, docs[w].content, web_urls[w], docs[w].title);
    t->events++;
}

/* Starts text block k. The first cites all web results (their citations
 * are made there), each later one cites one of them again. */
static void put_an_block(cg_buf_t *b, unsigned k, gen_totals_t *t)
{
    cg_buf_printf(b,
                  "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"
                  "%u,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
                  k);
    t->events++;
    unsigned n = k == 0 ? NWEB : 1;
    for (unsigned i = 0; i < n; i++)
        put_an_citation(b, k, k == 0 ? i : rng_below(NWEB), t);
    /* Each cited source gets a reference at the block's end. */
    t->refs += n;
    t->refs_url += n;
}

/* Appends one anthropic answer: message_start, a ping, nev text_delta
 * events of 4-32 bytes of text in blocks of 300-500 bytes of text, each
 * citing web results (so each block's end appends references to rewrite),
 * the block and message ends. */
static void gen_anthropic_answer(cg_buf_t *b, unsigned nev, gen_totals_t *t)
{
    put_an_event(b, "message_start",
                 "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\","
                 "\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":"
                 "\"claude-sonnet-4-5-20250929\",\"stop_reason\":null,\"stop_sequence\":null,"
                 "\"usage\":{\"input_tokens\":2679,\"output_tokens\":3}}}");
    put_an_event(b, "ping", "{\"type\": \"ping\"}");
    t->events += 2;
    unsigned block = 0;
    long to_stop = 300 + (long)rng_below(201);
    put_an_block(b, block, t);
    for (unsigned e = 0; e < nev; e++) {
        char text[256];
        size_t n = 0, target = 4 + rng_below(29);
        while (n < target) {
            const char *w = rng_below(100) < 8 ? "," : words[rng_below(NWORDS)];
            memcpy(text + n, w, strlen(w));
            n += strlen(w);
        }
        cg_buf_printf(b,
                      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                      "\"index\":%u,\"delta\":{\"type\":\"text_delta\",\"text\":\"%.*s\"}}\n\n",
                      block, (int)n, text);
        t->content_bytes += n;
        t->content_events++;
        t->events++;
        to_stop -= (long)n;
        if (to_stop <= 0 && e + 1 < nev) {
            cg_buf_printf(b,
                          "event: content_block_stop\ndata: {\"type\":\"content_block_stop\","
                          "\"index\":%u}\n\n",
                          block);
            t->events++;
            put_an_block(b, ++block, t);
            to_stop = 300 + (long)rng_below(201);
        }
    }
    cg_buf_printf(b,
                  "event: content_block_stop\ndata: {\"type\":\"content_block_stop\","
                  "\"index\":%u}\n\n",
                  block);
    put_an_event(b, "message_delta",
                 "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\","
                 "\"stop_sequence\":null},\"usage\":{\"output_tokens\":2048}}");
    put_an_event(b, "message_stop", "{\"type\":\"message_stop\"}");
    t->events += 3;
}

/* --- Passes ---------------------------------------------------------------- */

typedef struct input {
    const cg_dialect_view_t *view; /* the upstream's dialect; NULL: openai */
    const char *p;
    size_t *off; /* answer i is p[off[i], off[i+1]) */
    size_t nans;
    size_t len;
    size_t nreads; /* reads per pass */
} input_t;

static cg_xform_t *new_xform(const input_t *in, const cg_xform_cfg_t *cfg)
{
    cg_xform_t *x = cg_xform_new(cfg, NULL);
    if (in->view)
        cg_xform_set_dialect(x, in->view, NULL, 1700000000);
    return x;
}

typedef struct xres {
    uint64_t ns;
    uint64_t out_bytes;
    uint64_t events;
    uint64_t allocs_total;  /* every allocation of the pass */
    uint64_t allocs_steady; /* during feeds after an answer's first two reads */
    uint64_t events_steady; /* events completed in those feeds */
    uint64_t feeds_steady;
    /* The same, split: the answer's last feed (it carries [DONE], so the
     * profile's end-of-stream source events are written in it) and the
     * feeds between the first two and the last. */
    uint64_t allocs_last, events_last;
    uint64_t allocs_mid, events_mid, feeds_mid, feeds_mid_alloc;
} xres_t;

static size_t out_bytes(const cg_out_t *o)
{
    size_t n = 0;
    for (size_t i = 0; i < o->nseg; i++)
        n += o->seg[i].n;
    return n;
}

/* One output for every call of every pass, as a worker keeps one for all its
 * streams: its arena and tokens grow once, in the untimed first pass. */
static cg_out_t worker_out;

/* One transformer pass. If lat_ns/lat_ev are given, every feed is timed. */
static xres_t xform_pass(const input_t *in, size_t rd, const cg_xform_cfg_t *cfg,
                         double *lat_read, double *lat_ev, size_t *nlat_read, size_t *nlat_ev)
{
    cg_out_t *out = &worker_out;
    xres_t r = {0};
    uint64_t a_start = alloc_count;
    uint64_t t0 = now_ns();
    for (size_t a = 0; a < in->nans; a++) {
        const char *p = in->p + in->off[a];
        size_t len = in->off[a + 1] - in->off[a];
        cg_xform_t *x = new_xform(in, cfg);
        const cg_xform_stats_t *st = cg_xform_stats(x);
        size_t k = 0;
        for (size_t pos = 0; pos < len; pos += rd, k++) {
            size_t n = len - pos < rd ? len - pos : rd;
            uint64_t a0 = alloc_count, e0 = st->events_in;
            uint64_t f0 = lat_read ? now_ns() : 0;
            cg_xform_feed(x, p + pos, n, out);
            if (lat_read) {
                uint64_t dt = now_ns() - f0;
                uint64_t ne = st->events_in - e0;
                lat_read[(*nlat_read)++] = (double)dt;
                if (ne)
                    lat_ev[(*nlat_ev)++] = (double)dt / (double)ne;
            }
            r.out_bytes += out_bytes(out);
            if (k >= 2) {
                uint64_t na = alloc_count - a0, ne = st->events_in - e0;
                r.allocs_steady += na;
                r.events_steady += ne;
                r.feeds_steady++;
                if (pos + n == len) {
                    r.allocs_last += na;
                    r.events_last += ne;
                } else {
                    r.allocs_mid += na;
                    r.events_mid += ne;
                    r.feeds_mid++;
                    r.feeds_mid_alloc += na != 0;
                }
            }
        }
        cg_xform_finish(x, CG_END_EOF, out);
        r.out_bytes += out_bytes(out);
        r.events += st->events_in;
        cg_xform_free(x);
    }
    r.ns = now_ns() - t0;
    r.allocs_total = alloc_count - a_start;
    return r;
}

static uint64_t memchr_pass(const input_t *in, size_t rd, uint64_t *lines)
{
    uint64_t t0 = now_ns();
    uint64_t nl = 0;
    for (size_t a = 0; a < in->nans; a++) {
        const char *p = in->p + in->off[a];
        size_t len = in->off[a + 1] - in->off[a];
        for (size_t pos = 0; pos < len; pos += rd) {
            size_t n = len - pos < rd ? len - pos : rd;
            const char *s = p + pos, *end = s + n;
            const char *q;
            while ((q = memchr(s, '\n', (size_t)(end - s))) != NULL) {
                nl++;
                s = q + 1;
            }
        }
    }
    uint64_t ns = now_ns() - t0;
    *lines = nl;
    return ns;
}

/* Adds x's counts to *sum (its time aside). */
static void add_counts(xres_t *sum, const xres_t *x)
{
    sum->events += x->events;
    sum->allocs_total += x->allocs_total;
    sum->allocs_steady += x->allocs_steady;
    sum->events_steady += x->events_steady;
    sum->feeds_steady += x->feeds_steady;
    sum->allocs_last += x->allocs_last;
    sum->events_last += x->events_last;
    sum->allocs_mid += x->allocs_mid;
    sum->events_mid += x->events_mid;
    sum->feeds_mid += x->feeds_mid;
    sum->feeds_mid_alloc += x->feeds_mid_alloc;
}

/* A dialect section's measurement: one pass of each to warm up, then
 * `rounds` transformer passes, each followed by a memchr pass over the
 * same reads. Their times (ns) go sorted into tx and tm, which the caller
 * frees; the passes' counts are summed into *sum, and the last pass is
 * returned. */
static xres_t time_rounds(const input_t *in, size_t rd, const cg_xform_cfg_t *cfg, size_t rounds,
                          double **tx, double **tm, xres_t *sum)
{
    uint64_t lines = 0;
    (void)xform_pass(in, rd, cfg, NULL, NULL, NULL, NULL);
    (void)memchr_pass(in, rd, &lines);
    *tx = malloc(rounds * sizeof(double));
    *tm = malloc(rounds * sizeof(double));
    if (*tx == NULL || *tm == NULL)
        die("out of memory");
    xres_t x = {0};
    memset(sum, 0, sizeof(*sum));
    for (size_t r = 0; r < rounds; r++) {
        x = xform_pass(in, rd, cfg, NULL, NULL, NULL, NULL);
        (*tx)[r] = (double)x.ns;
        add_counts(sum, &x);
        (*tm)[r] = (double)memchr_pass(in, rd, &lines);
    }
    qsort(*tx, rounds, sizeof(double), cmp_double);
    qsort(*tm, rounds, sizeof(double), cmp_double);
    return x;
}

static void append_out(cg_buf_t *b, const cg_out_t *o)
{
    for (size_t i = 0; i < o->nseg; i++)
        cg_buf_put(b, o->seg[i].p, o->seg[i].n);
}

/* Untimed: answer a of in through a new transformer in reads of rd, its
 * whole output in *all. The caller reads the transformer's stats, then
 * frees it. */
static cg_xform_t *run_answer(const input_t *in, size_t a, size_t rd, const cg_xform_cfg_t *cfg,
                              cg_buf_t *all)
{
    const char *p = in->p + in->off[a];
    size_t len = in->off[a + 1] - in->off[a];
    cg_xform_t *x = new_xform(in, cfg);
    cg_out_t out = {0};
    all->len = 0;
    for (size_t pos = 0; pos < len; pos += rd) {
        cg_xform_feed(x, p + pos, len - pos < rd ? len - pos : rd, &out);
        append_out(all, &out);
    }
    cg_xform_finish(x, CG_END_EOF, &out);
    append_out(all, &out);
    cg_out_free(&out);
    return x;
}

/* How many times needle starts in b. */
static uint64_t count_in(const cg_buf_t *b, const char *needle)
{
    uint64_t n = 0;
    size_t len = strlen(needle);
    for (const char *s = b->p, *end = b->p + b->len, *q;
         (q = memmem(s, (size_t)(end - s), needle, len)) != NULL; s = q + 1)
        n++;
    return n;
}

static bool ends_done(const cg_buf_t *b)
{
    return b->len >= 14 && memcmp(b->p + b->len - 14, "data: [DONE]\n\n", 14) == 0;
}

/* Untimed, over every answer: the links (`link` in the output), the events
 * the view read, the answers ending in [DONE], the malformed and truncated
 * ones. */
typedef struct answer_counts {
    uint64_t links, events, done, bad;
} answer_counts_t;

static answer_counts_t count_answers(const input_t *in, size_t rd, const cg_xform_cfg_t *cfg,
                                     const char *link)
{
    answer_counts_t c = {0};
    cg_buf_t all = {0};
    for (size_t a = 0; a < in->nans; a++) {
        cg_xform_t *x = run_answer(in, a, rd, cfg, &all);
        const cg_xform_stats_t *st = cg_xform_stats(x);
        c.links += count_in(&all, link);
        c.events += st->events_in;
        c.done += ends_done(&all);
        c.bad += st->malformed + st->truncated;
        cg_xform_free(x);
    }
    cg_buf_free(&all);
    return c;
}

/* A dialect section's rounds (time_rounds): the input's MB, the median
 * times (ns) of the view's passes and of memchr's, the counts summed. */
typedef struct view_times {
    double mb, x_med, m_med;
    size_t rounds;
    xres_t sum;
} view_times_t;

static view_times_t time_view(const input_t *in, size_t rd, const cg_xform_cfg_t *cfg,
                              size_t rounds)
{
    view_times_t v = {.mb = (double)in->len / 1e6, .rounds = rounds};
    double *tx, *tm;
    (void)time_rounds(in, rd, cfg, rounds, &tx, &tm, &v.sum);
    v.x_med = pct(tx, rounds, 50);
    v.m_med = pct(tm, rounds, 50);
    free(tx);
    free(tm);
    return v;
}

/* The steady feeds' allocations, and the bars of a dialect section. */
static void print_steady(const char *section, const view_times_t *v)
{
    const xres_t *s = &v->sum;
    printf("%s: steady feeds %" PRIu64 " allocations / %" PRIu64 " events (%" PRIu64
           " of %" PRIu64 " feeds allocated); bars: ratio >= 0.10 %s, 0 allocs/event steady %s\n",
           section, s->allocs_mid, s->events_mid, s->feeds_mid_alloc, s->feeds_mid,
           v->m_med / v->x_med >= 0.10 ? "PASS" : "MISS", s->allocs_mid == 0 ? "PASS" : "MISS");
}

/* A dialect section's figures, the line bench/README.md and
 * docs/performance.md quote (ratio=, allocs_per_event=), then `verify`
 * when not NULL. */
static void print_figures(const char *section, const view_times_t *v, const char *verify)
{
    const xres_t *s = &v->sum;
    double mid = s->events_mid ? (double)s->allocs_mid / (double)s->events_mid : 0;
    printf("%s: xform_MBps=%.1f memchr_MBps=%.1f ratio=%.4f ns_per_event=%.1f "
           "allocs_per_event=%.4f (steady feeds; with each answer's last feed: %.4f)%s%s\n",
           section, v->mb / (v->x_med / 1e9), v->mb / (v->m_med / 1e9), v->m_med / v->x_med,
           v->x_med / ((double)s->events / (double)v->rounds), mid,
           s->events_steady ? (double)s->allocs_steady / (double)s->events_steady : 0.0,
           verify ? " " : "", verify ? verify : "");
}

static const char *verify_word(int bad)
{
    return bad ? "verify FAIL" : "verify OK";
}

/* Untimed: every answer's full output, checked against what was generated. */
static int verify(const input_t *in, size_t rd, const cg_xform_cfg_t *cfg,
                  const gen_totals_t *gt)
{
    uint64_t links = 0, linked = 0, events = 0, done = 0, truncated = 0, passthrough = 0;
    uint64_t malformed = 0, cites_out = 0;
    cg_buf_t all = {0};
    for (size_t a = 0; a < in->nans; a++) {
        cg_xform_t *x = run_answer(in, a, rd, cfg, &all);
        links += count_in(&all, "](https://");
        const cg_xform_stats_t *st = cg_xform_stats(x);
        linked += st->refs_linked;
        events += st->events_in;
        done += st->saw_done;
        truncated += st->truncated;
        passthrough += st->passthrough;
        malformed += st->malformed;
        cites_out += st->citations_emitted;
        cg_xform_free(x);
    }
    cg_buf_free(&all);
    int ok = links == gt->refs_url && linked == gt->refs_url && events == gt->events &&
             done == in->nans && !truncated && !passthrough && !malformed;
    printf("verify (untimed): rewritten links \"](https://\" = %" PRIu64
           ", references generated with a URL = %" PRIu64 ", refs_linked = %" PRIu64
           ", events_in = %" PRIu64 " (generated %" PRIu64 "), answers with [DONE] = %" PRIu64
           "/%zu, malformed = %" PRIu64 ", source events = %" PRIu64 " -> %s\n",
           links, gt->refs_url, linked, events, gt->events, done, in->nans, malformed, cites_out,
           ok ? "OK" : "MISMATCH");
    return ok ? 0 : 1;
}

static const char *cpu_model(void)
{
    static char model[128] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return model;
    char line[256];
    while (fgets(line, sizeof(line), f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(model, sizeof(model), "%s", colon + 2);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
    }
    fclose(f);
    return model;
}

/* --- Dialect request translation ------------------------------------------- */

/* A typical Open WebUI RAG request, about 4 KB: the template's system
 * message with three <source> tags, two earlier turns, the question, and
 * the usual members. */
static void dialect_body(cg_buf_t *b)
{
    cg_buf_puts(b, "{\"model\":\"claude-sonnet-4-5\",\"stream\":true,"
                   "\"stream_options\":{\"include_usage\":true},\"temperature\":0.3,"
                   "\"max_tokens\":1024,\"user\":\"u-42\",\"metadata\":{\"chat_id\":\"c-7\"},"
                   "\"messages\":[{\"role\":\"system\",\"content\":\"### Task:\\nRespond using "
                   "the provided context, adding inline citations [id] only when the <source> "
                   "tag explicitly contains an id attribute (e.g., <source id=\\\"1\\\">).\\n\\n"
                   "<context>\\n");
    for (int i = 0; i < 3; i++) {
        const doc_t *d = &docs[i];
        cg_buf_printf(b, "<source id=\\\"%d\\\" name=\\\"%s\\\">", i + 1, d->url);
        for (int k = 0; k < 8; k++)
            cg_buf_printf(b, "%s ", d->content);
        cg_buf_puts(b, "</source>\\n");
    }
    cg_buf_puts(b, "</context>\"},"
                   "{\"role\":\"user\",\"content\":\"How long does the X100 take to charge?\"},"
                   "{\"role\":\"assistant\",\"content\":\"About 2 hours with the supplied 30 W "
                   "adapter [1].\"},"
                   "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"And is a "
                   "battery swap covered by the warranty? Caf\\u00e9 question: "
                   "\\\"yes\\\"/no\"}]}]}");
}

typedef int (*dialect_fn)(const char *body, size_t len, const cg_request_t *req);

static int run_parse(const char *body, size_t len, const cg_request_t *req)
{
    (void)req;
    cg_cite_opts_t o = {8192, true};
    cg_request_t r;
    int rc = cg_request_parse(&r, body, len, &o);
    cg_request_free(&r);
    return rc;
}

/* A registered dialect (the bench names only those it was built with). */
static const cg_dialect_t *dialect(const char *name)
{
    const cg_dialect_t *d;
    if (!cg_dialect_parse(name, &d))
        die("unknown dialect");
    return d;
}

static int run_translate(const cg_dialect_t *d, const char *body, size_t len,
                         const cg_request_t *req)
{
    cg_dialect_req_t out;
    cg_dialect_err_t err;
    cg_dialect_in_t in = {.req = req};
    int rc = cg_dialect_request(d, body, len, &in, &out, &err);
    cg_dialect_req_free(&out);
    return rc;
}

static int run_anthropic(const char *body, size_t len, const cg_request_t *req)
{
    return run_translate(dialect("anthropic"), body, len, req);
}

static int run_responses(const char *body, size_t len, const cg_request_t *req)
{
    return run_translate(dialect("responses"), body, len, req);
}

/* Median ns per call over ROUNDS alternating rounds of ITERS calls each,
 * and heap allocations per call. */
static void bench_dialect(void)
{
    enum { ROUNDS = 7, ITERS = 4000, NFN = 3 };
    static const dialect_fn fns[NFN] = {run_parse, run_anthropic, run_responses};
    cg_buf_t b = {0};
    dialect_body(&b);
    cg_cite_opts_t o = {8192, true};
    cg_request_t req;
    if (cg_request_parse(&req, b.p, b.len, &o) != 0 || req.sources.n != 3)
        die("dialect body does not parse");
    double t[NFN][ROUNDS];
    uint64_t allocs[NFN] = {0};
    for (int f = 0; f < NFN; f++)
        if (fns[f](b.p, b.len, &req) != 0) /* warm-up, and a check */
            die("dialect translation refused the benchmark body");
    for (int r = 0; r < ROUNDS; r++) {
        for (int f = 0; f < NFN; f++) {
            uint64_t a0 = alloc_count, t0 = now_ns();
            for (int i = 0; i < ITERS; i++)
                fns[f](b.p, b.len, &req);
            t[f][r] = (double)(now_ns() - t0) / ITERS;
            allocs[f] += alloc_count - a0;
        }
    }
    double med[NFN];
    for (int f = 0; f < NFN; f++) {
        qsort(t[f], ROUNDS, sizeof(double), cmp_double);
        med[f] = pct(t[f], ROUNDS, 50);
    }
    printf("dialect_req: body_bytes=%zu request_parse_ns=%.0f anthropic_ns=%.0f "
           "responses_ns=%.0f (median of %d rounds x %d calls; allocs/call %.1f / %.1f / %.1f)\n",
           b.len, med[0], med[1], med[2], ROUNDS, ITERS, (double)allocs[0] / (ROUNDS * ITERS),
           (double)allocs[1] / (ROUNDS * ITERS), (double)allocs[2] / (ROUNDS * ITERS));
    cg_request_free(&req);
    cg_buf_free(&b);
}

/* --- Input of whole answers ------------------------------------------------ */

typedef void (*gen_fn)(cg_buf_t *b, unsigned nev, gen_totals_t *t);

/* Whole answers from gen until buf holds at least target bytes. */
static void make_input(input_t *in, cg_buf_t *buf, size_t target, unsigned nev, size_t rd,
                       gen_fn gen, gen_totals_t *gt)
{
    size_t cap = 64, nans = 0;
    size_t *off = malloc(cap * sizeof(size_t));
    if (off == NULL)
        die("out of memory");
    off[0] = 0;
    while (buf->len < target) {
        gen(buf, nev, gt);
        if (nans + 2 > cap) {
            cap *= 2;
            off = realloc(off, cap * sizeof(size_t));
            if (off == NULL)
                die("out of memory");
        }
        off[++nans] = buf->len;
    }
    *in = (input_t){NULL, buf->p, off, nans, buf->len, 0};
    for (size_t a = 0; a < nans; a++)
        in->nreads += (off[a + 1] - off[a] + rd - 1) / rd;
}

/* The anthropic view on inputs of the main measurement's size: median
 * round, ns per upstream event, and the steady state's heap allocations
 * (the feeds between an answer's first two and its last). Returns 1 when
 * its verify fails. */
static int bench_anthropic(size_t target, unsigned nev, size_t rd, size_t rounds,
                           const cg_xform_cfg_t *cfg)
{
    cg_buf_t buf = {0};
    gen_totals_t gt = {0};
    input_t in;
    make_input(&in, &buf, target, nev, rd, gen_anthropic_answer, &gt);
    in.view = cg_dialect_view(dialect("anthropic"));
    printf("\nanthropic input: %.2f MiB, %zu answers, %" PRIu64 " events (%" PRIu64
           " text_delta of %.1f bytes of text on average), avg %.1f bytes/event\n",
           (double)in.len / 1048576.0, in.nans, gt.events, gt.content_events,
           (double)gt.content_bytes / (double)gt.content_events,
           (double)in.len / (double)gt.events);
    int bad = verify(&in, rd, cfg, &gt);
    double *t, *tm;
    xres_t sum, x = time_rounds(&in, rd, cfg, rounds, &t, &tm, &sum);
    double med = pct(t, rounds, 50), m_med = pct(tm, rounds, 50);
    double mbps = (double)in.len / 1e6 / (med / 1e9);
    double allocs = sum.events_mid ? (double)sum.allocs_mid / (double)sum.events_mid : 0;
    printf("anthropic: steady feeds %" PRIu64 " allocations / %" PRIu64
           " events; all: %.4f allocations per event; bars: >= 1000 MB/s %s, 0 allocs/event "
           "steady %s\n",
           sum.allocs_mid, sum.events_mid, (double)sum.allocs_total / (double)sum.events,
           mbps >= 1000 ? "PASS" : "MISS", sum.allocs_mid == 0 ? "PASS" : "MISS");
    printf("anthropic: xform_MBps=%.1f memchr_MBps=%.1f ratio=%.4f ns_per_event=%.1f "
           "allocs_per_event=%.4f (median of %zu rounds) %s\n",
           mbps, (double)in.len / 1e6 / (m_med / 1e9), m_med / med, med / (double)x.events, allocs,
           rounds, verify_word(bad));
    free(t);
    free(tm);
    free(in.off);
    cg_buf_free(&buf);
    return bad;
}

/* --- The responses view ----------------------------------------------------- */

/* Answers as an OpenAI Responses upstream streams them: created,
 * output_text.delta events with content made like the chunks above (the same
 * words, escapes and lengths) and the members real deltas carry
 * (sequence_number, item_id, logprobs, obfuscation); with markers, an Azure
 * AI Foundry marker 【4:k†source】 where a reference would be, each followed
 * by the url_citation annotation that covers it; then response.completed
 * with the whole text and its annotations. */

#define RS_ITEM "msg_68a7d165bf0c8190a39b619f4c8455ef087bb177ab789d5c"
#define RS_RESPONSE                                                                            \
    "\"id\":\"resp_68a7d165bf0c8190b16dbee19bc54e5f\",\"object\":\"response\","             \
    "\"created_at\":1757592280,\"error\":null,\"incomplete_details\":null,"                   \
    "\"instructions\":null,\"max_output_tokens\":null,\"model\":\"gpt-4.1\","                \
    "\"parallel_tool_calls\":true,\"previous_response_id\":null,\"store\":true,"              \
    "\"temperature\":1.0,\"text\":{\"format\":{\"type\":\"text\"}},\"tool_choice\":\"auto\"," \
    "\"tools\":[],\"top_p\":1.0,\"truncation\":\"disabled\",\"user\":null,\"metadata\":{}"

typedef struct rs_totals {
    uint64_t events, markers;
} rs_totals_t;

/* Code points of JSON string bytes (whole escapes; a \u escape of a low
 * surrogate ends the character its high one began). */
static unsigned raw_cp(const char *s, size_t n)
{
    unsigned cp = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\') {
            bool low = i + 2 < n && s[i + 1] == 'u' && (s[i + 2] == 'd' || s[i + 2] == 'D') &&
                       i + 3 < n && strchr("cdefCDEF", s[i + 3]);
            cp += !low;
            i += s[i + 1] == 'u' ? 5 : 1;
        } else {
            cp += ((unsigned char)s[i] & 0xC0) != 0x80;
        }
    }
    return cp;
}

static void rs_annotation(cg_buf_t *b, unsigned start, unsigned end, const doc_t *d)
{
    cg_buf_printf(b,
                  "{\"type\":\"url_citation\",\"start_index\":%u,\"end_index\":%u,\"url\":\"%s\","
                  "\"title\":\"%s\"}",
                  start, end, d->url, d->title);
}

/* Appends one answer of nev deltas; with markers, a marker and its
 * annotation about every 300 content bytes. */
static void gen_rs_answer(cg_buf_t *b, unsigned nev, bool markers, rs_totals_t *t)
{
    cg_buf_t text = {0}, anns = {0};
    unsigned seq = 0, cp = 0, nann = 0;
    cg_buf_printf(b,
                  "event: response.created\ndata: {\"type\":\"response.created\","
                  "\"sequence_number\":%u,\"response\":{" RS_RESPONSE
                  ",\"status\":\"in_progress\",\"output\":[],\"usage\":null}}\n\n",
                  seq++);
    long to_ref = 150 + (long)rng_below(301);
    for (unsigned e = 0; e < nev; e++) {
        char piece[160];
        size_t n = 0, target = 4 + rng_below(29);
        int marker = -1;
        unsigned start = 0;
        while (n < target) {
            const char *w = words[rng_below(NWORDS)];
            unsigned r = rng_below(100);
            w = r < 3 ? ".\\n\\n" : r < 10 ? "," : r < 14 ? "." : w;
            memcpy(piece + n, w, strlen(w));
            n += strlen(w);
            to_ref -= (long)strlen(w);
            if (to_ref > 0 || !markers)
                continue;
            marker = (int)rng_below(NDOCS);
            start = cp + raw_cp(piece, n);
            n += (size_t)snprintf(piece + n, sizeof(piece) - n, "\xE3\x80\x90" "4:%d\xE2\x80\xA0source\xE3\x80\x91", marker);
            to_ref = 150 + (long)rng_below(301);
            break;
        }
        cg_buf_printf(b,
                      "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\","
                      "\"sequence_number\":%u,\"item_id\":\"" RS_ITEM "\",\"output_index\":0,"
                      "\"content_index\":0,\"delta\":\"%.*s\",\"logprobs\":[],\"obfuscation\":\"%.*s\"}\n\n",
                      seq++, (int)n, piece, (int)(1 + rng_below(12)), "Xy7aQ2Lm4Rt9Zp");
        t->events++;
        cg_buf_put(&text, piece, n);
        cp += raw_cp(piece, n);
        if (marker < 0)
            continue;
        cg_buf_printf(b,
                      "event: response.output_text.annotation.added\ndata: {\"type\":"
                      "\"response.output_text.annotation.added\",\"sequence_number\":%u,"
                      "\"item_id\":\"" RS_ITEM "\",\"output_index\":0,\"content_index\":0,"
                      "\"annotation_index\":%u,\"annotation\":",
                      seq++, nann);
        size_t from = b->len;
        rs_annotation(b, start, cp, &docs[marker]);
        if (anns.len)
            cg_buf_putc(&anns, ',');
        cg_buf_put(&anns, b->p + from, b->len - from);
        cg_buf_puts(b, "}\n\n");
        nann++;
        t->events++;
        t->markers++;
    }
    cg_buf_printf(b,
                  "event: response.completed\ndata: {\"type\":\"response.completed\","
                  "\"sequence_number\":%u,\"response\":{" RS_RESPONSE
                  ",\"status\":\"completed\",\"output\":[{\"id\":\"" RS_ITEM "\",\"type\":\"message\","
                  "\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
                  "\"annotations\":[%.*s],\"logprobs\":[],\"text\":\"%.*s\"}]}],"
                  "\"usage\":{\"input_tokens\":4210,\"output_tokens\":%u,\"total_tokens\":%u}}}\n\n",
                  seq, (int)anns.len, anns.p ? anns.p : "", (int)text.len, text.p ? text.p : "",
                  nev, 4210 + nev);
    t->events += 2;
    cg_buf_free(&text);
    cg_buf_free(&anns);
}

/* Untimed: each answer ends in [DONE], every marker became a link, and the
 * view read every event. */
static int verify_rs(const input_t *in, size_t rd, const cg_xform_cfg_t *cfg, const rs_totals_t *t)
{
    answer_counts_t c = count_answers(in, rd, cfg, "](https://");
    uint64_t links = c.links, events = c.events, done = c.done, bad = c.bad;
    int ok = links == t->markers && events == t->events && done == in->nans && bad == 0;
    printf("responses verify (untimed): links = %" PRIu64 ", markers generated = %" PRIu64
           ", events_in = %" PRIu64 " (generated %" PRIu64 "), answers with [DONE] = %" PRIu64
           "/%zu, malformed + truncated = %" PRIu64 " -> %s\n",
           links, t->markers, events, t->events, done, in->nans, bad, ok ? "OK" : "MISMATCH");
    return ok ? 0 : 1;
}

/* Median MB/s of the view and of memchr over rounds alternating the two, and
 * heap allocations per event in the feeds between each answer's first two
 * and its last (the steady state); returns 1 when verification fails. */
static int bench_responses(size_t mib, size_t rd, size_t rounds, unsigned nev, bool markers,
                           const cg_xform_cfg_t *cfg)
{
    cg_buf_t buf = {0};
    rs_totals_t t = {0};
    size_t cap = 64, nans = 0;
    size_t *off = malloc(cap * sizeof(size_t));
    if (off == NULL)
        die("out of memory");
    off[0] = 0;
    while (buf.len < mib << 20) {
        gen_rs_answer(&buf, nev, markers, &t);
        if (nans + 2 > cap && (off = realloc(off, (cap *= 2) * sizeof(size_t))) == NULL)
            die("out of memory");
        off[++nans] = buf.len;
    }
    input_t in = {cg_dialect_view(dialect("responses")), buf.p, off, nans, buf.len, 0};
    printf("\nresponses input%s: %.2f MiB, %zu answers, %" PRIu64 " events (%.1f bytes/event), %"
           PRIu64 " markers with their annotations\n", markers ? " with markers" : "",
           (double)buf.len / 1048576.0, nans, t.events, (double)buf.len / (double)t.events,
           t.markers);
    int bad = verify_rs(&in, rd, cfg, &t);
    view_times_t v = time_view(&in, rd, cfg, rounds);
    print_figures(markers ? "responses_markers" : "responses", &v, NULL);
    free(off);
    cg_buf_free(&buf);
    return bad;
}

/* --- The gemini view --------------------------------------------------------- */

/* Answers as a Gemini API upstream streams them with Google Search on:
 * streamGenerateContent events (CRLF CRLF, no [DONE]) whose one text part
 * has 4-32 bytes of text made like the chunks above (the same words, JSON
 * escapes and UTF-8), an empty groundingMetadata and a usage snapshot each;
 * the last event brings the finish and the grounding: the five web chunks
 * behind grounding-api-redirect URLs and a support about every 300 bytes
 * of text, at its byte offset, citing one or two of them (the first five
 * cite each in turn). Each answer's references go out as one delta at its
 * end, which openwebui rewrites into five links. */

#define GM_CHUNKS 5
#define GM_META   ",\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"k3SOaKHyNYmH1dkPgN2y8Qc\"}"

/* Bytes of text that raw JSON string bytes s[0..n) decode to: the words
 * hold two-byte escapes only. */
static size_t gm_decoded(const char *s, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++, d++)
        i += s[i] == '\\';
    return d;
}

static void gm_support(cg_buf_t *b, bool first, uint64_t end, unsigned k)
{
    unsigned second = rng_below(GM_CHUNKS);
    cg_buf_printf(b, "%s{\"segment\": {\"endIndex\": %" PRIu64 "},\"groundingChunkIndices\": [%u",
                  first ? "" : ",", end, k);
    if (second != k && rng_below(2))
        cg_buf_printf(b, ", %u", second);
    cg_buf_puts(b, "]}");
}

/* One text piece of 4-32 bytes (and a last word) for the gemini and cohere
 * answers: words, commas and JSON-escaped paragraph breaks; returns its
 * length. */
static size_t plain_words(char *piece)
{
    size_t n = 0, target = 4 + rng_below(29);
    while (n < target) {
        unsigned r = rng_below(100);
        const char *w = r < 3 ? ".\\n\\n" : r < 10 ? "," : words[rng_below(NWORDS)];
        memcpy(piece + n, w, strlen(w));
        n += strlen(w);
    }
    return n;
}

static void gen_gemini_answer(cg_buf_t *b, unsigned nev, gen_totals_t *t)
{
    cg_buf_t supports = {0};
    uint64_t text = 0;
    unsigned nsup = 0;
    long to_support = 150 + (long)rng_below(301);
    for (unsigned e = 0; e < nev; e++) {
        char piece[160];
        size_t n = plain_words(piece);
        bool last = e + 1 == nev;
        text += gm_decoded(piece, n);
        to_support -= (long)n;
        if (to_support <= 0 || last) {
            gm_support(&supports, nsup == 0, text, nsup < GM_CHUNKS ? nsup : rng_below(GM_CHUNKS));
            nsup++;
            to_support = 150 + (long)rng_below(301);
        }
        cg_buf_printf(b,
                      "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"%.*s\"}],"
                      "\"role\": \"model\"},",
                      (int)n, piece);
        if (last) {
            cg_buf_puts(b, "\"finishReason\": \"STOP\",\"index\": 0,\"groundingMetadata\": "
                           "{\"webSearchQueries\": [\"x100 charging time\"],\"groundingChunks\": [");
            for (unsigned k = 0; k < GM_CHUNKS; k++)
                cg_buf_printf(b,
                              "%s{\"web\": {\"uri\": \"https://vertexaisearch.cloud.google.com/"
                              "grounding-api-redirect/AUZIYQ%u\",\"title\": \"%s\"}}",
                              k ? "," : "", k, k % 2 ? "example.com" : "docs.example.com");
            cg_buf_printf(b, "],\"groundingSupports\": [%.*s]}}],", (int)supports.len,
                          supports.p ? supports.p : "");
        } else {
            cg_buf_puts(b, "\"index\": 0,\"groundingMetadata\": {}}],");
        }
        cg_buf_printf(b,
                      "\"usageMetadata\": {\"promptTokenCount\": 2679,\"candidatesTokenCount\": "
                      "%u,\"totalTokenCount\": %u,\"promptTokensDetails\": [{\"modality\": "
                      "\"TEXT\",\"tokenCount\": 2679}]}" GM_META "\r\n\r\n",
                      e + 1, 2680 + e);
        t->content_bytes += n;
        t->content_events++;
        t->events++;
    }
    cg_buf_free(&supports);
}

/* Untimed: each answer ends in [DONE] with its five references linked, and
 * the view read every event. */
static int verify_gemini(const input_t *in, size_t rd, const cg_xform_cfg_t *cfg,
                         const gen_totals_t *gt)
{
    answer_counts_t c = count_answers(in, rd, cfg, "](https://vertexaisearch");
    uint64_t links = c.links, events = c.events, done = c.done, bad = c.bad;
    int ok = links == GM_CHUNKS * in->nans && events == gt->events && done == in->nans && bad == 0;
    printf("gemini verify (untimed): links = %" PRIu64 " (%u per answer: %" PRIu64
           "), events_in = %" PRIu64 " (generated %" PRIu64 "), answers with [DONE] = %" PRIu64
           "/%zu, malformed + truncated = %" PRIu64 " -> %s\n",
           links, GM_CHUNKS, (uint64_t)GM_CHUNKS * in->nans, events, gt->events, done, in->nans,
           bad, ok ? "OK" : "MISMATCH");
    return ok ? 0 : 1;
}

/* Median MB/s of the view and of memchr over rounds alternating the two,
 * and heap allocations per event in the feeds between each answer's first
 * two and its last; returns 1 when verification fails. */
static int bench_gemini(size_t mib, size_t rd, size_t rounds, unsigned nev,
                        const cg_xform_cfg_t *cfg)
{
    cg_buf_t buf = {0};
    gen_totals_t gt = {0};
    input_t in;
    make_input(&in, &buf, mib << 20, nev, rd, gen_gemini_answer, &gt);
    in.view = cg_dialect_view(dialect("gemini"));
    printf("\ngemini input: %.2f MiB, %zu answers, %" PRIu64 " events (%.1f bytes of text, "
           "%.1f bytes each)\n",
           (double)in.len / 1048576.0, in.nans, gt.events,
           (double)gt.content_bytes / (double)gt.content_events, (double)in.len / (double)gt.events);
    int bad = verify_gemini(&in, rd, cfg, &gt);
    view_times_t v = time_view(&in, rd, cfg, rounds);
    printf("gemini: bars: ratio >= 0.10 %s, 0 allocs/event steady %s\n",
           v.m_med / v.x_med >= 0.10 ? "PASS" : "MISS", v.sum.allocs_mid == 0 ? "PASS" : "MISS");
    print_figures("gemini", &v, verify_word(bad));
    free(in.off);
    cg_buf_free(&buf);
    return bad;
}

/* --- The bedrock view --------------------------------------------------------- */

/* Answers as Amazon Bedrock's ConverseStream sends them, in AWS's binary
 * event stream (application/vnd.amazon.eventstream; every message framed
 * here, with both CRCs): messageStart; per content block, contentBlockDelta
 * text deltas made like the chunks above (4-32 bytes of text: the same
 * words, JSON escapes and UTF-8) and citation deltas, then contentBlockStop;
 * messageStop; metadata with the usage. Every payload carries the padding
 * member "p" that Bedrock adds, 0-40 random letters. The text is cut into
 * blocks of 300-500 bytes. The first block cites every source: five web
 * results as Nova's web grounding cites them (location.web {domain, url})
 * and three documents as Claude cites a request's documents
 * (location.documentChar with a title and sourceContent); each later block
 * cites none, one or two of them. A citation comes before the block's text
 * or after it (the order is not documented), and half of the document
 * citations have their sourceContent continued in a delta of its own. At
 * each block's stop the view appends one [N] per distinct source the block
 * cited, which openwebui turns into a link for the web ones. */

#define BR_NSRC 8

/* The sources in the order the first block cites them: web result i or
 * document i (a request-side document, docs[i]). */
static const struct {
    bool web;
    unsigned i;
} br_src[BR_NSRC] = {{true, 0}, {false, 0}, {true, 1}, {false, 1},
                     {true, 2}, {false, 2}, {true, 3}, {true, 4}};

typedef struct br_totals {
    uint64_t cites, conts, blocks;
} br_totals_t;

/* What the generator adds up, and, when `want` is set, each answer's
 * expected content (raw JSON string bytes, links included). */
static struct {
    br_totals_t t;
    bool want;
    cg_buf_t text;
    size_t *off; /* answer i is text.p[off[i], off[i+1]) */
    size_t n, cap;
} br;

static cg_buf_t br_pl; /* the payload being made */

static void br_put32(cg_buf_t *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    cg_buf_put(b, x, 4);
}

/* A string header (type 7). */
static size_t br_header(uint8_t *h, size_t at, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    h[at++] = (uint8_t)nl;
    memcpy(h + at, name, nl);
    at += nl;
    h[at++] = 7;
    h[at++] = (uint8_t)(vl >> 8);
    h[at++] = (uint8_t)vl;
    memcpy(h + at, value, vl);
    return at + vl;
}

/* Appends br_pl as one event message of that type, with Bedrock's three
 * headers in the order its captures show. */
static void br_event(cg_buf_t *b, const char *type, gen_totals_t *t)
{
    uint8_t h[128];
    size_t hl = br_header(h, 0, ":event-type", type);
    hl = br_header(h, hl, ":content-type", "application/json");
    hl = br_header(h, hl, ":message-type", "event");
    size_t start = b->len;
    uint32_t total = (uint32_t)(CG_EVS_MIN_MESSAGE + hl + br_pl.len);
    br_put32(b, total);
    br_put32(b, (uint32_t)hl);
    br_put32(b, cg_crc32(0, b->p + start, 8));
    cg_buf_put(b, h, hl);
    cg_buf_put(b, br_pl.p, br_pl.len);
    br_put32(b, cg_crc32(0, b->p + start, total - 4));
    t->events++;
}

/* Bedrock's padding: "p" and 0-40 random letters. */
static void br_pad(cg_buf_t *b)
{
    static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    unsigned n = rng_below(41);
    cg_buf_puts(b, "\"p\":\"");
    for (unsigned i = 0; i < n; i++)
        cg_buf_putc(b, letters[rng_below(sizeof(letters) - 1)]);
    cg_buf_putc(b, '"');
}

static void br_domain(unsigned w, const char **p, int *n)
{
    *p = web_urls[w] + 8; /* after https:// */
    *n = (int)strcspn(*p, "/");
}

/* The citation delta(s) of source s in block k. */
static void br_cite(cg_buf_t *b, unsigned k, unsigned s, gen_totals_t *t)
{
    br_pl.len = 0;
    unsigned i = br_src[s].i;
    if (br_src[s].web) {
        const char *dom;
        int dn;
        br_domain(i, &dom, &dn);
        cg_buf_printf(&br_pl,
                      "{\"contentBlockIndex\":%u,\"delta\":{\"citation\":{\"location\":{\"web\":"
                      "{\"domain\":\"%.*s\",\"url\":\"%s\"}}}},",
                      k, dn, dom, web_urls[i]);
        br_pad(&br_pl);
        cg_buf_putc(&br_pl, '}');
        br_event(b, "contentBlockDelta", t);
        br.t.cites++;
        return;
    }
    /* A document: its text whole, or cut at a space and continued. */
    const char *text = docs[i].content;
    size_t len = strlen(text), cut = len;
    if (rng_below(2)) {
        cut = len / 3 + rng_below((unsigned)(len / 3));
        while (cut < len && text[cut] != ' ')
            cut++;
    }
    unsigned start = rng_below(400);
    cg_buf_printf(&br_pl,
                  "{\"contentBlockIndex\":%u,\"delta\":{\"citation\":{\"location\":{"
                  "\"documentChar\":{\"documentIndex\":%u,\"end\":%zu,\"start\":%u}},"
                  "\"sourceContent\":[{\"text\":\"%.*s\"}],\"title\":\"source-%u\"}},",
                  k, i, start + len, start, (int)cut, text, i + 1);
    br_pad(&br_pl);
    cg_buf_putc(&br_pl, '}');
    br_event(b, "contentBlockDelta", t);
    br.t.cites++;
    if (cut == len)
        return;
    br_pl.len = 0;
    cg_buf_printf(&br_pl,
                  "{\"contentBlockIndex\":%u,\"delta\":{\"citation\":{\"sourceContent\":[{"
                  "\"text\":\"%s\"}]}},",
                  k, text + cut);
    br_pad(&br_pl);
    cg_buf_putc(&br_pl, '}');
    br_event(b, "contentBlockDelta", t);
    br.t.conts++;
}

/* 4-32 bytes of a delta's text, as JSON string bytes (the words, escapes
 * and UTF-8 of the chunks above), into text; returns their length. */
static size_t br_words(char *text)
{
    size_t n = 0, target = 4 + rng_below(29);
    while (n < target) {
        unsigned r = rng_below(100);
        const char *w = r < 3    ? ".\\n\\n"
                        : r < 10 ? ","
                        : r < 14 ? "."
                                 : words[rng_below(NWORDS)];
        memcpy(text + n, w, strlen(w));
        n += strlen(w);
    }
    return n;
}

/* Where each answer's expected content starts and ends in br.text. */
static void br_answer_begin(void)
{
    if (br.want && br.n == 0) {
        br.off = realloc(br.off, (br.cap = 64) * sizeof(size_t));
        if (br.off == NULL)
            die("out of memory");
        br.off[0] = 0;
    }
}

static void br_answer_end(void)
{
    if (br.want) {
        if (br.n + 2 > br.cap && (br.off = realloc(br.off, (br.cap *= 2) * sizeof(size_t))) == NULL)
            die("out of memory");
        br.off[++br.n] = br.text.len;
    }
}

/* The reference the view writes for source s, numbered by first citation
 * in the answer (num, next), into the expected content: a link for a web
 * result, as openwebui makes it. */
static void br_expect_ref(unsigned s, unsigned *num, unsigned *next, gen_totals_t *t)
{
    if (num[s] == 0)
        num[s] = ++*next;
    t->refs++;
    if (br_src[s].web)
        t->refs_url++;
    if (!br.want)
        return;
    if (br_src[s].web)
        cg_buf_printf(&br.text, "[[%u]](%s)", num[s], web_urls[br_src[s].i]);
    else
        cg_buf_printf(&br.text, "[%u]", num[s]);
}

typedef struct br_block {
    unsigned k, n, src[BR_NSRC];
    bool before[BR_NSRC];
} br_block_t;

/* Block k's citations; those that come before its text go out now. */
static void br_block_start(cg_buf_t *b, br_block_t *bl, unsigned k, gen_totals_t *t)
{
    bl->k = k;
    unsigned r = rng_below(100);
    bl->n = k == 0 ? BR_NSRC : r < 25 ? 0 : r < 75 ? 1 : 2;
    for (unsigned c = 0; c < bl->n; c++) {
        bl->src[c] = k == 0 ? c : rng_below(BR_NSRC);
        bl->before[c] = rng_below(2);
    }
    for (unsigned c = 0; c < bl->n; c++)
        if (bl->before[c])
            br_cite(b, k, bl->src[c], t);
    br.t.blocks++;
}

/* The citations after the text, the stop, and the references the view
 * appends: one per distinct source, in the order of the block's citation
 * deltas, numbered by first citation in the answer. */
static void br_block_stop(cg_buf_t *b, const br_block_t *bl, unsigned *num, unsigned *next,
                          gen_totals_t *t)
{
    unsigned order[BR_NSRC], n = 0;
    for (int pass = 1; pass >= 0; pass--)
        for (unsigned c = 0; c < bl->n; c++)
            if (bl->before[c] == (bool)pass)
                order[n++] = bl->src[c];
    for (unsigned c = 0; c < bl->n; c++)
        if (!bl->before[c])
            br_cite(b, bl->k, bl->src[c], t);
    br_pl.len = 0;
    cg_buf_printf(&br_pl, "{\"contentBlockIndex\":%u,", bl->k);
    br_pad(&br_pl);
    cg_buf_putc(&br_pl, '}');
    br_event(b, "contentBlockStop", t);
    bool seen[BR_NSRC] = {false};
    for (unsigned c = 0; c < n; c++) {
        unsigned s = order[c];
        if (num[s] == 0)
            num[s] = ++*next;
        if (!seen[s])
            br_expect_ref(s, num, next, t);
        seen[s] = true;
    }
}

/* Appends one bedrock answer: messageStart, nev text deltas in blocks with
 * their citations and stops, messageStop, metadata. */
static void gen_bedrock_answer(cg_buf_t *b, unsigned nev, gen_totals_t *t)
{
    br_answer_begin();
    br_pl.len = 0;
    cg_buf_putc(&br_pl, '{');
    br_pad(&br_pl);
    cg_buf_puts(&br_pl, ",\"role\":\"assistant\"}");
    br_event(b, "messageStart", t);
    unsigned num[BR_NSRC] = {0}, next = 0, block = 0;
    br_block_t bl;
    br_block_start(b, &bl, block, t);
    long to_stop = 300 + (long)rng_below(201);
    for (unsigned e = 0; e < nev; e++) {
        char text[160];
        size_t n = br_words(text);
        br_pl.len = 0;
        cg_buf_printf(&br_pl, "{\"contentBlockIndex\":%u,\"delta\":{\"text\":\"%.*s\"},", block,
                      (int)n, text);
        br_pad(&br_pl);
        cg_buf_putc(&br_pl, '}');
        br_event(b, "contentBlockDelta", t);
        if (br.want)
            cg_buf_put(&br.text, text, n);
        t->content_bytes += n;
        t->content_events++;
        to_stop -= (long)n;
        if (to_stop <= 0 && e + 1 < nev) {
            br_block_stop(b, &bl, num, &next, t);
            br_block_start(b, &bl, ++block, t);
            to_stop = 300 + (long)rng_below(201);
        }
    }
    br_block_stop(b, &bl, num, &next, t);
    br_pl.len = 0;
    cg_buf_putc(&br_pl, '{');
    br_pad(&br_pl);
    cg_buf_puts(&br_pl, ",\"stopReason\":\"end_turn\"}");
    br_event(b, "messageStop", t);
    br_pl.len = 0;
    cg_buf_printf(&br_pl, "{\"metrics\":{\"latencyMs\":%u},", 800 + rng_below(4000));
    br_pad(&br_pl);
    cg_buf_printf(&br_pl,
                  ",\"usage\":{\"inputTokens\":2679,\"outputTokens\":%u,\"totalTokens\":%u}}", nev,
                  2679 + nev);
    br_event(b, "metadata", t);
    br_answer_end();
}

/* --- The bedrock-kb view ------------------------------------------------------ */

/* Answers as Knowledge Bases' retrieveAndGenerateStream sends them, in the
 * same event stream: `output` events of the text deltas above, and after
 * every 300-500 bytes of text a `citation` event for that part, as the
 * service sends it: the part's text and span, and one to three retrieved
 * references, each with its chunk's text, its location (a web result by
 * webLocation url, a document by s3Location uri) and its metadata (source
 * uri, chunk id, data source, a document's page), the whole again in the
 * deprecated nested `citation`. An answer's first citation cites three
 * sources; a later one may name a source twice. The view writes one [N]
 * per distinct source of the event as content when it comes, which
 * openwebui links for the web results. Knowledge Bases' captures show no
 * padding member. */

static void kb_reference(cg_buf_t *p, unsigned s)
{
    unsigned i = br_src[s].i;
    if (br_src[s].web) {
        cg_buf_printf(p,
                      "{\"content\":{\"text\":\"%s\",\"type\":\"TEXT\"},\"location\":{\"type\":"
                      "\"WEB\",\"webLocation\":{\"url\":\"%s\"}},\"metadata\":{"
                      "\"x-amz-bedrock-kb-source-uri\":\"%s\",\"x-amz-bedrock-kb-chunk-id\":"
                      "\"web-%u\",\"x-amz-bedrock-kb-data-source-id\":\"WEBDS01\"}}",
                      docs[i].content, web_urls[i], web_urls[i], i);
        return;
    }
    cg_buf_printf(p,
                  "{\"content\":{\"text\":\"%s\",\"type\":\"TEXT\"},\"location\":{\"s3Location\":"
                  "{\"uri\":\"s3://kb-docs/%s\"},\"type\":\"S3\"},\"metadata\":{"
                  "\"x-amz-bedrock-kb-source-uri\":\"s3://kb-docs/%s\","
                  "\"x-amz-bedrock-kb-chunk-id\":\"1%%3A0%%3A%s\","
                  "\"x-amz-bedrock-kb-data-source-id\":\"S3DS01\","
                  "\"x-amz-bedrock-kb-document-page-number\":%u.0}}",
                  docs[i].content, docs[i].filepath, docs[i].filepath, docs[i].chunk_id, i + 1);
}

/* The citation event of the part (JSON string bytes) that ends at byte
 * `at` of the answer, and the references the view writes for it. */
static void kb_citation(cg_buf_t *b, const cg_buf_t *part, size_t at, bool first, unsigned *num,
                        unsigned *next, gen_totals_t *t)
{
    static cg_buf_t one;
    unsigned src[3], n = first ? 3 : 1 + (rng_below(100) >= 50) + (rng_below(100) >= 70);
    for (unsigned c = 0; c < n; c++)
        src[c] = first ? c : rng_below(BR_NSRC);
    one.len = 0;
    cg_buf_printf(&one,
                  "\"generatedResponsePart\":{\"textResponsePart\":{\"span\":{\"end\":%zu,"
                  "\"start\":%zu},\"text\":\"%.*s\"}},\"retrievedReferences\":[",
                  at - 1, at - part->len, (int)part->len, part->p);
    for (unsigned c = 0; c < n; c++) {
        if (c)
            cg_buf_putc(&one, ',');
        kb_reference(&one, src[c]);
    }
    cg_buf_putc(&one, ']');
    br_pl.len = 0;
    cg_buf_puts(&br_pl, "{\"citation\":{");
    cg_buf_put(&br_pl, one.p, one.len);
    cg_buf_puts(&br_pl, "},");
    cg_buf_put(&br_pl, one.p, one.len);
    cg_buf_putc(&br_pl, '}');
    br_event(b, "citation", t);
    br.t.cites++;
    bool seen[BR_NSRC] = {false};
    for (unsigned c = 0; c < n; c++)
        if (!seen[src[c]]) {
            seen[src[c]] = true;
            br_expect_ref(src[c], num, next, t);
        }
}

/* Appends one bedrock-kb answer: nev output events, a citation event after
 * each part of 300-500 bytes and after the last. */
static void gen_kb_answer(cg_buf_t *b, unsigned nev, gen_totals_t *t)
{
    static cg_buf_t part;
    br_answer_begin();
    unsigned num[BR_NSRC] = {0}, next = 0;
    size_t at = 0;
    bool first = true;
    part.len = 0;
    long to_cite = 300 + (long)rng_below(201);
    for (unsigned e = 0; e < nev; e++) {
        char text[160];
        size_t n = br_words(text);
        br_pl.len = 0;
        cg_buf_printf(&br_pl, "{\"text\":\"%.*s\"}", (int)n, text);
        br_event(b, "output", t);
        if (br.want)
            cg_buf_put(&br.text, text, n);
        cg_buf_put(&part, text, n);
        at += n;
        t->content_bytes += n;
        t->content_events++;
        to_cite -= (long)n;
        if (to_cite <= 0 || e + 1 == nev) {
            kb_citation(b, &part, at, first, num, &next, t);
            first = false;
            part.len = 0;
            to_cite = 300 + (long)rng_below(201);
        }
    }
    br.t.blocks++;
    br_answer_end();
}

/* Appends the decoded content of every content delta of the chunks in
 * p[0..n) to out (openwebui's source events and the finish carry none). */
static void br_content_of(const char *p, size_t n, cg_buf_t *out)
{
    static const char delta[] = "\"delta\":{", role[] = "\"role\":\"assistant\",",
                      content[] = "\"content\":\"";
    for (const char *s = p, *end = p + n, *nl; s < end; s = nl + 1) {
        nl = memchr(s, '\n', (size_t)(end - s));
        if (nl == NULL)
            nl = end;
        const char *d = memmem(s, (size_t)(nl - s), delta, sizeof(delta) - 1);
        if (strncmp(s, "data: {", 7) != 0 || d == NULL)
            continue;
        d += sizeof(delta) - 1;
        if ((size_t)(nl - d) >= sizeof(role) - 1 && memcmp(d, role, sizeof(role) - 1) == 0)
            d += sizeof(role) - 1;
        if ((size_t)(nl - d) < sizeof(content) - 1 || memcmp(d, content, sizeof(content) - 1) != 0)
            continue;
        d += sizeof(content) - 1;
        const char *q = d;
        while (q < nl && *q != '"')
            q += *q == '\\' ? 2 : 1;
        char *dst = cg_buf_reserve(out, (size_t)(q - d) + 1);
        out->len += cg_json_unescape(d, (size_t)(q - d), dst);
    }
}

/* Untimed: each answer's content is its generated text with the expected
 * references (and links) after each citing block, byte for byte once
 * decoded; [DONE] ends it, the view read every message, nothing was
 * malformed, no framing error. */
static int verify_bedrock(const char *section, const input_t *in, size_t rd,
                          const cg_xform_cfg_t *cfg, const gen_totals_t *gt)
{
    uint64_t links = 0, linked = 0, events = 0, done = 0, bad = 0, same = 0, finish = 0;
    cg_buf_t all = {0}, got = {0}, want = {0};
    for (size_t a = 0; a < in->nans; a++) {
        cg_xform_t *x = run_answer(in, a, rd, cfg, &all);
        got.len = want.len = 0;
        links += count_in(&all, "](https://");
        finish += count_in(&all, "\"finish_reason\":\"stop\"");
        br_content_of(all.p, all.len, &got);
        size_t wn = br.off[a + 1] - br.off[a];
        char *dst = cg_buf_reserve(&want, wn + 1);
        want.len = cg_json_unescape(br.text.p + br.off[a], wn, dst);
        same += got.len == want.len && memcmp(got.p, want.p, got.len) == 0;
        const cg_xform_stats_t *st = cg_xform_stats(x);
        linked += st->refs_linked;
        events += st->events_in;
        done += ends_done(&all);
        bad += st->malformed + st->truncated + st->passthrough + st->framing_error;
        cg_xform_free(x);
    }
    cg_buf_free(&all);
    cg_buf_free(&got);
    cg_buf_free(&want);
    int ok = same == in->nans && links == gt->refs_url && linked == gt->refs_url &&
             events == gt->events && done == in->nans && finish == in->nans && bad == 0;
    printf("%s verify (untimed): content = text + references in %" PRIu64 "/%zu answers, "
           "links = %" PRIu64 ", refs_linked = %" PRIu64 " (web references generated %" PRIu64
           "), events_in = %" PRIu64 " (generated %" PRIu64
           "), answers with finish + [DONE] = %" PRIu64 " + %" PRIu64
           "/%zu, malformed + truncated + framing = %" PRIu64 " -> %s\n",
           section, same, in->nans, links, linked, gt->refs_url, events, gt->events, finish, done,
           in->nans, bad, ok ? "OK" : "MISMATCH");
    return ok ? 0 : 1;
}

/* Median MB/s of the view and of memchr over rounds alternating the two,
 * and heap allocations per event in the feeds between each answer's first
 * two and its last; returns 1 when verification fails. */
static int bench_evs(const char *section, gen_fn gen, size_t mib, size_t rd, size_t rounds,
                     unsigned nev, const cg_xform_cfg_t *cfg)
{
    cg_buf_t buf = {0};
    gen_totals_t gt = {0};
    input_t in;
    br.want = true;
    br.t = (br_totals_t){0};
    make_input(&in, &buf, mib << 20, nev, rd, gen, &gt);
    br.want = false;
    bool kb = gen != gen_bedrock_answer;
    in.view = cg_dialect_view(dialect(kb ? "bedrock-kb" : "bedrock"));
    printf("\n%s input: %.2f MiB, %zu answers, %" PRIu64 " messages (%" PRIu64
           " text %s of %.1f bytes of text, %" PRIu64 " citation %s + %" PRIu64
           " continued, %" PRIu64 " %s; %.1f bytes each), %" PRIu64 " references\n",
           section, (double)in.len / 1048576.0, in.nans, gt.events, gt.content_events,
           kb ? "events" : "deltas", (double)gt.content_bytes / (double)gt.content_events,
           br.t.cites, kb ? "events" : "deltas", br.t.conts, br.t.blocks,
           kb ? "answers" : "blocks", (double)in.len / (double)gt.events, gt.refs);
    int bad = verify_bedrock(section, &in, rd, cfg, &gt);
    view_times_t v = time_view(&in, rd, cfg, rounds);
    print_steady(section, &v);
    print_figures(section, &v, verify_word(bad));
    free(in.off);
    free(br.off);
    br.off = NULL;
    br.n = br.cap = 0;
    cg_buf_free(&br.text);
    cg_buf_free(&buf);
    return bad;
}

/* --- The cohere view -------------------------------------------------------- */

/* Answers as Cohere's v2 Chat API streams them with citation_options mode
 * fast: message-start, content-start, content-delta events whose text has
 * 4-32 bytes made like the chunks above (the same words, JSON escapes and
 * UTF-8), and about every 300 bytes of text a citation-start (then its
 * citation-end) of the text since the last one, at character offsets,
 * citing one or two of five documents with URLs (the first five cite each
 * in turn); content-end and message-end with usage. Each citation's
 * references go out as content where it arrives, which openwebui rewrites
 * into links. */

#define CO_DOCS 5
#define CO_EVENT(type) "event: " type "\ndata: {\"type\":\"" type "\""

/* Characters that raw JSON string bytes s[0..n) decode to: the words hold
 * two-byte escapes and raw UTF-8 only. */
static uint64_t co_chars(const char *s, size_t n)
{
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (((unsigned char)s[i] & 0xC0) == 0x80)
            continue;
        c++;
    }
    return c;
}

static void co_source(cg_buf_t *b, bool first, unsigned k)
{
    const doc_t *d = &docs[k];
    cg_buf_printf(b,
                  "%s{\"type\":\"document\",\"id\":\"doc:%u\",\"document\":{\"id\":\"doc:%u\","
                  "\"snippet\":\"%s\",\"title\":\"%s\",\"url\":\"%s\"}}",
                  first ? "" : ",", k, k, d->content, d->title, d->url);
}

static void co_citation(cg_buf_t *b, unsigned n, uint64_t start, uint64_t end, unsigned k,
                        gen_totals_t *t)
{
    unsigned second = rng_below(CO_DOCS);
    cg_buf_printf(b,
                  CO_EVENT("citation-start") ",\"index\":%u,\"delta\":{\"message\":{\"citations\":"
                                             "{\"start\":%" PRIu64 ",\"end\":%" PRIu64
                                             ",\"text\":\"cited words\",\"sources\":[",
                  n, start, end);
    co_source(b, true, k);
    t->refs_url++;
    if (second != k && rng_below(2)) {
        co_source(b, false, second);
        t->refs_url++;
    }
    cg_buf_printf(b, "],\"type\":\"TEXT_CONTENT\"}}}}\n\n" CO_EVENT("citation-end") ",\"index\":%u}\n\n",
                  n);
    t->events += 2;
}

static void gen_cohere_answer(cg_buf_t *b, unsigned nev, gen_totals_t *t)
{
    cg_buf_puts(b, CO_EVENT("message-start") ",\"id\":\"5f7c0b6e-2a51-4c3e-9d1f-7e0f1c2a3b4d\","
                   "\"delta\":{\"message\":{\"role\":\"assistant\",\"content\":[],"
                   "\"tool_plan\":\"\",\"tool_calls\":[],\"citations\":[]}}}\n\n" CO_EVENT(
                       "content-start") ",\"index\":0,\"delta\":{\"message\":{\"content\":"
                                        "{\"type\":\"text\",\"text\":\"\"}}}}\n\n");
    uint64_t chars = 0, cited = 0;
    unsigned ncite = 0;
    long to_cite = 150 + (long)rng_below(301);
    for (unsigned e = 0; e < nev; e++) {
        char piece[160];
        size_t n = plain_words(piece);
        cg_buf_printf(b,
                      CO_EVENT("content-delta") ",\"index\":0,\"delta\":{\"message\":{\"content\":"
                                                "{\"text\":\"%.*s\"}}}}\n\n",
                      (int)n, piece);
        chars += co_chars(piece, n);
        t->content_bytes += n;
        t->content_events++;
        t->events++;
        to_cite -= (long)n;
        if (to_cite <= 0 || e + 1 == nev) {
            co_citation(b, ncite, cited, chars, ncite < CO_DOCS ? ncite : rng_below(CO_DOCS), t);
            ncite++;
            cited = chars;
            to_cite = 150 + (long)rng_below(301);
        }
    }
    cg_buf_printf(b,
                  CO_EVENT("content-end") ",\"index\":0}\n\n" CO_EVENT(
                      "message-end") ",\"delta\":{\"finish_reason\":\"COMPLETE\",\"usage\":"
                                     "{\"billed_units\":{\"input_tokens\":2679,\"output_tokens\":"
                                     "%u},\"tokens\":{\"input_tokens\":2700,\"output_tokens\":%u}}}}"
                                     "\n\n",
                  nev, nev + 2);
    t->events += 4;
}

/* Median MB/s of the view and of memchr over rounds alternating the two,
 * and heap allocations per event in the feeds between each answer's first
 * two and its last; returns 1 when verification fails. */
static int bench_cohere(size_t mib, size_t rd, size_t rounds, unsigned nev,
                        const cg_xform_cfg_t *cfg)
{
    cg_buf_t buf = {0};
    gen_totals_t gt = {0};
    input_t in;
    make_input(&in, &buf, mib << 20, nev, rd, gen_cohere_answer, &gt);
    in.view = cg_dialect_view(dialect("cohere"));
    printf("\ncohere input: %.2f MiB, %zu answers, %" PRIu64 " events (%" PRIu64
           " content-delta of %.1f bytes of text; %.1f bytes each), %" PRIu64 " references\n",
           (double)in.len / 1048576.0, in.nans, gt.events, gt.content_events,
           (double)gt.content_bytes / (double)gt.content_events, (double)in.len / (double)gt.events,
           gt.refs_url);
    int bad = verify(&in, rd, cfg, &gt);
    view_times_t v = time_view(&in, rd, cfg, rounds);
    print_steady("cohere", &v);
    print_figures("cohere", &v, verify_word(bad));
    free(in.off);
    cg_buf_free(&buf);
    return bad;
}

/* --- Allocations per event ------------------------------------------------ */

/*
 * What an event costs in heap allocations, apart from what a stream costs:
 * every allocation of an answer (new, feeds, finish, free), counted for
 * answers of nev, 8 x nev and 64 x nev events generated alike. An
 * allocation per event (or per one event in a hundred) adds eight times as
 * much from 8x to 64x as from 1x to 8x. A per-stream buffer that doubles
 * up to its largest size adds about as much at each step: the SSE buffer
 * and the tokens of an upstream that repeats the whole answer in its last
 * events (Responses' done events), one 8-byte record per annotation
 * (Responses), the strings of each new source. Untimed.
 */
#define SLOPE_STEPS 3
#define SLOPE_MIB   32

typedef struct slope {
    double per_answer[SLOPE_STEPS], events[SLOPE_STEPS];
    double per_event; /* what an event adds from 8x to 64x */
    bool per_stream;  /* the second step adds at most twice the first, not 8x */
} slope_t;

static void gen_rs_plain(cg_buf_t *b, unsigned nev, gen_totals_t *t)
{
    rs_totals_t r = {0};
    (void)t;
    gen_rs_answer(b, nev, false, &r);
}

static void gen_rs_markers(cg_buf_t *b, unsigned nev, gen_totals_t *t)
{
    rs_totals_t r = {0};
    (void)t;
    gen_rs_answer(b, nev, true, &r);
}

static slope_t alloc_slope(gen_fn gen, const cg_dialect_view_t *view, unsigned nev, size_t rd,
                           const cg_xform_cfg_t *cfg)
{
    slope_t sl = {0};
    for (int k = 0, scale = 1; k < SLOPE_STEPS; k++, scale *= 8) {
        cg_buf_t buf = {0};
        gen_totals_t gt = {0};
        input_t in;
        make_input(&in, &buf, (size_t)SLOPE_MIB << 20, nev * (unsigned)scale, rd, gen, &gt);
        in.view = view;
        xres_t r = xform_pass(&in, rd, cfg, NULL, NULL, NULL, NULL);
        sl.per_answer[k] = (double)r.allocs_total / (double)in.nans;
        sl.events[k] = (double)r.events / (double)in.nans;
        free(in.off);
        cg_buf_free(&buf);
    }
    double d1 = sl.per_answer[1] - sl.per_answer[0], d2 = sl.per_answer[2] - sl.per_answer[1];
    sl.per_event = d2 / (sl.events[2] - sl.events[1]);
    sl.per_stream = d2 <= 2.0 * d1 + 1.0; /* one of slack: answers differ a little */
    return sl;
}

static void print_slope(const char *section, gen_fn gen, const cg_dialect_view_t *view,
                        unsigned nev, size_t rd, const cg_xform_cfg_t *cfg)
{
    slope_t sl = alloc_slope(gen, view, nev, rd, cfg);
    printf("%s: allocs_per_answer=%.1f/%.1f/%.1f at %.0f/%.0f/%.0f events "
           "allocs_per_added_event=%.5f per_event_allocs %s\n",
           section, sl.per_answer[0], sl.per_answer[1], sl.per_answer[2], sl.events[0],
           sl.events[1], sl.events[2], sl.per_event, sl.per_stream ? "none: PASS" : "MISS");
}

/* --- Main ------------------------------------------------------------------ */

static unsigned long parse_num(const char *opt, const char *v)
{
    if (v == NULL)
        die("missing value for an option");
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 0);
    if (errno || *end || n == 0) {
        fprintf(stderr, "core: bad value for %s: %s\n", opt, v);
        exit(2);
    }
    return n;
}

typedef struct core_line {
    double x_mbps, m_mbps, ratio, ns_ev, a_steady;
} core_line_t;

static void reseed(uint64_t seed, uint64_t section)
{
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL + section;
}

static bool want(const char *only, const char *section)
{
    return only == NULL || strcmp(only, section) == 0;
}

/* The openai pass: Azure "On Your Data" answers next to a memchr pass over
 * the same bytes. Its summary goes to *line, printed last. */
static int bench_openai(size_t mib, size_t nev, size_t rd, size_t rounds, uint64_t seed,
                        const cg_xform_cfg_t *cfg, core_line_t *line)
{
    /* Input, generated once before timing. */
    size_t target = mib << 20;
    cg_buf_t buf = {0};
    gen_totals_t gt = {0};
    input_t in;
    make_input(&in, &buf, target, (unsigned)nev, rd, gen_answer, &gt);
    size_t nans = in.nans;

    double mb = (double)in.len / 1e6;
    printf("citegate core benchmark (profile %s, seed %" PRIu64 ", cpu %s)\n",
           cfg->profile->name, seed, cpu_model());
    printf("input: %.2f MiB (%zu bytes), %zu answers x (1 context + %zu content + finish + "
           "[DONE]) = %" PRIu64 " events, avg %.1f bytes/event\n",
           (double)in.len / 1048576.0, in.len, nans, nev, gt.events,
           (double)in.len / (double)gt.events);
    printf("content: avg %.1f bytes/chunk; %" PRIu64 " references (one per %.0f content bytes), %"
           PRIu64 " split across two chunks (%.1f%%)\n",
           (double)gt.content_bytes / (double)gt.content_events, gt.refs,
           (double)gt.content_bytes / (double)gt.refs, gt.refs_split,
           100.0 * (double)gt.refs_split / (double)gt.refs);
    printf("reads: %zu bytes each, %zu per pass; %zu rounds per pass, alternating\n", rd,
           in.nreads, rounds);
    if (mib < 64)
        printf("note: input is below the 64 MiB the benchmark is specified for\n");

    int bad = verify(&in, rd, cfg, &gt);

    /* Warm-up (page faults, caches, allocator), then alternating timed rounds. */
    uint64_t lines = 0;
    (void)xform_pass(&in, rd, cfg, NULL, NULL, NULL, NULL);
    (void)memchr_pass(&in, rd, &lines);

    double *t_x = malloc(rounds * sizeof(double));
    double *t_m = malloc(rounds * sizeof(double));
    if (t_x == NULL || t_m == NULL)
        die("out of memory");
    xres_t last = {0};
    uint64_t allocs_total = 0, allocs_steady = 0, events_steady = 0, feeds_steady = 0;
    uint64_t events_total = 0;
    xres_t sum = {0};
    for (size_t r = 0; r < rounds; r++) {
        xres_t x = xform_pass(&in, rd, cfg, NULL, NULL, NULL, NULL);
        t_x[r] = (double)x.ns;
        allocs_total += x.allocs_total;
        allocs_steady += x.allocs_steady;
        events_steady += x.events_steady;
        feeds_steady += x.feeds_steady;
        events_total += x.events;
        sum.allocs_last += x.allocs_last;
        sum.events_last += x.events_last;
        sum.allocs_mid += x.allocs_mid;
        sum.events_mid += x.events_mid;
        sum.feeds_mid += x.feeds_mid;
        sum.feeds_mid_alloc += x.feeds_mid_alloc;
        last = x;
        t_m[r] = (double)memchr_pass(&in, rd, &lines);
        printf("round %zu: xform %8.2f ms (%7.1f MB/s)   memchr %7.2f ms (%8.1f MB/s)\n", r + 1,
               t_x[r] / 1e6, mb / (t_x[r] / 1e9), t_m[r] / 1e6, mb / (t_m[r] / 1e9));
    }
    qsort(t_x, rounds, sizeof(double), cmp_double);
    qsort(t_m, rounds, sizeof(double), cmp_double);
    double x_med = pct(t_x, rounds, 50), x_p99 = pct(t_x, rounds, 99);
    double m_med = pct(t_m, rounds, 50), m_p99 = pct(t_m, rounds, 99);
    double x_mbps = mb / (x_med / 1e9), m_mbps = mb / (m_med / 1e9);
    double ratio = x_mbps / m_mbps;
    double ns_ev = x_med / (double)last.events;

    /* Per-read latency: separate rounds that time every feed call. */
    size_t lat_rounds = 3;
    double *lat_read = malloc(lat_rounds * in.nreads * sizeof(double));
    double *lat_ev = malloc(lat_rounds * in.nreads * sizeof(double));
    if (lat_read == NULL || lat_ev == NULL)
        die("out of memory");
    size_t nlr = 0, nle = 0;
    for (size_t r = 0; r < lat_rounds; r++)
        (void)xform_pass(&in, rd, cfg, lat_read, lat_ev, &nlr, &nle);
    qsort(lat_read, nlr, sizeof(double), cmp_double);
    qsort(lat_ev, nle, sizeof(double), cmp_double);

    double a_steady = events_steady ? (double)allocs_steady / (double)events_steady : 0;
    double a_total = (double)allocs_total / (double)events_total;

    printf("\n");
    printf("transformer: median %.2f ms/round = %.1f MB/s; p99 (slowest of %zu) %.2f ms = %.1f "
           "MB/s; output %.2f MB/round\n",
           x_med / 1e6, x_mbps, rounds, x_p99 / 1e6, mb / (x_p99 / 1e9),
           (double)last.out_bytes / 1e6);
    printf("memchr:      median %.2f ms/round = %.1f MB/s; p99 (slowest of %zu) %.2f ms = %.1f "
           "MB/s (%" PRIu64 " lines)\n",
           m_med / 1e6, m_mbps, rounds, m_p99 / 1e6, mb / (m_p99 / 1e9), lines);
    printf("ratio transformer/memchr: %.4f (median rounds)\n", ratio);
    printf("per event (round median / events): %.1f ns\n", ns_ev);
    printf("per read (%zu bytes, %zu samples over %zu extra rounds): median %.0f ns, p99 %.0f "
           "ns, max %.0f ns\n",
           rd, nlr, lat_rounds, pct(lat_read, nlr, 50), pct(lat_read, nlr, 99),
           nlr ? lat_read[nlr - 1] : 0.0);
    printf("per event within a read (read ns / events completed in it, %zu samples): median "
           "%.1f ns, p99 %.1f ns\n",
           nle, pct(lat_ev, nle, 50), pct(lat_ev, nle, 99));
    printf("heap allocations, steady state (feeds after each answer's first 2 reads): %" PRIu64
           " in %" PRIu64 " feeds / %" PRIu64 " events = %.4f per event\n",
           allocs_steady, feeds_steady, events_steady, a_steady);
    printf("  of which in each answer's last feed ([DONE] + source events): %" PRIu64
           " (%.2f per answer); in the feeds between: %" PRIu64 " in %" PRIu64 " feeds / %" PRIu64
           " events = %.4f per event (%" PRIu64 " of those feeds allocated)\n",
           sum.allocs_last, (double)sum.allocs_last / (double)(rounds * nans), sum.allocs_mid,
           sum.feeds_mid, sum.events_mid,
           sum.events_mid ? (double)sum.allocs_mid / (double)sum.events_mid : 0.0,
           sum.feeds_mid_alloc);
    printf("heap allocations, everything (new/feed/finish/free): %.4f per event (%.1f per "
           "answer)\n",
           a_total, (double)allocs_total / (double)(rounds * nans));
    printf("bars: >= 1000 MB/s %s; ratio >= 0.10 %s; <= 1000 ns/event %s; 0 allocs/event "
           "steady %s; verify %s\n",
           x_mbps >= 1000 ? "PASS" : "MISS", ratio >= 0.10 ? "PASS" : "MISS",
           ns_ev <= 1000 ? "PASS" : "MISS", allocs_steady == 0 ? "PASS" : "MISS",
           bad ? "FAIL" : "OK");
    *line = (core_line_t){x_mbps, m_mbps, ratio, ns_ev, a_steady};
    free(lat_read);
    free(lat_ev);
    free(t_x);
    free(t_m);
    free(in.off);
    cg_buf_free(&buf);
    return bad;
}

static void usage(void)
{
    puts("usage: core [--read BYTES] [--mib MIB] [--rounds N] [--events N] [--seed N] [--only S]\n"
         "  --read    bytes per cg_xform_feed call (default 16384)\n"
         "  --mib     input size in MiB, whole answers (default 64)\n"
         "  --rounds  timed rounds of each pass, alternating (default 7)\n"
         "  --events  content chunks per answer (default 512)\n"
         "  --seed    PRNG seed (default 1)\n"
         "  --only    one section: core, request, anthropic, responses, responses_markers, "
         "gemini, bedrock, bedrock_kb, cohere");
}

int main(int argc, char **argv)
{
    size_t rd = 16384, mib = 64, rounds = 7, nev = 512;
    uint64_t seed = 1;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(o, "--read") == 0)
            rd = parse_num(o, v), i++;
        else if (strcmp(o, "--mib") == 0)
            mib = parse_num(o, v), i++;
        else if (strcmp(o, "--rounds") == 0)
            rounds = parse_num(o, v), i++;
        else if (strcmp(o, "--events") == 0)
            nev = parse_num(o, v), i++;
        else if (strcmp(o, "--seed") == 0)
            seed = parse_num(o, v), i++;
        else if (strcmp(o, "--only") == 0 && v != NULL)
            only = v, i++;
        else if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            usage();
            return 0;
        } else {
            usage();
            return 2;
        }
    }

    const cg_profile_t *profile = NULL;
    cg_profile_parse("openwebui", &profile);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile);

    /* Each section seeds its own input, so --only gives the same bytes. */
    int bad = 0;
    core_line_t core = {0};
    if (want(only, "core")) {
        reseed(seed, 1);
        bad |= bench_openai(mib, nev, rd, rounds, seed, &cfg, &core);
    }
    if (want(only, "request"))
        bench_dialect();
    if (want(only, "anthropic")) {
        reseed(seed, 2);
        bad |= bench_anthropic(mib << 20, (unsigned)nev, rd, rounds, &cfg);
    }
    if (want(only, "responses")) {
        reseed(seed, 3);
        bad |= bench_responses(mib, rd, rounds, (unsigned)nev, false, &cfg);
    }
    if (want(only, "responses_markers")) {
        reseed(seed, 4);
        bad |= bench_responses(mib, rd, rounds, (unsigned)nev, true, &cfg);
    }
    if (want(only, "gemini")) {
        reseed(seed, 5);
        bad |= bench_gemini(mib, rd, rounds, (unsigned)nev, &cfg);
    }
    if (want(only, "bedrock")) {
        reseed(seed, 6);
        bad |= bench_evs("bedrock", gen_bedrock_answer, mib, rd, rounds, (unsigned)nev, &cfg);
    }
    if (want(only, "bedrock_kb")) {
        reseed(seed, 7);
        bad |= bench_evs("bedrock_kb", gen_kb_answer, mib, rd, rounds, (unsigned)nev, &cfg);
    }
    if (want(only, "cohere")) {
        reseed(seed, 7);
        bad |= bench_cohere(mib, rd, rounds, (unsigned)nev, &cfg);
    }
    static const struct {
        const char *section;
        gen_fn gen;
        const char *dialect;
    } slopes[] = {
        {"core", gen_answer, "openai"},
        {"anthropic", gen_anthropic_answer, "anthropic"},
        {"responses", gen_rs_plain, "responses"},
        {"responses_markers", gen_rs_markers, "responses"},
        {"gemini", gen_gemini_answer, "gemini"},
        {"bedrock", gen_bedrock_answer, "bedrock"},
        {"bedrock_kb", gen_kb_answer, "bedrock-kb"},
        {"cohere", gen_cohere_answer, "cohere"},
    };
    for (size_t k = 0; k < sizeof(slopes) / sizeof(slopes[0]); k++) {
        if (!want(only, slopes[k].section))
            continue;
        if (only == NULL && k == 0)
            printf("\nheap allocations per answer of %zu, 8 x %zu and 64 x %zu events (all "
                   "calls):\n",
                   nev, nev, nev);
        reseed(seed, 11 + k);
        print_slope(slopes[k].section, slopes[k].gen, cg_dialect_view(dialect(slopes[k].dialect)),
                    (unsigned)nev, rd, &cfg);
    }
    if (want(only, "core"))
        printf("core: xform_MBps=%.1f memchr_MBps=%.1f ratio=%.4f ns_per_event=%.1f "
               "allocs_per_event=%.4f\n",
               core.x_mbps, core.m_mbps, core.ratio, core.ns_ev, core.a_steady);
    cg_out_free(&worker_out);
    cg_buf_free(&br_pl);
    return bad;
}
