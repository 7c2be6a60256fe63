/*
 * What the dialect view targets (fuzz_anthropic, fuzz_bedrock) read of the
 * client's stream: its data events, with a line splitter written apart from
 * src/core/sse.c. Like a client it drops an unterminated last event.
 */
#ifndef CG_FUZZ_EVENTS_H
#define CG_FUZZ_EVENTS_H

#include "citegate/json.h"
#include "fuzz_common.h"
#include "fuzz_jsonv.h"

typedef struct events {
    size_t objects, valid, others; /* data events: JSON objects, valid ones, neither nor [DONE] */
    size_t done;                   /* [DONE] events */
    size_t errors;                 /* objects with a top-level "error" */
    bool last_done, last_error;    /* what the last data event was */
    size_t max_line;
} events_t;

static inline void take_event(events_t *e, const char *data, size_t n)
{
    bool done = n == 6 && memcmp(data, "[DONE]", 6) == 0;
    cg_json_t j;
    cg_json_init(&j, 1u << 16);
    bool object = !done && cg_json_parse(&j, data, n) == CG_JSON_OK && j.tok[0].type == JSMN_OBJECT;
    e->done += done;
    e->objects += object;
    e->others += !done && !object;
    e->valid += object && fz_json_invalid(&j) == NULL;
    bool error = object && cg_json_get(&j, 0, "error") >= 0;
    e->errors += error;
    e->last_done = done;
    e->last_error = error;
    cg_json_free(&j);
}

static inline void read_events(events_t *e, const char *s, size_t n)
{
    memset(e, 0, sizeof(*e));
    cg_buf_t data = {0};
    size_t ndata = 0;
    for (size_t i = 0; i < n;) {
        size_t end = i;
        while (end < n && !fz_is_eol(s[end]))
            end++;
        if (end == n)
            break;
        if (end - i > e->max_line)
            e->max_line = end - i;
        if (end == i && ndata) {
            take_event(e, data.p, data.len);
            data.len = ndata = 0;
        } else if (end - i >= 5 && memcmp(s + i, "data:", 5) == 0) {
            size_t v = i + 5 + (end > i + 5 && s[i + 5] == ' ');
            if (ndata++)
                cg_buf_putc(&data, '\n');
            cg_buf_put(&data, s + v, end - v);
        }
        i = end + fz_eol_len(s, n, end);
    }
    cg_buf_free(&data);
}

#endif
