/*
 * Dialect `responses` (SPEC §6a): an OpenAI Responses upstream.
 *
 * Request: POST {base}/v1/responses, Authorization and api-key forwarded.
 * The body: system and developer texts joined into `instructions`; user and
 * assistant messages in order as `input` items, their content one string;
 * max_output_tokens, temperature, top_p, stream and model.
 *
 * Answer: its events, or its non-streaming Response object, become
 * chat-completion chunks, or a chat completion, of our own, which the
 * transformer reads as if an openai upstream had sent them: the finder, the
 * profiles and the end of stream are those of the openai dialect.
 *
 * Content: only response.output_text.delta, every content part into choice
 * 0, its JSON string bytes copied as they came (no decode and re-encode:
 * every content chunk has one shape, so the transformer's template path
 * takes them). Reasoning and refusals are not content.
 *
 * Markers `【…】` (U+3010, then no other U+3010 or U+3011, a U+2020 `†`,
 * U+3011; at most MARKER_MAX bytes as UTF-8; raw or as \u escapes) are
 * references. Bytes that may still start one are held, across deltas and
 * across a 【 cut between two deltas; a candidate that cannot become a
 * marker goes out as text, unchanged, in order. A completed marker waits
 * for the next upstream event:
 *   - the annotations that event brings (annotation.added, or a final
 *     list) and whose [start_index, end_index) covers the marker (code
 *     points of that content part's text as the upstream wrote it, markers
 *     included) make it `[N]` of their citation, the first one winning;
 *   - text after a waiting marker, in its delta and later ones, waits
 *     behind it: nothing overtakes the marker's replacement;
 *   - an annotation.added event releases everything up to the first marker
 *     still open, so a run of them resolves several markers in turn;
 *   - any other event, and the end, deletes the markers still open and
 *     releases everything held, but a delta of the same part keeps a
 *     marker in progress (the model is still writing it).
 * Only events whose data is a JSON object count: comments, keep-alives and
 * [DONE] change nothing, other data is counted malformed and ignored.
 *
 * Citations: url_citation (url, title) and file_citation (title = filename,
 * key = file_id), in the flat Responses shape or the Assistants' nested one
 * (url_citation{url,title}, file_citation{file_id}); other annotation types
 * are not citations. One citation per distinct url / file_id, numbered in
 * order of first arrival. An annotation that covers no waiting marker counts
 * its citation as referenced once where it arrives (SPEC §6), and a
 * url_citation's goes to the client as a chat annotation
 * (delta.annotations in a chunk of its own; message.annotations after the
 * content of a body), with the upstream's start/end offsets as they are, so
 * profile openai forwards it instead of repeating it. Annotations arrive
 * again in content_part.done, output_item.done and response.completed:
 * one already seen (same part, type, key and range) does nothing but cover.
 *
 * A body is read as the stream it amounts to: per output_text part, its
 * text as one delta, then each of its annotations as one annotation.added
 * event. An annotation that covers a marker takes its citation's place in
 * first-reference order then (cg__xform_reserve), as the stream's [N]
 * would: a body and the same answer streamed get the same numbers (SPEC
 * §6a: the order of output items, their parts and their annotations).
 *
 * State per stream, bounded: the token array (as the transformer's), the
 * bytes held (at most one event's content plus one candidate), MAX_HELD
 * waiting markers (a delta completing more deletes the rest at once),
 * MAX_PARTS content parts whose offsets are tracked (the least recent one
 * makes room), a key -> number map of at most CG_CITE_MAX entries and
 * MAX_SEEN annotation fingerprints (past that, final lists are taken as
 * already seen), and one delta event of at most SKELETON_MAX bytes. Keys are 64-bit FNV-1a hashes: two sources colliding
 * would share a number. A steady delta event allocates nothing.
 */
#include "chatreq.h"
#include "view.h"

#include <stdlib.h>
#include <string.h>

#define MARKER_MAX 256
#define MAX_HELD   64
#define MAX_PARTS  8
#define MAX_SEEN   4096
#define BUF_KEEP   (64u << 10) /* buffers above this are given back when empty */

typedef struct part {
    int64_t out, content; /* output_index, content_index; -1 when absent */
    uint64_t cp;          /* code points of its text so far */
    uint64_t used;        /* recency; 0: free slot */
} part_t;

typedef struct marker {
    size_t at, len;      /* its bytes in hold */
    uint64_t start, end; /* code points of its part */
    unsigned n;          /* the citation it becomes; 0 while none */
} marker_t;

typedef struct keyed {
    uint64_t hash;
    unsigned n;
} keyed_t;

/* A value that changes from one delta event to the next: its place in an
 * event's data, and whether it is a string (else a number). */
typedef struct hole {
    size_t start, end;
    bool str;
} hole_t;

#define MAX_HOLES    3   /* sequence_number, delta, obfuscation */
#define SKELETON_MAX 1024 /* bytes; a longer delta event is always scanned */

/* The last delta event scanned in full, its changing values as holes (see
 * match_skeleton). */
typedef struct skeleton {
    cg_buf_t bytes;
    hole_t hole[MAX_HOLES];
    size_t nholes, delta; /* delta: which hole is the delta's */
    int64_t out, content;
    bool ok;
} skeleton_t;

/* The marker finder: IDLE, or a candidate: E3, E3 80, or after a whole 【. */
enum { IDLE, LEAD1, LEAD2, INSIDE };

typedef struct rs {
    cg_view_json_t in;
    skeleton_t skel;
    bool role_sent;
    bool done; /* the stream ended (finish and [DONE], or an error) */
    bool body; /* reading a non-streaming body: content accumulates */

    part_t parts[MAX_PARTS];
    uint64_t clock;
    part_t *cur; /* the part of the last delta, and of what is held */

    uint8_t state;
    uint8_t need, nwin;     /* the raw UTF-8 character in progress */
    unsigned char win[4];
    bool dagger;            /* the candidate has a † */
    size_t cand;            /* where the candidate starts in hold (state not IDLE) */
    size_t cand_bytes;      /* its length as UTF-8 */
    uint64_t cand_cp;       /* the code point of its 【 */
    cg_buf_t hold;          /* waiting markers and the text behind them, then the candidate */
    marker_t held[MAX_HELD];
    size_t nheld;

    cg_buf_t text;    /* content released by the current event (body: all of it) */
    cg_buf_t anns;    /* body: the forwarded annotations */
    cg_buf_t scratch; /* decoded strings */
    keyed_t *keys;
    size_t nkeys, keys_cap;
    uint64_t *seen;
    size_t nseen, seen_cap;
} rs_t;

static void state_free(void *state)
{
    rs_t *s = state;
    cg__view_json_free(&s->in);
    cg_buf_free(&s->skel.bytes);
    cg_buf_free(&s->hold);
    cg_buf_free(&s->text);
    cg_buf_free(&s->anns);
    cg_buf_free(&s->scratch);
    free(s->keys);
    free(s->seen);
}

/* A non-negative integer index, or -1. */
static int64_t index_at(const cg_json_t *j, int tok)
{
    double v;
    if (tok < 0 || !cg_json_number(j, tok, &v) || !(v >= 0 && v < 2147483648.0) ||
        v != (double)(int64_t)v)
        return -1;
    return (int64_t)v;
}

/* --- Chunks of our own ------------------------------------------------------ */

/* A chunk of ours after the role chunk, which goes before every other. */
static cg_buf_t *open_chunk(cg_xform_t *x, rs_t *s)
{
    cg__view_role(x, &s->role_sent);
    return cg__view_chunk(x);
}

/* The content this event released, as one chunk (a body keeps it), through
 * the transformer's content path: no chunk of ours to write and parse back. */
static void flush_text(cg_xform_t *x, rs_t *s)
{
    if (s->body || s->text.len == 0)
        return;
    cg__view_role(x, &s->role_sent);
    cg__xform_content(x, 0, cg_span(s->text.p, s->text.len));
    s->text.len = 0;
}

/* --- Content parts ------------------------------------------------------------ */

static part_t *part_at(rs_t *s, int64_t out, int64_t content)
{
    part_t *oldest = &s->parts[0];
    for (size_t i = 0; i < MAX_PARTS; i++) {
        part_t *p = &s->parts[i];
        if (p->used && p->out == out && p->content == content) {
            p->used = ++s->clock;
            return p;
        }
        if (p->used < oldest->used)
            oldest = p;
    }
    *oldest = (part_t){out, content, 0, ++s->clock};
    return oldest;
}

/* --- The marker finder ---------------------------------------------------------- */

/* Text goes out with this event, unless markers wait: then behind them. */
static void put_text(rs_t *s, const char *p, size_t n)
{
    cg_buf_put(s->nheld ? &s->hold : &s->text, p, n);
}

static void reset_char(rs_t *s)
{
    s->need = s->nwin = 0;
}

/* The candidate cannot become a marker: its bytes are text, where they are. */
static void drop_candidate(rs_t *s)
{
    if (s->state != IDLE && s->nheld == 0) {
        cg_buf_put(&s->text, s->hold.p + s->cand, s->hold.len - s->cand);
        s->hold.len = s->cand;
    }
    s->state = IDLE;
    reset_char(s);
}

static void start_candidate(rs_t *s, size_t at, uint8_t state)
{
    s->cand = at;
    s->state = state;
    s->cand_bytes = 3;
    s->cand_cp = s->cur->cp - 1;
    s->dagger = false;
    reset_char(s);
}

/* A 【 (its last k bytes of hold) inside a candidate: what came before it
 * is text, and a new candidate starts there. */
static void restart_candidate(rs_t *s, size_t k)
{
    size_t at = s->hold.len - k;
    if (s->nheld == 0) {
        cg_buf_put(&s->text, s->hold.p + s->cand, at - s->cand);
        memmove(s->hold.p + s->cand, s->hold.p + at, k);
        s->hold.len = s->cand + k;
        at = s->cand;
    }
    start_candidate(s, at, INSIDE);
}

/* A 】 ends the candidate: a marker when it has a † and fits. */
static void close_candidate(rs_t *s)
{
    if (!s->dagger || s->cand_bytes > MARKER_MAX) {
        drop_candidate(s);
        return;
    }
    if (s->nheld < MAX_HELD)
        s->held[s->nheld++] = (marker_t){s->cand, s->hold.len - s->cand, s->cand_cp, s->cur->cp, 0};
    else
        s->hold.len = s->cand; /* no room to wait: deleted now */
    s->state = IDLE;
    reset_char(s);
}

/* A whole character of the candidate: 1 【, 2 】, 3 †, 0 anything else. */
static void candidate_char(rs_t *s, int kind, size_t raw_len)
{
    if (kind == 1) {
        restart_candidate(s, raw_len);
    } else if (kind == 2) {
        close_candidate(s);
    } else {
        s->dagger |= kind == 3;
        if (s->cand_bytes + 3 > MARKER_MAX) /* no room left for its 】 */
            drop_candidate(s);
    }
}

static int raw_kind(const unsigned char *w)
{
    if (w[0] == 0xE3 && w[1] == 0x80)
        return w[2] == 0x90 ? 1 : w[2] == 0x91 ? 2 : 0;
    return w[0] == 0xE2 && w[1] == 0x80 && w[2] == 0xA0 ? 3 : 0;
}

/* One raw byte inside a candidate, already appended to hold. */
static void candidate_byte(rs_t *s, unsigned char b)
{
    s->cand_bytes++;
    if ((b & 0xC0) == 0x80 && s->need > 0) {
        s->win[s->nwin++] = b;
        if (--s->need == 0)
            candidate_char(s, s->nwin == 3 ? raw_kind(s->win) : 0, 3);
        return;
    }
    if (b >= 0xC0 && b < 0xF8) {
        s->win[0] = b;
        s->nwin = 1;
        s->need = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : 1;
        return;
    }
    reset_char(s);
    candidate_char(s, 0, 1);
}

static unsigned hex4(const char *p)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++)
        v = v * 16 + (unsigned)cg_hex_digit(p[i]);
    return v;
}

/* The escape at p[0] == '\\': its raw length and code unit (0 for a
 * one-letter escape, which stands for an ASCII character). */
static size_t escape_at(const char *p, size_t n, unsigned *unit)
{
    *unit = 0;
    if (n >= 6 && p[1] == 'u') {
        *unit = hex4(p + 2);
        return 6;
    }
    return n >= 2 ? 2 : n;
}

static size_t unit_bytes(unsigned u)
{
    return u < 0x80 ? 1 : (u < 0x800 || (u >= 0xD800 && u < 0xE000)) ? 2 : 3;
}

/* A low surrogate ends a character its high surrogate began. */
static uint64_t unit_cp(unsigned u)
{
    return !(u >= 0xDC00 && u < 0xE000);
}

/* The plain bytes from p: up to the first escape or 0xE3 (the lead byte of
 * 【); *cp gains the code points among them. Eight bytes at a time, as
 * deltas are mostly ASCII: a word holds a byte b when (w ^ b*ones) has a
 * zero byte, and UTF-8 continuation bytes are the 10xxxxxx ones. */
static size_t plain_run(const char *p, size_t n, uint64_t *cp)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = ones * 0x80;
    size_t i = 0;
    uint64_t c = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w, bs, e3;
        memcpy(&w, p + i, 8);
        bs = w ^ (ones * '\\');
        e3 = w ^ (ones * 0xE3);
        if ((((bs - ones) & ~bs) | ((e3 - ones) & ~e3)) & highs)
            break;
        /* continuation bytes, one high bit each, summed into the top byte
         * (no popcnt instruction is assumed, and libgcc's costs a call) */
        c += 8 - ((((w & ~(w << 1) & highs) >> 7) * ones) >> 56);
    }
    for (; i < n; i++) {
        unsigned char b = (unsigned char)p[i];
        if (b == '\\' || b == 0xE3)
            break;
        c += (b & 0xC0) != 0x80;
    }
    *cp += c;
    return i;
}

/* Text up to the next byte that may start a marker; returns its length. */
static size_t scan_plain(rs_t *s, const char *p, size_t n)
{
    size_t i = plain_run(p, n, &s->cur->cp);
    put_text(s, p, i);
    return i;
}

/* One escape or raw byte at p while a candidate is in progress, or its
 * first (IDLE); returns the bytes taken (0: look at them again in IDLE). */
static size_t scan_unit(rs_t *s, const char *p, size_t n)
{
    unsigned char b = (unsigned char)p[0];
    if (b == '\\') {
        unsigned u;
        size_t len = escape_at(p, n, &u);
        if (s->state == LEAD1 || s->state == LEAD2) {
            drop_candidate(s);
            return 0;
        }
        s->cur->cp += unit_cp(u);
        if (s->state == IDLE) {
            if (u == 0x3010) {
                cg_buf_put(&s->hold, p, len);
                start_candidate(s, s->hold.len - len, INSIDE);
            } else {
                put_text(s, p, len);
            }
            return len;
        }
        cg_buf_put(&s->hold, p, len);
        s->cand_bytes += unit_bytes(u);
        reset_char(s);
        candidate_char(s, u == 0x3010 ? 1 : u == 0x3011 ? 2 : u == 0x2020 ? 3 : 0, len);
        return len;
    }
    if ((s->state == LEAD1 && b != 0x80) || (s->state == LEAD2 && b != 0x90)) {
        drop_candidate(s);
        return 0;
    }
    s->cur->cp += (b & 0xC0) != 0x80;
    cg_buf_putc(&s->hold, (char)b);
    if (s->state == IDLE) { /* b is 0xE3 */
        s->cand = s->hold.len - 1;
        s->state = LEAD1;
    } else if (s->state == LEAD1) {
        s->state = LEAD2;
    } else if (s->state == LEAD2) {
        start_candidate(s, s->cand, INSIDE);
    } else {
        candidate_byte(s, b);
    }
    return 1;
}

/* Feeds a part's text (raw JSON string bytes) to the finder. */
static void scan(rs_t *s, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (s->state == IDLE)
            i += scan_plain(s, p + i, n - i);
        if (i < n)
            i += scan_unit(s, p + i, n - i);
    }
}

/* Releases the held bytes up to the candidate, each waiting marker as [N]
 * or deleted; with keep_open, only up to the first marker still open. */
static void settle(rs_t *s, bool keep_open)
{
    if (s->hold.len == 0)
        return; /* nothing waits: no marker, no candidate */
    size_t end = s->state == IDLE ? s->hold.len : s->cand;
    size_t pos = 0, k = 0;
    for (; k < s->nheld; k++) {
        const marker_t *m = &s->held[k];
        cg_buf_put(&s->text, s->hold.p + pos, m->at - pos);
        pos = m->at;
        if (m->n == 0 && keep_open)
            break;
        if (m->n)
            cg_buf_printf(&s->text, "[%u]", m->n);
        pos = m->at + m->len;
    }
    if (k == s->nheld) {
        cg_buf_put(&s->text, s->hold.p + pos, end - pos);
        pos = end;
    }
    memmove(s->hold.p, s->hold.p + pos, s->hold.len - pos);
    s->hold.len -= pos;
    for (size_t i = k; i < s->nheld; i++) {
        s->held[i - k] = s->held[i];
        s->held[i - k].at -= pos;
    }
    s->nheld -= k;
    if (s->state != IDLE)
        s->cand -= pos;
}

/* The end of the markers' wait: open ones are deleted, and the candidate
 * goes out as text unless the model may still be writing it. */
static void release(rs_t *s, bool keep_candidate)
{
    settle(s, false);
    if (!keep_candidate)
        drop_candidate(s);
}

/* --- Citations ------------------------------------------------------------------ */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

#define FNV_START 0xCBF29CE484222325ull

/* An annotation that names a citation. */
typedef struct ann {
    bool url;          /* url_citation; else file_citation */
    int key, title;    /* tokens: url or file_id; title or filename (-1: none) */
    bool ranged;       /* start_index and end_index are there */
    uint64_t start, end;
} ann_t;

static bool offset_at(const cg_json_t *j, int tok, uint64_t *out)
{
    double v;
    if (tok < 0 || !cg_json_number(j, tok, &v) || !(v >= 0 && v < 9007199254740992.0) ||
        v != (double)(uint64_t)v)
        return false;
    *out = (uint64_t)v;
    return true;
}

/* The citation fields of annotation a, flat (Responses) or nested
 * (Assistants); false when it names no citation. */
static bool read_annotation(const cg_json_t *j, int a, ann_t *an)
{
    int type = cg_json_get(j, a, "type");
    an->url = cg__view_is(j, type, "url_citation");
    if (!an->url && !cg__view_is(j, type, "file_citation"))
        return false;
    const char *key = an->url ? "url" : "file_id", *title = an->url ? "title" : "filename";
    an->key = cg_json_get(j, a, key);
    an->title = cg_json_get(j, a, title);
    if (!cg_json_is_str(j, an->key)) {
        int inner = cg_json_get(j, a, an->url ? "url_citation" : "file_citation");
        an->key = cg_json_get(j, inner, key);
        if (!cg_json_is_str(j, an->title))
            an->title = cg_json_get(j, inner, title);
    }
    if (!cg_json_is_str(j, an->key))
        return false;
    if (!cg_json_is_str(j, an->title))
        an->title = -1;
    an->start = an->end = 0;
    an->ranged = offset_at(j, cg_json_get(j, a, "start_index"), &an->start) &&
                 offset_at(j, cg_json_get(j, a, "end_index"), &an->end) && an->start <= an->end;
    if (!an->ranged)
        an->start = an->end = 0;
    return true;
}

/* The number of an annotation's citation, whose decoded key is scratch
 * [0, key_len) and hashes to h (adding the citation when new); 0 when the
 * table is full. */
static unsigned cite_of(cg_xform_t *x, rs_t *s, const cg_json_t *j, const ann_t *an, uint64_t h,
                        size_t key_len)
{
    for (size_t i = 0; i < s->nkeys; i++)
        if (s->keys[i].hash == h)
            return s->keys[i].n;
    size_t title_len, title_at = cg__view_decode(&s->scratch, j, an->title, &title_len);
    cg_cite_in_t in = {0};
    in.title = cg_span(s->scratch.p + title_at, title_len);
    if (an->url)
        in.url = cg_span(s->scratch.p, key_len);
    else
        in.key = cg_span(s->scratch.p, key_len);
    unsigned n = cg__xform_cite(x, &in);
    if (n && s->nkeys < CG_CITE_MAX) {
        s->keys = cg_grow(s->keys, s->nkeys, &s->keys_cap, 8, sizeof(keyed_t));
        s->keys[s->nkeys++] = (keyed_t){h, n};
    }
    return n;
}

/* Was the annotation of fingerprint h seen before? Remembers it. A full
 * memory counts final lists as seen: they nearly always repeat
 * annotation.added. */
static bool seen_before(rs_t *s, uint64_t h, bool final)
{
    for (size_t i = 0; i < s->nseen; i++)
        if (s->seen[i] == h)
            return true;
    if (s->nseen == MAX_SEEN)
        return final;
    s->seen = cg_grow(s->seen, s->nseen, &s->seen_cap, 16, sizeof(uint64_t));
    s->seen[s->nseen++] = h;
    return false;
}

/* Waiting markers within the range of an annotation of part (out, content)
 * become [n]; returns whether it covers any. */
static bool cover(rs_t *s, const ann_t *an, int64_t out, int64_t content, unsigned n)
{
    bool covers = false;
    if (!an->ranged || s->cur == NULL || s->cur->out != out || s->cur->content != content)
        return false;
    for (size_t k = 0; k < s->nheld; k++) {
        marker_t *m = &s->held[k];
        if (an->start <= m->start && m->end <= an->end) {
            covers = true;
            if (m->n == 0)
                m->n = n;
        }
    }
    return covers;
}

/* The client's chat annotation for a url_citation. */
/* A forwarded annotation's line must stay under 64 KiB (SPEC §6 rule 5): a
 * longer url is not forwarded (its citation still is, by the profile), a
 * longer title is cut. */
#define FORWARD_URL_MAX   16384
#define FORWARD_TITLE_MAX 4096

static void put_chat_annotation(cg_buf_t *b, const cg_json_t *j, const ann_t *an)
{
    cg_buf_puts(b, "{\"type\":\"url_citation\",\"url_citation\":{\"url\":");
    cg_span_t v = cg__view_str(j, an->key, "\"\"");
    cg_buf_put(b, v.p, v.n);
    cg_buf_puts(b, ",\"title\":");
    v = cg__view_str(j, an->title, "\"\"");
    if (v.n > FORWARD_TITLE_MAX + 2) {
        cg_buf_put(b, v.p, 1 + cg_json_safe_cut(v.p + 1, v.n - 2, FORWARD_TITLE_MAX));
        cg_buf_puts(b, "\xE2\x80\xA6\"");
    } else {
        cg_buf_put(b, v.p, v.n);
    }
    if (an->ranged)
        cg_buf_printf(b, ",\"start_index\":%llu,\"end_index\":%llu", (unsigned long long)an->start,
                      (unsigned long long)an->end);
    cg_buf_puts(b, "}}");
}

static void forward(cg_xform_t *x, rs_t *s, const cg_json_t *j, const ann_t *an)
{
    if (cg__view_str(j, an->key, "\"\"").n > FORWARD_URL_MAX)
        return;
    if (s->body) {
        if (s->anns.len)
            cg_buf_putc(&s->anns, ',');
        put_chat_annotation(&s->anns, j, an);
        return;
    }
    cg_buf_t *b = open_chunk(x, s);
    cg_buf_puts(b, ",\"choices\":[{\"index\":0,\"delta\":{\"annotations\":[");
    put_chat_annotation(b, j, an);
    cg_buf_puts(b, "]},\"finish_reason\":null}]}");
    cg__xform_chunk_end(x);
}

/* One annotation of content part (out, content). final: from a list that
 * repeats the annotation.added events. */
static void take_annotation(cg_xform_t *x, rs_t *s, const cg_json_t *j, int a, int64_t out,
                            int64_t content, bool final)
{
    ann_t an;
    if (!read_annotation(j, a, &an))
        return;
    size_t key_len;
    s->scratch.len = 0;
    cg__view_decode(&s->scratch, j, an.key, &key_len);
    uint64_t key = fnv(fnv(FNV_START, an.url ? "u" : "f", 1), s->scratch.p, key_len);
    int64_t where[5] = {out, content, an.ranged, (int64_t)an.start, (int64_t)an.end};
    bool seen = seen_before(s, fnv(key, where, sizeof(where)), final);
    unsigned n = cite_of(x, s, j, &an, key, key_len);
    if (n == 0)
        return;
    if (cover(s, &an, out, content, n)) {
        /* A body's [n] goes out with its content, after the annotations
         * that follow this one: its place is taken now, as a stream's. */
        if (s->body)
            cg__xform_reserve(x, 0, n);
        return;
    }
    if (seen)
        return;
    cg__xform_mention(x, 0, n);
    if (an.url)
        forward(x, s, j, &an);
}

static void take_list(cg_xform_t *x, rs_t *s, const cg_json_t *j, int list, int64_t out,
                      int64_t content)
{
    if (cg_json_type(j, list) != JSMN_ARRAY)
        return;
    int n = j->tok[list].size;
    for (int k = 0, a = list + 1; k < n; k++, a = cg_json_skip(j, a))
        take_annotation(x, s, j, a, out, content, true);
}

/* The annotations of a message item's output_text parts. */
static void take_item(cg_xform_t *x, rs_t *s, const cg_json_t *j, int item, int64_t out)
{
    int content = cg_json_get(j, item, "content");
    if (!cg__view_is(j, cg_json_get(j, item, "type"), "message") ||
        cg_json_type(j, content) != JSMN_ARRAY)
        return;
    int n = j->tok[content].size;
    for (int k = 0, c = content + 1; k < n; k++, c = cg_json_skip(j, c))
        if (cg__view_is(j, cg_json_get(j, c, "type"), "output_text"))
            take_list(x, s, j, cg_json_get(j, c, "annotations"), out, k);
}

static void take_output(cg_xform_t *x, rs_t *s, const cg_json_t *j, int resp)
{
    int output = cg_json_get(j, resp, "output");
    if (cg_json_type(j, output) != JSMN_ARRAY)
        return;
    int n = j->tok[output].size;
    for (int k = 0, item = output + 1; k < n; k++, item = cg_json_skip(j, item))
        take_item(x, s, j, item, k);
}

/* --- Streaming events --------------------------------------------------------- */

/* The common delta: plain text while nothing waits goes out as it came,
 * without a copy. Returns the bytes it took from the delta's start: all of
 * it, or the plain run before an escape or a 【 (kept as text, as the
 * finder would), so that the finder starts where the run stopped. */
static size_t plain_delta(cg_xform_t *x, rs_t *s, cg_span_t delta)
{
    if (s->state != IDLE || s->nheld || s->text.len)
        return 0;
    uint64_t cp = 0;
    size_t n = plain_run(delta.p, delta.n, &cp);
    s->cur->cp += cp;
    if (n < delta.n || s->body) {
        put_text(s, delta.p, n);
    } else if (n) {
        cg__view_role(x, &s->role_sent);
        cg__xform_content(x, 0, delta);
    }
    return n;
}

static void on_delta(cg_xform_t *x, rs_t *s, int64_t out, int64_t content, cg_span_t delta)
{
    part_t *p = part_at(s, out, content);
    release(s, p == s->cur);
    s->cur = p;
    size_t done = plain_delta(x, s, delta);
    if (done == delta.n && !s->body)
        return;
    scan(s, delta.p + done, delta.n - done);
    flush_text(x, s);
}

/* Any event but a delta or an annotation.added ends the markers' wait. */
static void boundary(cg_xform_t *x, rs_t *s)
{
    release(s, false);
    flush_text(x, s);
}

static int64_t index_of(const cg_json_t *j, const char *key)
{
    return index_at(j, cg_json_get(j, 0, key));
}

static void meta_of(cg_xform_t *x, const cg_json_t *j, int resp)
{
    cg__view_meta(x, j, cg_json_get(j, resp, "id"), cg_json_get(j, resp, "model"));
}

/* Usage, as chat completions name it; false when the upstream gave none. */
static bool put_usage(cg_buf_t *b, const cg_json_t *j, int resp)
{
    int usage = cg_json_get(j, resp, "usage");
    double in, out;
    if (!cg_json_number(j, cg_json_get(j, usage, "input_tokens"), &in) ||
        !cg_json_number(j, cg_json_get(j, usage, "output_tokens"), &out))
        return false;
    cg_buf_puts(b, "\"usage\":{\"prompt_tokens\":");
    cg_json_put_double(b, in);
    cg_buf_puts(b, ",\"completion_tokens\":");
    cg_json_put_double(b, out);
    cg_buf_puts(b, ",\"total_tokens\":");
    cg_json_put_double(b, in + out);
    cg_buf_putc(b, '}');
    return true;
}

/* The chat finish_reason of a completed or incomplete response. */
static const char *finish_reason(const cg_json_t *j, int resp)
{
    int status = cg_json_get(j, resp, "status");
    if (cg__view_is(j, status, "completed"))
        return "stop";
    if (!cg__view_is(j, status, "incomplete"))
        return NULL;
    int why = cg_json_get(j, cg_json_get(j, resp, "incomplete_details"), "reason");
    return cg__view_is(j, why, "content_filter") ? "content_filter" : "length";
}

static void finish(cg_xform_t *x, rs_t *s, const cg_json_t *j, const char *reason)
{
    int resp = cg_json_get(j, 0, "response");
    meta_of(x, j, resp);
    take_output(x, s, j, resp);
    boundary(x, s);
    cg__view_role(x, &s->role_sent);
    cg__view_finish(x, reason);
    if (x->dreq && x->dreq->include_usage) {
        cg_buf_t *b = cg__view_chunk(x);
        cg_buf_puts(b, ",\"choices\":[],");
        size_t mark = b->len;
        if (put_usage(b, j, resp)) {
            cg_buf_putc(b, '}');
            cg__xform_chunk_end(x);
        } else {
            b->len = mark;
        }
    }
    cg__view_done(x);
    s->done = true;
}

/* SPEC §6's error event, with the upstream's message and code. */
static void fail(cg_xform_t *x, rs_t *s, const cg_json_t *j, int err)
{
    boundary(x, s);
    int message = cg_json_get(j, err, "message"), code = cg_json_get(j, err, "code");
    /* A code that is no string, null included, is null. */
    cg__xform_error(x, cg__view_str(j, message, "\"the upstream response failed\""),
                    cg__view_str(j, code, "null"));
    s->done = true;
}

static void on_json_event(cg_xform_t *x, rs_t *s, const cg_json_t *j)
{
    int type = cg_json_get(j, 0, "type");
    if (cg__view_is(j, type, "response.output_text.delta")) {
        int delta = cg_json_get(j, 0, "delta");
        on_delta(x, s, index_of(j, "output_index"), index_of(j, "content_index"),
                 cg_json_is_str(j, delta) ? cg_json_raw(j, delta) : cg_span("", 0));
        return;
    }
    if (cg__view_is(j, type, "response.output_text.annotation.added") ||
        cg__view_is(j, type, "response.output_text_annotation.added")) {
        take_annotation(x, s, j, cg_json_get(j, 0, "annotation"), index_of(j, "output_index"),
                        index_of(j, "content_index"), false);
        settle(s, true);
        flush_text(x, s);
        return;
    }
    int64_t out = index_of(j, "output_index");
    if (cg__view_is(j, type, "response.created") || cg__view_is(j, type, "response.in_progress")) {
        meta_of(x, j, cg_json_get(j, 0, "response"));
        boundary(x, s);
        cg__view_role(x, &s->role_sent);
    } else if (cg__view_is(j, type, "response.output_text.done")) {
        take_list(x, s, j, cg_json_get(j, 0, "annotations"), out, index_of(j, "content_index"));
    } else if (cg__view_is(j, type, "response.content_part.done")) {
        int part = cg_json_get(j, 0, "part");
        if (cg__view_is(j, cg_json_get(j, part, "type"), "output_text"))
            take_list(x, s, j, cg_json_get(j, part, "annotations"), out,
                      index_of(j, "content_index"));
    } else if (cg__view_is(j, type, "response.output_item.done")) {
        take_item(x, s, j, cg_json_get(j, 0, "item"), out);
    } else if (cg__view_is(j, type, "response.completed") ||
               cg__view_is(j, type, "response.incomplete")) {
        bool completed = cg__view_is(j, type, "response.completed");
        const char *reason = finish_reason(j, cg_json_get(j, 0, "response"));
        finish(x, s, j, reason ? reason : completed ? "stop" : "length");
        return;
    } else if (cg__view_is(j, type, "response.failed")) {
        fail(x, s, j, cg_json_get(j, cg_json_get(j, 0, "response"), "error"));
        return;
    } else if (cg__view_is(j, type, "error")) {
        int inner = cg_json_get(j, 0, "error");
        fail(x, s, j, cg_json_is_str(j, cg_json_get(j, 0, "message")) ? 0 : inner);
        return;
    }
    boundary(x, s);
}

/* --- The delta fast path ---------------------------------------------------------
 *
 * Nearly every event of a stream is an output_text.delta, a flat object
 * whose members differ from event to event (sequence_number, obfuscation),
 * so there is no fixed template to match. A scanner for flat objects of
 * strings, numbers, literals and empty arrays reads it without building
 * tokens. It takes only valid JSON, and the first occurrence of a member as
 * cg_json_get does; anything else it leaves to the full parse, so both
 * paths read every event alike.
 */

typedef struct flat {
    cg_span_t type, delta; /* string bodies; p NULL when absent or not a string */
    int64_t out, content;  /* -1 when absent */
    bool has_type, has_delta, has_out, has_content, has_seq, has_obf;
    hole_t hole[MAX_HOLES]; /* first sequence_number, delta and obfuscation, in order */
    size_t nholes, delta_hole;
} flat_t;

static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* Just past the string that opens at p (*p is its quote), or NULL when
 * it is not valid (a raw control byte, NUL included, too). */
static const char *string_end(const char *p, const char *e)
{
    size_t n = (size_t)(e - p) - 1, len = cg__view_string_len(p + 1, n);
    return len > n ? NULL : p + len + 2;
}

static const char *digits_end(const char *p, const char *e)
{
    const char *d = p;
    while (p < e && *p >= '0' && *p <= '9')
        p++;
    return p > d ? p : NULL;
}

/* Just past the number at p, or NULL when there is none. A leading 0 is a
 * whole integer part: what follows it then fails the caller's next test. */
static const char *number_end(const char *p, const char *e)
{
    size_t n = cg__view_number_len(p, (size_t)(e - p));
    return n ? p + n : NULL;
}

static const char *word_end(const char *p, const char *e, const char *w)
{
    size_t n = strlen(w);
    return (size_t)(e - p) >= n && memcmp(p, w, n) == 0 ? p + n : NULL;
}

/* Just past the value at p; NULL for an invalid or nested one. */
static const char *value_end(const char *p, const char *e)
{
    switch (*p) {
    case '"':
        return string_end(p, e);
    case 't':
        return word_end(p, e, "true");
    case 'f':
        return word_end(p, e, "false");
    case 'n':
        return word_end(p, e, "null");
    case '[':
    case '{': {
        const char *q = skip_ws(p + 1, e);
        return q < e && *q == (*p == '[' ? ']' : '}') ? q + 1 : NULL;
    }
    default:
        return number_end(p, e);
    }
}

/* An index member: up to 9 digits (the full parse reads any other form). */
static bool note_index(int64_t *dst, bool *has, const char *v, const char *ve)
{
    if (*has)
        return true;
    *has = true;
    if (ve - v > 9 || digits_end(v, ve) != ve || (*v == '0' && ve - v > 1))
        return false;
    int64_t n = 0;
    for (; v < ve; v++)
        n = n * 10 + (*v - '0');
    *dst = n;
    return true;
}

static void note_str(cg_span_t *dst, bool *has, const char *v, const char *ve)
{
    if (*has)
        return;
    *has = true;
    if (*v == '"')
        *dst = cg_span(v + 1, (size_t)(ve - v - 2));
}

#define IS(span, lit) ((span).n == sizeof(lit) - 1 && memcmp((span).p, lit, sizeof(lit) - 1) == 0)

/* A member that changes from delta to delta, if its value is a string or a
 * number: a hole of the skeleton. */
static void note_hole(flat_t *f, bool *has, const char *data, const char *v, const char *ve)
{
    if (*has)
        return;
    *has = true;
    if (*v == '"' || *v == '-' || (*v >= '0' && *v <= '9'))
        f->hole[f->nholes++] = (hole_t){(size_t)(v - data), (size_t)(ve - data), *v == '"'};
}

static bool note_member(flat_t *f, cg_span_t key, const char *data, const char *v,
                        const char *ve)
{
    if (IS(key, "type")) {
        note_str(&f->type, &f->has_type, v, ve);
    } else if (IS(key, "delta")) {
        if (!f->has_delta && *v == '"') {
            f->delta_hole = f->nholes;
            f->delta = cg_span(v + 1, (size_t)(ve - v - 2));
        }
        note_hole(f, &f->has_delta, data, v, ve);
    } else if (IS(key, "sequence_number")) {
        note_hole(f, &f->has_seq, data, v, ve);
    } else if (IS(key, "obfuscation")) {
        note_hole(f, &f->has_obf, data, v, ve);
    } else if (IS(key, "output_index"))
        return note_index(&f->out, &f->has_out, v, ve);
    else if (IS(key, "content_index"))
        return note_index(&f->content, &f->has_content, v, ve);
    return true;
}

/* Reads an output_text.delta event; false: parse it in full. */
static bool read_flat(cg_span_t d, flat_t *f)
{
    const char *p = skip_ws(d.p, d.p + d.n), *e = d.p + d.n;
    memset(f, 0, sizeof(*f));
    f->out = f->content = -1;
    f->delta_hole = MAX_HOLES;
    if (p == e || *p != '{')
        return false;
    for (p = skip_ws(p + 1, e);; p = skip_ws(p + 1, e)) {
        const char *ke = p < e && *p == '"' ? string_end(p, e) : NULL;
        if (ke == NULL)
            return false;
        const char *v = skip_ws(ke, e);
        if (v == e || *v != ':' || (v = skip_ws(v + 1, e)) == e)
            return false;
        /* The one type this path takes is matched, not scanned. */
        static const char delta_type[] = "\"response.output_text.delta\"";
        size_t dn = sizeof(delta_type) - 1;
        cg_span_t key = cg_span(p + 1, (size_t)(ke - p - 2));
        const char *ve = IS(key, "type") && (size_t)(e - v) >= dn && memcmp(v, delta_type, dn) == 0
                             ? v + dn
                             : value_end(v, e);
        if (ve == NULL || !note_member(f, key, d.p, v, ve))
            return false;
        p = skip_ws(ve, e);
        if (p == e || *p != ',')
            break;
    }
    if (p == e || *p != '}' || skip_ws(p + 1, e) != e)
        return false;
    return f->type.p && IS(f->type, "response.output_text.delta");
}

/*
 * Delta events of one item differ only in a few values: sequence_number,
 * delta, obfuscation. The last one scanned in full is kept as a skeleton
 * with those values as holes; the next is matched against it with memcmp,
 * only its holes scanned. A match is the skeleton (valid JSON, a flat object
 * of these members) with valid values of the same kinds in the holes: a
 * flat object with the same members in the same order, so it reads as the
 * skeleton did but for the delta, which is its own.
 */
static void keep_skeleton(rs_t *s, cg_span_t d, const flat_t *f)
{
    skeleton_t *k = &s->skel;
    k->ok = d.n <= SKELETON_MAX && f->delta_hole < f->nholes;
    if (!k->ok)
        return;
    k->bytes.len = 0;
    cg_buf_put(&k->bytes, d.p, d.n);
    memcpy(k->hole, f->hole, sizeof(k->hole));
    k->nholes = f->nholes;
    k->delta = f->delta_hole;
    k->out = f->out;
    k->content = f->content;
}

static bool match_skeleton(const rs_t *s, cg_span_t d, flat_t *f)
{
    const skeleton_t *k = &s->skel;
    const char *p = d.p, *e = d.p + d.n;
    size_t from = 0;
    if (!k->ok)
        return false;
    for (size_t h = 0; h < k->nholes; h++) {
        size_t fixed = k->hole[h].start - from;
        if ((size_t)(e - p) < fixed || memcmp(p, k->bytes.p + from, fixed) != 0)
            return false;
        p += fixed;
        const char *ve = !k->hole[h].str ? (p < e ? number_end(p, e) : NULL)
                         : p < e && *p == '"' ? string_end(p, e)
                                              : NULL;
        if (ve == NULL)
            return false;
        if (h == k->delta)
            f->delta = cg_span(p + 1, (size_t)(ve - p - 2));
        p = ve;
        from = k->hole[h].end;
    }
    size_t rest = k->bytes.len - from;
    if ((size_t)(e - p) != rest || memcmp(p, k->bytes.p + from, rest) != 0)
        return false;
    f->out = k->out;
    f->content = k->content;
    return true;
}

/* --- The view ---------------------------------------------------------------------- */

/* Gives back what one large event grew, once it is no longer used. */
static void trim(rs_t *s)
{
    cg_buf_t *bufs[] = {&s->hold, &s->text, &s->scratch, &s->in.lines};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        if (bufs[i]->len == 0 && bufs[i]->cap > BUF_KEEP)
            cg_buf_free(bufs[i]);
}

static void on_event(cg_xform_t *x, void *state, const cg_sse_event_t *ev)
{
    rs_t *s = state;
    if (s->done || ev->ndata == 0 || cg_span_eq(ev->data, "[DONE]"))
        return;
    flat_t f;
    if (match_skeleton(s, ev->data, &f)) {
        on_delta(x, s, f.out, f.content, f.delta);
        return;
    }
    if (read_flat(ev->data, &f)) {
        keep_skeleton(s, ev->data, &f);
        on_delta(x, s, f.out, f.content, f.delta.p ? f.delta : cg_span("", 0));
        return;
    }
    if (!cg__view_parse(x, &s->in, ev))
        x->stats.malformed++;
    else
        on_json_event(x, s, &s->in.json);
    cg__view_give_back(x, &s->in);
    trim(s);
}

/* The upstream ended before the response did: what is held goes out. */
static void on_end(cg_xform_t *x, void *state, cg_span_t pending)
{
    (void)pending; /* an incomplete event: dropped, as EventSource does */
    rs_t *s = state;
    if (!s->done)
        boundary(x, s);
}

/* --- Non-streaming bodies ------------------------------------------------------------ */

/* Each output_text part of the message items as the stream it amounts to:
 * its text as one delta, then one annotation.added per annotation. */
static void read_parts(cg_xform_t *x, rs_t *s, const cg_json_t *j, int resp)
{
    int output = cg_json_get(j, resp, "output");
    int nout = cg_json_type(j, output) == JSMN_ARRAY ? j->tok[output].size : 0;
    for (int i = 0, item = output + 1; i < nout; i++, item = cg_json_skip(j, item)) {
        int content = cg_json_get(j, item, "content");
        if (!cg__view_is(j, cg_json_get(j, item, "type"), "message") ||
            cg_json_type(j, content) != JSMN_ARRAY)
            continue;
        int nparts = j->tok[content].size;
        for (int k = 0, c = content + 1; k < nparts; k++, c = cg_json_skip(j, c)) {
            int text = cg_json_get(j, c, "text");
            if (!cg__view_is(j, cg_json_get(j, c, "type"), "output_text") ||
                !cg_json_is_str(j, text))
                continue;
            on_delta(x, s, i, k, cg_json_raw(j, text));
            int list = cg_json_get(j, c, "annotations");
            int nann = cg_json_type(j, list) == JSMN_ARRAY ? j->tok[list].size : 0;
            for (int a = 0, t = list + 1; a < nann; a++, t = cg_json_skip(j, t)) {
                take_annotation(x, s, j, t, i, k, false);
                settle(s, true);
            }
        }
    }
    release(s, false);
}

static void put_meta_member(cg_buf_t *b, const char *name, const cg_json_t *j, int tok)
{
    cg_span_t v = cg__view_str(j, tok, "\"\"");
    cg_buf_printf(b, "\"%s\":", name);
    cg_buf_put(b, v.p, v.n);
}

static void put_chat(const cg_xform_t *x, const rs_t *s, const cg_json_t *j, int resp,
                     cg_buf_t *chat)
{
    cg_buf_putc(chat, '{');
    put_meta_member(chat, "id", j, cg_json_get(j, resp, "id"));
    cg_buf_printf(chat, ",\"object\":\"chat.completion\",\"created\":%lld,", (long long)x->created);
    put_meta_member(chat, "model", j, cg_json_get(j, resp, "model"));
    cg_buf_puts(chat, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"");
    cg_buf_put(chat, s->text.p, s->text.len);
    cg_buf_putc(chat, '"');
    if (s->anns.len) {
        cg_buf_puts(chat, ",\"annotations\":[");
        cg_buf_put(chat, s->anns.p, s->anns.len);
        cg_buf_putc(chat, ']');
    }
    const char *reason = finish_reason(j, resp);
    if (reason)
        cg_buf_printf(chat, "},\"finish_reason\":\"%s\"}]", reason);
    else
        cg_buf_puts(chat, "},\"finish_reason\":null}]");
    size_t mark = chat->len;
    cg_buf_putc(chat, ',');
    if (!put_usage(chat, j, resp))
        chat->len = mark;
    cg_buf_putc(chat, '}');
}

/* A failed response: SPEC §6's error, as a body. */
static void put_error(const cg_json_t *j, int err, cg_buf_t *chat)
{
    int message = cg_json_get(j, err, "message"), code = cg_json_get(j, err, "code");
    cg__view_error_body(chat, cg__view_str(j, message, "\"the upstream response failed\""),
                        cg__view_str(j, code, "null"));
}

static int body_of(cg_xform_t *x, rs_t *s, const cg_json_t *j, cg_buf_t *chat)
{
    if (!cg__view_is(j, cg_json_get(j, 0, "object"), "response"))
        return -1;
    s->body = true;
    s->text.len = s->anns.len = 0;
    meta_of(x, j, 0);
    if (cg__view_is(j, cg_json_get(j, 0, "status"), "failed")) {
        put_error(j, cg_json_get(j, 0, "error"), chat);
        return 0;
    }
    read_parts(x, s, j, 0);
    put_chat(x, s, j, 0, chat);
    return 0;
}

static int on_body(cg_xform_t *x, void *state, const char *body, size_t len, cg_buf_t *chat)
{
    rs_t *s = state;
    int rc = cg__view_parse_bytes(x, &s->in, body, len) ? body_of(x, s, &s->in.json, chat) : -1;
    cg__view_give_back(x, &s->in);
    return rc;
}

/* --- The request ------------------------------------------------------------- */

static int request(cg_chatreq_t *c, cg_dialect_err_t *err)
{
    (void)err;
    cg_buf_t *o = c->out;
    cg_buf_putc(o, '{');
    cg__req_put_model(c);
    cg__req_put_system(c, "\"instructions\":\"", "\"");
    cg__req_put_turns(c, "input", cg__req_put_role_turn, NULL);
    int max = cg__req_max_tokens(c);
    if (max >= 0) {
        cg__req_key(o, "max_output_tokens");
        cg__req_put_raw(c, max);
    }
    cg__req_put_kept(c, CG_REQ_TEMPERATURE, "temperature");
    cg__req_put_kept(c, CG_REQ_TOP_P, "top_p");
    cg__req_put_kept(c, CG_REQ_STREAM, "stream");
    cg_buf_putc(o, '}');
    return 0;
}

static void path(const cg_dialect_req_t *r, cg_buf_t *out)
{
    (void)r;
    cg_buf_puts(out, "/v1/responses"); /* the client's query has no meaning there */
}

static const cg_dialect_view_t view = {
    .state_size = sizeof(rs_t),
    .state_free = state_free,
    .event = on_event,
    .end = on_end,
    .body = on_body,
};

const cg_dialect_t cg__dialect_responses = {
    .name = "responses",
    .request = request,
    .path = path,
    .view = &view,
};
