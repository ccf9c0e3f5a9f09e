/*
 * reducer.h: DDP's gradient reducer: bucketed all-reduce of the gradients,
 * overlapping the backward pass.
 *
 * The generated backward pass calls ctx->grad_ready(ctx, P) as soon as
 * parameter P's gradient is final. The reducer counts, per bucket, the
 * gradients still to come; when a bucket's last one arrives it starts the
 * bucket's all-reduce (a sum over ranks: each rank's gradient is already of
 * the loss averaged over the global batch, see model.h) and backward goes on computing
 * while the bucket travels. Buckets are launched strictly in bucket order on
 * every rank, as DDP does: a bucket completed early waits for the ones before
 * it, so that all ranks issue the same collectives in the same order. The
 * optimizer waits only for ddp_reducer_finish.
 *
 * Per step (step_graphs.c's ddp_step_work, which a CUDA graph captures once
 * per batch shape: on GPUs this host code then runs at capture only):
 *
 *     if (no_sync step) ddp_reducer_skip(r);   // before backward: launch nothing
 *     net->train_step(ctx, n);                // calls ddp_reducer_grad_ready
 *     DDP_CHECK(ddp_reducer_finish(r));        // all buckets reduced (synced steps)
 *     if (synced step) net->optimizer_step(ctx);
 *
 * with ctx->grad_ready = ddp_reducer_grad_ready and ctx->reducer = r.
 */
#ifndef DDPRT_REDUCER_H
#define DDPRT_REDUCER_H

#include "buckets.h"  // DdpBucket
#include "model.h"    // DdpNet, DdpCtx
#include "pg.h"       // DdpProcessGroup
#include "status.h"   // DdpStatus
#include "whereabouts.h" // DdpWhereabouts: the places it notes

#ifdef __cplusplus
extern "C" {
#endif

typedef struct DdpReducer DdpReducer;

/* Plans the buckets of NET's trainable parameters (reverse parameter order,
 * whose gradients lie one after the other, each on 16 bytes (buckets.h's
 * ddp_param_start), in GRADS, the flat gradient buffer of
 * NET->grad_bytes per element: two doubles on CPUs, floats on GPUs) and
 * prepares to sum them over PG. BUCKET_CAP_MB < 0: the net's caps (its
 * `bucket` line); else --bucket-cap-mb's. Either way the first bucket's
 * cap is buckets.h's ddp_first_bucket_bytes of it (1 MB, or the cap where
 * smaller; that function says where PyTorch's rules differ). Fails
 * (internal error) if the net's layout is not the one buckets need. */
DdpStatus ddp_reducer_create(DdpReducer **r, DdpProcessGroup *pg, const DdpNet *net, void *grads,
                             double bucket_cap_mb);
/* *TYPE: what NET's gradients are made of (DDP_F32: a float each, or
 * DDP_F64: two doubles each, from net->grad_bytes); an internal error for
 * any other size. */
DdpStatus ddp_reducer_grad_type(const DdpNet *net, DdpPgType *type);
void ddp_reducer_destroy(DdpReducer *r);

/* ctx->grad_ready: parameter PARAM's gradient is final (ctx->reducer is the
 * DdpReducer). Never fails here: a failure is kept and ddp_reducer_finish
 * returns it. */
void ddp_reducer_grad_ready(DdpCtx *ctx, int param);

/* The step's gradients are to be accumulated, not reduced (DDP's no_sync):
 * call before the step's backward. Its grad_ready calls launch nothing, and
 * the next synced step's all-reduce carries the accumulated gradients. */
void ddp_reducer_skip(DdpReducer *r);

/* Ends the step: launches what overlap did not (all buckets when overlap is
 * off), waits for every bucket (on GPUs: makes the compute stream wait), and
 * checks that every trainable parameter was announced exactly once ("internal
 * error: parameter conv1.weight got no gradient this step"). Ready for the
 * next step afterwards, also after a failure of the checks. */
DdpStatus ddp_reducer_finish(DdpReducer *r);

/* From now on, details this rank's place in W (whereabouts.h) as it goes:
 * "past conv2" (in backward) as each layer's gradients are announced,
 * "bucket 3" (in the gradient all-reduce) while it waits for a bucket, so
 * that a hang names the layer or the bucket, not just the phase. On GPUs
 * these are the host's places: it queues backward's kernels ahead of the
 * GPU. NULL W notes nothing. Fails only for want of memory. */
DdpStatus ddp_reducer_note_places(DdpReducer *r, DdpWhereabouts *w);

/* OVERLAP 0: launch every bucket only in ddp_reducer_finish, after the whole
 * backward pass (the benchmark's "without overlap"); 1 (the default): as
 * soon as each bucket is ready. */
void ddp_reducer_set_overlap(DdpReducer *r, int overlap);

/* Seconds the host has spent in ddp_reducer_finish on synced steps, summed
 * since creation: the communication not hidden behind backward (on CPUs; on
 * GPUs finish only queues waits, so this stays near 0). */
double ddp_reducer_exposed_seconds(const DdpReducer *r);

/* The bucket plan in launch order, for start-up messages and tests. */
const DdpBucket *ddp_reducer_buckets(const DdpReducer *r, int *n);

#ifdef __cplusplus
}
#endif

#endif
