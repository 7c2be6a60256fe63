/*
 * `citegate filter`: the daemon's transformation of one response, offline
 * (SPEC §2). stdin: an upstream body (JSON object: non-streaming; anything
 * else: SSE). stdout: what the client would get.
 */
#include "citegate/config.h"
#include "citegate/dialect.h"
#include "citegate/profile.h"
#include "citegate/request.h"
#include "citegate/xform.h"
#include "cmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FILTER_MAX_INPUT (1u << 30)

static int read_all(FILE *f, cg_buf_t *b, const char *what)
{
    for (;;) {
        char *tail = cg_buf_reserve(b, 65536);
        size_t n = fread(tail, 1, 65536, f);
        b->len += n;
        if (b->len > FILTER_MAX_INPUT) {
            fprintf(stderr, "citegate filter: %s is larger than %u bytes\n", what,
                    FILTER_MAX_INPUT);
            return -1;
        }
        if (n < 65536) {
            if (ferror(f)) {
                fprintf(stderr, "citegate filter: reading %s: %s\n", what, strerror(errno));
                return -1;
            }
            return 0;
        }
    }
}

static int write_out(const cg_out_t *o)
{
    for (size_t i = 0; i < o->nseg; i++) {
        if (fwrite(o->seg[i].p, 1, o->seg[i].n, stdout) != o->seg[i].n) {
            fprintf(stderr, "citegate filter: writing stdout: %s\n", strerror(errno));
            return -1;
        }
    }
    return 0;
}

static bool looks_like_json(const cg_buf_t *b)
{
    size_t i = 0;
    if (b->len >= 3 && memcmp(b->p, "\xEF\xBB\xBF", 3) == 0)
        i = 3;
    while (i < b->len && (b->p[i] == ' ' || b->p[i] == '\t' || b->p[i] == '\r' || b->p[i] == '\n'))
        i++;
    return i < b->len && b->p[i] == '{';
}

/* The request as the upstream's dialect saw it: the answer side needs its
 * document ids and include_usage. */
static int translate_request(const cg_dialect_t *d, const cg_buf_t *body,
                             const cg_request_t *req, cg_dialect_req_t *dreq)
{
    cg_dialect_err_t e;
    cg_dialect_in_t in = {.req = req};
    if (cg_dialect_request(d, body->p ? body->p : "", body->len, &in, dreq, &e) == 0)
        return 0;
    fprintf(stderr, "citegate filter: --request: %s\n", e.message);
    return -1;
}

static int load_request(const char *path, cg_request_t *req, const cg_xform_cfg_t *xc,
                        const cg_dialect_t *d, cg_dialect_req_t *dreq)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "citegate filter: --request %s: %s\n", path, strerror(errno));
        return -1;
    }
    cg_buf_t body = {0};
    int rc = read_all(f, &body, path);
    fclose(f);
    cg_cite_opts_t o = {xc->max_doc_bytes, xc->scores};
    if (rc == 0 && cg_request_parse(req, body.p ? body.p : "", body.len, &o) != 0) {
        fprintf(stderr, "citegate filter: --request %s: not a JSON object\n", path);
        rc = -1;
    }
    if (rc == 0 && cg_dialect_translates(d))
        rc = translate_request(d, &body, req, dreq);
    cg_buf_free(&body);
    return rc;
}

static void usage(FILE *f)
{
    fputs("usage: citegate filter [--profile NAME] [--ref-style doc|numeric|citation|auto] "
          "[--dialect NAME] [--created SECONDS] "
          "[--request FILE] < upstream-body > client-body\n",
          f);
    fprintf(f, "profiles: %s\n", cg_profile_list());
    fprintf(f, "upstream dialects (CITEGATE_UPSTREAM_DIALECT): %s\n", cg_dialect_list());
}

/* Feeds SSE in read-sized pieces, exactly as the daemon would. */
static int run_stream(cg_xform_t *x, const cg_buf_t *in)
{
    cg_out_t out = {0};
    int rc = 0;
    for (size_t pos = 0; pos < in->len && rc == 0; pos += 65536) {
        size_t n = in->len - pos < 65536 ? in->len - pos : 65536;
        cg_xform_feed(x, in->p + pos, n, &out);
        rc = write_out(&out);
    }
    if (rc == 0) {
        cg_xform_finish(x, CG_END_EOF, &out);
        rc = write_out(&out);
    }
    cg_out_free(&out);
    return rc;
}

/* What the command line gives: flags for their variables into flags
 * (room for argc), --request and --created. 0, -1 (error, said), or 1 (help). */
typedef struct filter_args {
    cg_config_flag_t *flags;
    size_t nflags;
    const char *request_path;
    long long created;
} filter_args_t;

static int parse_filter_args(int argc, char **argv, filter_args_t *a)
{
    for (int i = 1; i < argc; i++) {
        /* A flag of the settings table names its variable; --request and
         * --created set none (""). */
        const char *var = cg_config_flag_var(argv[i], strlen(argv[i]), true);
        if (var == NULL && (strcmp(argv[i], "--request") == 0 || strcmp(argv[i], "--created") == 0))
            var = "";
        else if (var == NULL && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)) {
            usage(stdout);
            return 1;
        } else if (var == NULL) {
            fprintf(stderr, "citegate filter: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return -1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "citegate filter: %s needs a value\n", argv[i]);
            return -1;
        }
        i++;
        if (strcmp(argv[i - 1], "--created") == 0) {
            char *end;
            a->created = strtoll(argv[i], &end, 10);
            if (*end != '\0' || end == argv[i]) {
                fprintf(stderr, "citegate filter: --created needs a number of seconds\n");
                return -1;
            }
        } else if (var[0] == '\0') {
            a->request_path = argv[i];
        } else {
            a->flags[a->nflags++] = (cg_config_flag_t){var, argv[i]};
        }
    }
    return 0;
}

int cg_main_filter(int argc, char **argv)
{
    char err[512];
    cg_config_t cfg;
    filter_args_t a = {cg_xcalloc((size_t)argc, sizeof(cg_config_flag_t)), 0, NULL,
                       (long long)time(NULL)};
    int parsed = parse_filter_args(argc, argv, &a);
    int loaded = parsed == 0 ? cg_config_load(&cfg, a.flags, a.nflags, err, sizeof(err)) : -1;
    free(a.flags);
    if (parsed != 0)
        return parsed > 0 ? 0 : 1;
    if (loaded != 0) {
        fprintf(stderr, "citegate filter: %s\n", err);
        return 1;
    }
    const char *request_path = a.request_path;
    long long created = a.created;
    int rc = 1;
    cg_xform_cfg_t xc;
    cg_config_xform(&cfg, &xc);
    cg_request_t req = {0};
    cg_dialect_req_t dreq = {0};
    const cg_dialect_t *d = cfg.upstream_dialect;
    if (request_path && load_request(request_path, &req, &xc, d, &dreq) != 0) {
        cg_request_free(&req);
        cg_dialect_req_free(&dreq);
        goto done;
    }
    cg_buf_t in = {0};
    if (read_all(stdin, &in, "stdin") != 0) {
        cg_request_free(&req);
        cg_dialect_req_free(&dreq);
        goto done;
    }
    cg_xform_t *x = cg_xform_new(&xc, request_path ? &req : NULL);
    cg_xform_set_dialect(x, cg_dialect_view(d), request_path ? &dreq : NULL, created);
    if (looks_like_json(&in)) {
        cg_out_t out = {0};
        int body_rc = cg_xform_body(x, in.p, in.len, &out);
        rc = write_out(&out) == 0 && body_rc == 0 ? 0 : 1;
        if (body_rc != 0)
            fprintf(stderr, "citegate filter: stdin: not a valid JSON object\n");
        cg_out_free(&out);
    } else {
        rc = run_stream(x, &in) == 0 ? 0 : 1;
    }
    fflush(stdout);
    cg_xform_free(x);
    cg_request_free(&req);
    cg_dialect_req_free(&dreq);
    cg_buf_free(&in);
done:
    cg_config_free(&cfg);
    return rc;
}
