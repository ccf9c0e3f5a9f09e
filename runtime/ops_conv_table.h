/*
 * ops_conv_table.h: the planned convolutions, as both implementations of the
 * library ops (ops_cpu.c, ops_cuda.cu) keep them: an array of the backend's
 * own plans indexed by conv id, grown as ids are planned, each plan starting
 * with a DdpConvSlot; and the checks that planning, ddp_ops_finalize and
 * every per-step call make of it, written once. Only a bug in the generated
 * program fails them, so the messages are internal errors.
 */
#ifndef DDPRT_OPS_CONV_TABLE_H
#define DDPRT_OPS_CONV_TABLE_H

#include <stdlib.h>
#include <string.h>

#include "ops.h"          // DdpConvShape, ddp_conv_shape_init
#include "ops_failure.h"  // DdpOpsFailure: where a per-step call records its failure

/* What every backend's plan begins with. */
typedef struct {
    DdpConvShape shape;  /* checked, out_h and out_w filled */
    int planned;
} DdpConvSlot;

/* The slot of plan ID in PLANS, plans of SIZE bytes each. */
static inline DdpConvSlot *ddp_conv_slot(void *plans, size_t size, int id)
{
    return (DdpConvSlot *)((char *)plans + (size_t)id * size);
}

/* ddp_ops_plan_conv's checks: before ddp_ops_finalize, a valid id planned
 * once, a valid shape. Grows *PLANS (*N of them, SIZE bytes each, new ones
 * zeroed) to hold ID, records the shape, and gives the plan in *PLAN. */
static inline DdpStatus ddp_conv_table_add(void **plans, int *n, size_t size, int finalized, int id,
                                           const DdpConvShape *shape, void **plan)
{
    if (finalized)
        return DDP_ERR(DDP_FAIL, "internal error: conv %d planned after ddp_ops_finalize", id);
    if (id < 0)
        return DDP_ERR(DDP_FAIL, "internal error: conv id %d", id);
    DdpConvShape checked = *shape;
    DDP_CHECK(ddp_conv_shape_init(&checked));
    if (id >= *n) {
        char *grown = (char *)realloc(*plans, (size_t)(id + 1) * size);
        if (!grown)
            return DDP_ERR(DDP_FAIL, "out of memory planning conv %d", id);
        memset(grown + (size_t)*n * size, 0, (size_t)(id + 1 - *n) * size);
        *plans = grown;
        *n = id + 1;
    }
    DdpConvSlot *slot = ddp_conv_slot(*plans, size, id);
    if (slot->planned)
        return DDP_ERR(DDP_FAIL, "internal error: conv %d planned twice", id);
    slot->shape = checked;
    slot->planned = 1;
    *plan = slot;
    return DDP_OK;
}

/* ddp_ops_finalize's check: every id below N was planned. */
static inline DdpStatus ddp_conv_table_complete(void *plans, int n, size_t size)
{
    for (int id = 0; id < n; id++)
        if (!ddp_conv_slot(plans, size, id)->planned)
            return DDP_ERR(DDP_FAIL, "internal error: conv %d was never planned (ids run 0..%d)", id, n - 1);
    return DDP_OK;
}

/* The plan of conv ID, or NULL if there is none. */
static inline void *ddp_conv_table_find(void *plans, int n, size_t size, int id)
{
    return id >= 0 && id < n && ddp_conv_slot(plans, size, id)->planned ? ddp_conv_slot(plans, size, id) : NULL;
}

/* A per-step call's checks (WHAT names the call): after ddp_ops_finalize, a
 * planned id, a batch N within the planned one. The plan, or NULL with the
 * failure recorded in F as raised at FILE:LINE, the backend's call
 * (ddp_conv_table_call says where). */
static inline void *ddp_conv_table_call_at(const char *file, int line, void *plans, int nplans, size_t size,
                                           int finalized, DdpOpsFailure *f, int id, int n, const char *what)
{
    if (!finalized) {
        ddp_ops_failure_record(f, file, line, "internal error: %s before ddp_ops_finalize", what);
        return NULL;
    }
    if (id < 0 || id >= nplans) {
        ddp_ops_failure_record(f, file, line, "internal error: %s of conv %d, but only %d planned", what, id,
                               nplans);
        return NULL;
    }
    DdpConvSlot *slot = ddp_conv_slot(plans, size, id);
    if (n < 1 || n > slot->shape.n) {
        ddp_ops_failure_record(f, file, line, "internal error: %s of conv %d with batch %d, planned for 1..%d",
                               what, id, n, slot->shape.n);
        return NULL;
    }
    return slot;
}
#define ddp_conv_table_call(...) ddp_conv_table_call_at(__FILE__, __LINE__, __VA_ARGS__)

#endif
