/* A worker's loop context: see ctx.h. */
#include "ctx.h"

#include <string.h>

void cg_ctx_init(cg_ctx_t *ctx, uv_loop_t *loop, const cg_config_t *cfg, int index)
{
    memset(ctx, 0, sizeof(*ctx));
    ctx->loop = loop;
    ctx->cfg = cfg;
    ctx->index = index;
    cg_safepoint_init(&ctx->safe, loop);
}

static void quiet_if_idle(cg_ctx_t *ctx)
{
    if (ctx->draining && ctx->active == 0 && ctx->on_quiet)
        cg_defer(&ctx->safe, &ctx->quiet, ctx->on_quiet);
}

void cg_ctx_begin(cg_ctx_t *ctx)
{
    if (ctx->active++ == 0 && ctx->on_busy)
        ctx->on_busy(ctx, true);
}

void cg_ctx_end(cg_ctx_t *ctx)
{
    if (--ctx->active == 0 && ctx->on_busy)
        ctx->on_busy(ctx, false);
    quiet_if_idle(ctx);
}

void cg_ctx_drain(cg_ctx_t *ctx)
{
    ctx->draining = true;
    quiet_if_idle(ctx);
}

void cg_ctx_free(cg_ctx_t *ctx)
{
    cg_out_free(&ctx->out);
}
