/*
 * The daemon's shell driven by fuzz inputs: the four drivers of the I/O
 * shell (fuzz_h1_server, fuzz_h2_server, fuzz_up_h1, fuzz_up_h2) share this
 * world. It is one worker's loop context (ctx.h) and client side
 * (server.h) on one libuv loop, made once per process, whose clients are
 * handed one end of a socketpair through cg_server_adopt(): the same
 * protocol handlers, exchanges, pools and transformer as the daemon, with
 * no hook inside them.
 *
 * Each input runs to completion: the driver writes its pieces, the loop
 * runs until nothing moves (fs_settle), the input's end comes (the client
 * leaves, a drain, a shutdown, or time jumps past every timeout), then what
 * is left is closed through its own path and the world is checked empty
 * (fs_teardown). A leak is LeakSanitizer's to report (-detect_leaks=1).
 *
 * Time never has to pass for real: the worker's clock is skewed forward and
 * every armed timer moved by as much (fs_advance), so a timeout is as cheap
 * and as repeatable as any other input.
 */
#ifndef CG_FUZZ_SHELL_H
#define CG_FUZZ_SHELL_H

#include "fuzz_common.h"
#include "io/exchange.h"
#include "io/server.h"

#include <llhttp.h>

/* The driver's end of a connection; what the shell sent it gathers in `got`.
 * Open peers are watched: every settling turn reads them all. */
typedef struct fs_peer {
    int fd;       /* -1 once closed */
    cg_buf_t got; /* bytes the shell sent */
    bool eof;     /* the shell closed or shut down its side */
} fs_peer_t;

/* The libFuzzer entry point every driver defines. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern cg_ctx_t fs_ctx;
extern cg_server_t fs_server;
extern cg_config_t fs_cfg;

/* Makes the world once: config, metrics, the loop, its context, the
 * client side, tracking (analysis and counters, no store). */
void fs_init(void);

/* Per-input settings, from a flags byte:
 *   bit 0: a small request body limit (4 KiB), so 413 is reachable
 *   bit 1: CORS on for https://app.example
 *   bits 2-3: the upstream dialect (openai, anthropic, responses, gemini)
 *   bits 4-6: the end of the input (FS_END_*); past FS_NEND, another
 *             upstream dialect than bits 2-3's: FS_NEND and FS_NEND + 1 are
 *             bedrock (bedrock-kb when bit 2 is set) with the ends
 *             FS_END_EOF and FS_END_CLOSE, FS_NEND + 2 is cohere with
 *             FS_END_EOF
 *   bit 7: time passes between pieces (FS_PIECE_MS of the fake clock each)
 */
enum { FS_END_EOF, FS_END_CLOSE, FS_END_DRAIN, FS_END_SHUTDOWN, FS_END_WAIT, FS_NEND };
#define FS_PIECE_MS 10000
/* Writes an input is cut into at most: the rest goes in one, so a long
 * input cut byte by byte costs a bounded number of loop turns. */
#define FS_MAX_PIECES 64
typedef struct fs_opts {
    bool small_body, cors, slow;
    const cg_dialect_t *dialect;
    int end;
} fs_opts_t;
fs_opts_t fs_configure(uint8_t flags);

/* A socketpair: the shell's end is adopted as a client (admin: of the admin
 * listener); the driver's end is watched and non-blocking. */
void fs_client(fs_peer_t *p, bool admin);
/* Watches a connected socket the driver accepted (an upstream's end). */
void fs_watch(fs_peer_t *p, int fd);

/* Reads what the shell sent to p without blocking; the bytes read. */
size_t fs_read(fs_peer_t *p);
/* Writes n bytes to p, running the loop while the socket is full; false
 * when the shell stopped reading for good (the rest is dropped). */
bool fs_write(fs_peer_t *p, const void *b, size_t n);
/* Closes the driver's end (unwatched; `got` is kept). */
void fs_close(fs_peer_t *p);
/* Half-closes it: the shell reads EOF, and can still answer. */
void fs_shutdown(fs_peer_t *p);

/* Runs the loop until nothing moves: no bytes on any watched peer, no work
 * at the safe point, busy() false (NULL: not asked), two turns in a row.
 * Aborts after FS_MAX_TURNS: a hang. */
#define FS_MAX_TURNS 20000
typedef bool (*fs_busy_fn)(void *arg);
void fs_settle(fs_busy_fn busy, void *arg);

/* Moves the clock ms forward, and every armed timer with it, then settles. */
void fs_advance(uint64_t ms, fs_busy_fn busy, void *arg);

/* The end of an input (o->end): the client leaves (EOF or close), the
 * worker drains (and then its drain time ends), or time runs past every
 * timeout. `client` may already be closed. */
void fs_end(fs_peer_t *client, const fs_opts_t *o, fs_busy_fn busy, void *arg);

/* Closes every watched peer (the driver's ends), lets the shell close what is left (the clock
 * jumps past the request and idle timeouts), then checks that the input
 * left nothing behind: no client, no exchange, no queued work, every gauge
 * back at zero. What the peers got stays for the caller to read (and free). */
void fs_teardown(fs_busy_fn busy, void *arg);

/* --- the scripted upstream (server targets) ------------------------------ */

/* An upstream in-process that answers every forwarded request from the
 * loop, never from inside a call: a chat route with the demo's answer in the
 * request's dialect (one event a turn, paused while the client lags; the
 * openai stream with an injected `event` member), any other path with its
 * request body echoed back. Each request it gets is checked with
 * fs_check_upreq first. */
cg_upstream_t *fs_scripted_new(void);

/* What no upstream may receive from citegate (SPEC §4), on r serialized as
 * up_h1 does it: one HTTP/1.1 request, exactly one Host, a target without
 * a `.` or `..` segment (also as %2e), field names that are tokens, values
 * without CR, LF or NUL. */
void fs_check_upreq(const cg_upreq_t *r);
/* The same on bytes an upstream read: whole requests, as llhttp reads them
 * (a last one may be cut). Returns how many requests it read. */
size_t fs_check_h1_requests(const char *p, size_t n);
/* A path (no query) with a `.` or `..` segment, also percent-encoded. */
bool fs_dot_segment(const char *path, size_t n);

/* --- what the client sees ------------------------------------------------ */

typedef struct fs_answer {
    int status;
    bool sse, json, encoded; /* its Content-Type, and a Content-Encoding */
    char rid[64];            /* its X-Request-Id (citegate's ids are shorter); "" if none */
    cg_buf_t body;
} fs_answer_t;

/* The SSE body of an answer, event by event (SPEC §6 rules 4-5): every
 * line at most 64 KiB unless it appears verbatim in upstream[0..un)
 * (forwarded unchanged); no event whose data is a JSON object with a
 * top-level member named `event` (after unescaping) but citegate's own
 * openwebui source events (one `event`, of type source, with `choices: []`),
 * unless upstream events may pass unchanged (pass_events); with strict,
 * every event's data is `[DONE]` or a JSON object. Returns the last
 * event's data (valid until the next call; empty if none), and in *done
 * (when not NULL) whether any event was [DONE]. */
cg_span_t fs_check_sse(const fs_answer_t *a, const uint8_t *upstream, size_t un, bool strict,
                       bool pass_events, bool *done);

/* Reads HTTP/1.1 responses off a client connection, strictly (llhttp). */
typedef struct fs_h1_reader {
    llhttp_t parser;
    llhttp_settings_t settings;
    fs_answer_t cur;
    cg_hdrs_t hdrs;
    const bool *head; /* whether the i-th request was HEAD */
    size_t nhead;
    size_t answers; /* final responses read (1xx not counted) */
    bool broken;    /* llhttp refused the bytes */
    void (*on_answer)(void *arg, size_t index, fs_answer_t *a);
    void *arg;
} fs_h1_reader_t;

void fs_h1_reader_init(fs_h1_reader_t *r, const bool *head, size_t nhead,
                       void (*on_answer)(void *, size_t, fs_answer_t *), void *arg);
void fs_h1_reader_feed(fs_h1_reader_t *r, const char *p, size_t n);
/* The connection ended: true when no response was left cut. */
bool fs_h1_reader_finish(fs_h1_reader_t *r);
void fs_h1_reader_free(fs_h1_reader_t *r);


/* --- HTTP/2 on the driver's side --------------------------------------------- */

#include <nghttp2/nghttp2.h>

/* Appends one frame: the 9-byte header, then the payload. */
void fs_h2_frame(cg_buf_t *out, uint8_t type, uint8_t flags, uint32_t sid, const void *payload,
                 size_t n);

/* One stream as the driver reads it off the shell's frames. */
typedef struct fs_h2_stream {
    int32_t id;
    fs_answer_t a;  /* the response (or, read off a client, the request) */
    cg_hdrs_t hdrs; /* its fields, pseudo-headers included */
    bool head, ended, reset;
} fs_h2_stream_t;

/* Reads the frames the shell sends: as a server (the server's SETTINGS come
 * first) or as a client (the connection preface first). Checked as they
 * come: frame sizes, HPACK that decodes (the shell's encoder is never
 * wrong), header blocks that CONTINUATION ends on the same stream with
 * nothing between. */
typedef struct fs_h2_reader {
    bool from_client;
    nghttp2_hd_inflater *inf;
    cg_buf_t in;
    size_t off;
    bool started, broken, goaway;
    uint32_t goaway_code;
    uint32_t max_frame; /* the largest the peer may send */
    cg_buf_t block;     /* a header block being gathered */
    int32_t block_sid;
    uint8_t block_flags;
    bool in_block;
    fs_h2_stream_t *v;
    size_t n, cap;
} fs_h2_reader_t;

void fs_h2_reader_init(fs_h2_reader_t *r, bool from_client);
void fs_h2_reader_feed(fs_h2_reader_t *r, const char *p, size_t n);
fs_h2_stream_t *fs_h2_stream(fs_h2_reader_t *r, int32_t id);
void fs_h2_reader_free(fs_h2_reader_t *r);

#endif
