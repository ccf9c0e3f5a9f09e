/*
 * model.c: what generated code calls in the runtime beyond the ops (model.h).
 * The process group stays opaque to generated programs: they reach it only
 * through these calls, so that pg.h, the store and the topology are no part
 * of what a hand-edited .cu compiles against.
 */
#include "model.h"

#include <stdio.h>

#include "device.h"  // ddp_device_sync
#include "pg.h"      // ddp_pg_purpose, ddp_pg_allreduce

void ddp_batchnorm_allreduce(DdpCtx *ctx, double *sums, size_t count)
{
    if (!ctx->pg || ctx->status != DDP_OK)
        return;
    ddp_pg_purpose(ctx->pg, DDP_PG_FOR_BATCHNORM);
    ctx->status = ddp_pg_allreduce(ctx->pg, sums, count, DDP_F64, DDP_SUM);
}

void ddp_layer_check(DdpCtx *ctx, const char *where)
{
    DdpStatus s = ctx->status; /* a launch that failed (DDP_LAUNCH) or a collective */
    if (s == DDP_OK)
        s = ddp_ops_status(ctx->ops); /* recorded at the call: before what the wait finds */
    if (s == DDP_OK)
        s = ddp_device_sync(ctx->stream);
    if (s == DDP_OK)
        return;
    snprintf(ctx->layer_failure, sizeof ctx->layer_failure, "%s: %s", where, ddp_error_message());
    ctx->status = DDP_ERR(s, "%s", ctx->layer_failure);
    ctx->debug = 0;
}

DdpStatus ddp_step_status(const DdpCtx *ctx)
{
    if (ctx->status != DDP_OK && ctx->layer_failure[0])
        return DDP_ERR(ctx->status, "%s", ctx->layer_failure);
    return ctx->status;
}
