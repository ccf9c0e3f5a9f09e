/*
 * model.c: what generated code calls in the runtime beyond the ops (model.h).
 * The process group stays opaque to generated programs: they reach it only
 * through these calls, so that pg.h, the store and the topology are no part
 * of what a hand-edited .cu compiles against.
 */
#include "model.h"

#include "pg.h"  // ddp_pg_purpose, ddp_pg_allreduce

void ddp_batchnorm_allreduce(DdpCtx *ctx, double *sums, size_t count)
{
    if (!ctx->pg || ctx->status != DDP_OK)
        return;
    ddp_pg_purpose(ctx->pg, DDP_PG_FOR_BATCHNORM);
    ctx->status = ddp_pg_allreduce(ctx->pg, sums, count, DDP_F64, DDP_SUM);
}
