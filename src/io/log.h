/* One line per event on stderr, as JSON or text (CITEGATE_LOG_FORMAT). */
#ifndef CITEGATE_LOG_H
#define CITEGATE_LOG_H

#include "citegate/config.h"

void cg_log_init(bool json, cg_log_level_t level, int worker);
bool cg_log_enabled(cg_log_level_t level);
/* `rid` is the request id or NULL; fmt builds the message. */
void cg_log(cg_log_level_t level, const char *rid, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* With on, debug and info lines are held until cg_log_flush() (or until
 * PIPE_BUF bytes are held); a warning or an error flushes them and goes at
 * once.
 * Off flushes. A worker holds them and flushes before its loop waits. */
void cg_log_hold(bool on);
void cg_log_flush(void);

#define cg_log_info(rid, ...)  cg_log(CG_LOG_INFO, rid, __VA_ARGS__)
#define cg_log_warn(rid, ...)  cg_log(CG_LOG_WARN, rid, __VA_ARGS__)
#define cg_log_error(rid, ...) cg_log(CG_LOG_ERROR, rid, __VA_ARGS__)
#define cg_log_debug(rid, ...) cg_log(CG_LOG_DEBUG, rid, __VA_ARGS__)

#endif
