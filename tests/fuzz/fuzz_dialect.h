/*
 * What the dialect view targets that take byte 1 the same way share
 * (fuzz_anthropic, fuzz_bedrock): the client's request the view reads the
 * answer for, translated by the dialect, and the profile and caps.
 *   bits 0-1: the request: 0 = <source> tags (documents 0-2), 1 = none,
 *             2 = include_usage, 3 = both
 *   bits 2-4: profile: openwebui, openai, webchat, structured, off, then
 *             openwebui again
 *   bit 5:    max_event 512 instead of 4 MiB
 *   bit 6:    max_doc_bytes 16 instead of 8192
 */
#ifndef CG_FUZZ_DIALECT_H
#define CG_FUZZ_DIALECT_H

#include "citegate/xform.h"

#include "../support/dialects.h"
#include "../support/profiles.h"
#include "fuzz_common.h"
#include "fuzz_run.h"

/* What a view may write for an input: a constant factor and a constant. */
#define OUT_FACTOR 32
#define OUT_EXTRA  (64u << 10)

static const char fz_sources_request[] =
    "{\"model\":\"claude-x\",\"stream\":true,\"messages\":[{\"role\":\"system\",\"content\":"
    "\"<source id=\\\"3\\\" name=\\\"https://a.example/x\\\">three</source>"
    "<source id=\\\"1\\\" name=\\\"one.md\\\">one</source>"
    "<source id=\\\"9\\\" name=\\\"report (v2).pdf\\\">nine</source>\"},"
    "{\"role\":\"user\",\"content\":\"what is x?\"}]%s}";

typedef struct fz_req {
    cg_request_t req;
    cg_dialect_req_t dreq;
} fz_req_t;

static fz_req_t fz_requests[3]; /* sources, usage, sources + usage */

static inline void fz_make_request(fz_req_t *r, const char *dialect, const char *body)
{
    cg_cite_opts_t o = {8192, true};
    cg_dialect_err_t e;
    size_t n = strlen(body);
    FZ_CHECK(cg_request_parse(&r->req, body, n, &o) == 0);
    cg_dialect_in_t in = {.req = &r->req};
    FZ_CHECK(cg_dialect_request(dialect_named(dialect), body, n, &in, &r->dreq, &e) == 0);
}

/* The three requests, made once for the process. */
/* docs: the documents the dialect makes of the first request's <source>
 * tags (none where it sends none). */
static inline void fz_init_requests(const char *dialect, size_t docs)
{
    static bool done;
    if (done)
        return;
    done = true;
    char body[1024];
    snprintf(body, sizeof(body), fz_sources_request, "");
    fz_make_request(&fz_requests[0], dialect, body);
    FZ_CHECK(fz_requests[0].dreq.ndocs == docs);
    fz_make_request(&fz_requests[1], dialect,
                    "{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
                    "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}");
    FZ_CHECK(fz_requests[1].dreq.include_usage);
    snprintf(body, sizeof(body), fz_sources_request,
             ",\"stream_options\":{\"include_usage\":true}");
    fz_make_request(&fz_requests[2], dialect, body);
}

static inline const fz_req_t *fz_pick_request(uint8_t flags)
{
    static const int which[4] = {0, -1, 1, 2};
    int w = which[flags & 3];
    return w < 0 ? NULL : &fz_requests[w];
}

static inline void fz_pick_cfg(cg_xform_cfg_t *cfg, uint8_t flags)
{
    static const char *const names[8] = {"openwebui", "openai",    "webchat",   "structured",
                                         "off",       "openwebui", "openwebui", "openwebui"};
    cg_xform_cfg_default(cfg, profile_named(names[(flags >> 2) & 7]));
    if (flags & 0x20)
        cfg->max_event = 512;
    if (flags & 0x40)
        cfg->max_doc_bytes = 16;
}

/* A transformer reading an upstream of that dialect for request r. */
static inline cg_xform_t *fz_dialect_xform(const cg_xform_cfg_t *cfg, const fz_req_t *r,
                                           const char *dialect)
{
    cg_xform_t *x = cg_xform_new(cfg, r ? &r->req : NULL);
    cg_xform_set_dialect(x, cg_dialect_view(dialect_named(dialect)), r ? &r->dreq : NULL,
                         1700000000);
    return x;
}

/* cg_xform_body on the input: refused and copied unchanged, or a chat
 * completion whose first choice has a message content string, bounded. */
static inline void fz_check_dialect_body(const cg_xform_cfg_t *cfg, const fz_req_t *r,
                                         const char *dialect, const uint8_t *in, size_t len)
{
    cg_buf_t b = {0};
    int rc = fz_body(&b, fz_dialect_xform(cfg, r, dialect), in, len);
    cg_json_t j;
    if (fz_body_object(&b, rc, in, len, &j)) {
        int choice = cg_json_get(&j, 0, "choices") + 1;
        FZ_CHECK(cg_json_is_str(&j, cg_json_get(&j, cg_json_get(&j, choice, "message"), "content")));
        FZ_CHECK(b.len <= OUT_FACTOR * len + OUT_EXTRA);
        cg_json_free(&j);
    }
    cg_buf_free(&b);
}

#endif
