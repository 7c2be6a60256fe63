/* Logging: see log.h. Lines are written whole, with one write(2) for one
 * or more of them, so that workers sharing stderr never interleave within
 * a line. */
#include "log.h"

#include "citegate/json.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static bool log_json = true;
static cg_log_level_t log_level = CG_LOG_INFO;
static int log_worker = 0;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

/* Debug and info lines held for cg_log_flush(): a worker writes a loop
 * turn's access lines in one call, not one call per request. At most
 * PIPE_BUF bytes go in one call, which a pipe keeps whole (POSIX), so
 * workers that share a pipe for stderr still never interleave. */
#define HELD_MAX PIPE_BUF
static bool holding;
static cg_buf_t held;

void cg_log_init(bool json, cg_log_level_t level, int worker)
{
    log_json = json;
    log_level = level;
    log_worker = worker;
}

bool cg_log_enabled(cg_log_level_t level)
{
    return level >= log_level;
}

static void write_all(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* stderr is gone or full: a log line is not worth a stall */
        p += w;
        n -= (size_t)w;
    }
}

void cg_log(cg_log_level_t level, const char *rid, const char *fmt, ...)
{
    if (level < log_level)
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char ts[96];
    snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000));

    cg_buf_t b = {0};
    if (log_json) {
        cg_buf_printf(&b, "{\"ts\":\"%s\",\"level\":\"%s\",\"worker\":%d,", ts, level_names[level],
                      log_worker);
        if (rid) {
            cg_buf_puts(&b, "\"request_id\":");
            cg_json_put_cstr(&b, rid);
            cg_buf_putc(&b, ',');
        }
        cg_buf_puts(&b, "\"msg\":");
        cg_json_put_cstr(&b, msg);
        cg_buf_puts(&b, "}\n");
    } else {
        cg_buf_printf(&b, "%s %-5s w%d %s%s%s\n", ts, level_names[level], log_worker,
                      rid ? "[" : "", rid ? rid : "", rid ? "] " : "");
        /* keep the message after the prefix */
        b.len--;
        cg_buf_puts(&b, msg);
        cg_buf_putc(&b, '\n');
    }
    if (holding && level < CG_LOG_WARN && b.len <= HELD_MAX) {
        if (held.len + b.len > HELD_MAX)
            cg_log_flush();
        cg_buf_put(&held, b.p, b.len);
    } else {
        cg_log_flush(); /* the lines before this one go first */
        write_all(b.p, b.len);
    }
    cg_buf_free(&b);
}

void cg_log_flush(void)
{
    if (held.len == 0)
        return;
    write_all(held.p, held.len);
    held.len = 0;
}

void cg_log_hold(bool on)
{
    static bool at_exit;
    if (on && !at_exit)
        at_exit = atexit(cg_log_flush) == 0; /* an exit() inside the loop loses nothing */
    holding = on;
    if (!on) {
        cg_log_flush();
        cg_buf_free(&held);
    }
}
