/*
 * pg.c: the process group's front: checks every call once, then hands it to
 * a backend (pg_mpi.c, pg_nccl.cu) through a small table of functions.
 *
 * A world of one rank is handled here and never reaches a backend: a
 * broadcast or an all-reduce over one rank leaves the buffer as it is (the
 * average of one value is that value), an all-gather is a copy, a barrier
 * returns at once. So a single-process program starts no MPI, no NCCL and no
 * thread, and pays nothing per step.
 *
 * The checks are those a mismatch between ranks would otherwise turn into a
 * hang or garbage: an element type or operation the backends do not know, a
 * root outside the world, an average of integers. They are internal errors
 * (the runtime calls these functions, not the user), said as such.
 */
#include "pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"  // ddp_device_is_gpu: MPI takes host buffers only; ddp_copy_on_device

struct DdpProcessGroup {
    DdpPgBackend backend;          /* DDP_PG_NONE for a world of one */
    int rank, size;
    void *stream;
    const DdpPgBackendOps *ops;    /* NULL for a world of one */
    void *impl;
    DdpPgPurpose purpose;          /* of the next collective (ddp_pg_purpose) */
};

/* The purpose named for this collective, handed to the backend just before
 * it runs; taken (reset) whether or not the collective reaches the backend,
 * so that a skipped one (count 0) cannot pass its name to the next. */
static void take_purpose(DdpProcessGroup *pg)
{
    DdpPgPurpose p = pg->purpose;
    pg->purpose = DDP_PG_FOR_OTHER;
    if (pg->ops && pg->ops->purpose)
        pg->ops->purpose(pg->impl, p);
}

size_t ddp_pg_type_size(DdpPgType type)
{
    switch (type) {
    case DDP_F32: return 4;
    case DDP_F64: return 8;
    case DDP_I64: return 8;
    case DDP_U8: return 1;
    }
    return 0;
}

const char *ddp_pg_type_name(DdpPgType type)
{
    switch (type) {
    case DDP_F32: return "floats";
    case DDP_F64: return "doubles";
    case DDP_I64: return "int64s";
    case DDP_U8: return "bytes";
    }
    return "values";
}

static DdpStatus check_group(const DdpProcessGroup *pg, const char *what)
{
    if (!pg)
        return DDP_ERR(DDP_FAIL, "internal error: %s on no process group", what);
    return DDP_OK;
}

static DdpStatus check_type(DdpPgType type, const char *what)
{
    if (ddp_pg_type_size(type) == 0)
        return DDP_ERR(DDP_FAIL, "internal error: %s of unknown element type %d", what, (int)type);
    return DDP_OK;
}

static DdpStatus check_op(DdpPgType type, DdpPgOp op, const char *what)
{
    if (op != DDP_SUM && op != DDP_AVG && op != DDP_MAX)
        return DDP_ERR(DDP_FAIL, "internal error: %s with unknown operation %d", what, (int)op);
    if (op == DDP_AVG && type != DDP_F32 && type != DDP_F64)
        return DDP_ERR(DDP_FAIL, "internal error: %s averaging %s (only floats and doubles average)", what,
                       ddp_pg_type_name(type));
    return DDP_OK;
}

DdpStatus ddp_pg_create(DdpProcessGroup **pg, DdpPgBackend backend, const DdpTopology *t, DdpStore *store,
                        void *stream, double timeout_s)
{
    *pg = NULL;
    if (!t || t->world_size < 1 || t->rank < 0 || t->rank >= t->world_size)
        return DDP_ERR(DDP_FAIL, "internal error: process group for rank %d of %d", t ? t->rank : -1,
                       t ? t->world_size : -1);
    if (!(timeout_s > 0))
        return DDP_ERR(DDP_FAIL, "internal error: a process group timeout of %g s (--timeout admits only positive)",
                       timeout_s);
    DdpProcessGroup *g = calloc(1, sizeof *g);
    if (!g)
        return DDP_ERR(DDP_FAIL, "out of memory");
    g->rank = t->rank;
    g->size = t->world_size;
    g->stream = stream;
    g->backend = DDP_PG_NONE;
    /* A GPU build asked for NCCL by name opens a real communicator even for
     * one rank, so that one GPU runs the program's own NCCL path (ddp_dist_join
     * asks only when --backend nccl was given). */
    if (t->world_size > 1 || (backend == DDP_PG_NCCL && ddp_device_is_gpu())) {
        DdpStatus st;
        switch (backend) {
        case DDP_PG_MPI:
            st = ddp_device_is_gpu()
                     ? DDP_ERR(DDP_BAD_INPUT, "--backend mpi works on CPU buffers, and this program was built for "
                               "GPUs: use --backend nccl (or build with --target cpu)")
                     : ddp_pg_mpi_open(t, timeout_s, &g->ops, &g->impl);
            break;
        case DDP_PG_NCCL: st = ddp_pg_nccl_open(t, store, stream, timeout_s, &g->ops, &g->impl); break;
        default:
            st = DDP_ERR(DDP_BAD_INPUT, "a run of %d ranks needs a communication backend: --backend nccl or mpi",
                         t->world_size);
            break;
        }
        if (st != DDP_OK) {
            free(g);
            return st;
        }
        g->backend = backend;
    }
    *pg = g;
    return DDP_OK;
}

void ddp_pg_destroy(DdpProcessGroup *pg)
{
    if (!pg)
        return;
    if (pg->ops)
        (void)pg->ops->destroy(pg->impl, 0);
    free(pg);
}

int ddp_pg_abort(DdpProcessGroup *pg)
{
    if (!pg)
        return 0;
    int running = pg->ops ? pg->ops->destroy(pg->impl, 1) : 0;
    free(pg);
    return running;
}

void ddp_pg_purpose(DdpProcessGroup *pg, DdpPgPurpose purpose)
{
    if (pg)
        pg->purpose = purpose;
}

const char *ddp_pg_purpose_name(DdpPgPurpose purpose)
{
    switch (purpose) {
    case DDP_PG_FOR_OTHER: return NULL;
    case DDP_PG_FOR_GRADIENTS: return "the gradient all-reduce";
    case DDP_PG_FOR_TRAIN_STATS: return "the training-statistics all-reduce";
    case DDP_PG_FOR_EVAL_STATS: return "the evaluation all-reduce";
    case DDP_PG_FOR_BATCHNORM: return "the batchnorm-statistics all-reduce";
    case DDP_PG_FOR_WEIGHTS: return "the broadcast of the weights";
    case DDP_PG_FOR_BUFFERS: return "the broadcast of the running statistics";
    case DDP_PG_FOR_SETTINGS: return "the all-gather of the settings";
    case DDP_PG_FOR_HOST_VALUES: return "the broadcast of rank 0's start-up values";
    case DDP_PG_FOR_CHECKSUM: return "the all-gather of the weights' checksums";
    case DDP_PG_FOR_SAVE_CHECK: return "the all-reduce that checks a checkpoint may be saved";
    case DDP_PG_FOR_TIMES: return "the all-gather of the ranks' step times";
    case DDP_PG_FOR_STORE: return "the all-gather that agrees on the whereabouts' store";
    case DDP_PG_PURPOSE_COUNT: break;
    }
    return "a collective of unknown purpose";
}

int ddp_pg_rank(const DdpProcessGroup *pg) { return pg ? pg->rank : 0; }
int ddp_pg_size(const DdpProcessGroup *pg) { return pg ? pg->size : 1; }
DdpPgBackend ddp_pg_backend(const DdpProcessGroup *pg) { return pg ? pg->backend : DDP_PG_NONE; }

DdpStatus ddp_pg_broadcast(DdpProcessGroup *pg, void *buf, size_t count, DdpPgType type, int root)
{
    DDP_CHECK(check_group(pg, "broadcast"));
    DDP_CHECK(check_type(type, "broadcast"));
    if (root < 0 || root >= pg->size)
        return DDP_ERR(DDP_FAIL, "internal error: broadcast from rank %d in a world of %d", root, pg->size);
    take_purpose(pg);
    if (count == 0 || !pg->ops)
        return DDP_OK;
    return pg->ops->broadcast(pg->impl, buf, count, type, root);
}

DdpStatus ddp_pg_allreduce(DdpProcessGroup *pg, void *buf, size_t count, DdpPgType type, DdpPgOp op)
{
    DDP_CHECK(check_group(pg, "all-reduce"));
    DDP_CHECK(check_type(type, "all-reduce"));
    DDP_CHECK(check_op(type, op, "all-reduce"));
    take_purpose(pg);
    if (count == 0 || !pg->ops)
        return DDP_OK;
    return pg->ops->allreduce(pg->impl, buf, count, type, op);
}

DdpStatus ddp_pg_allgather(DdpProcessGroup *pg, const void *send, void *recv, size_t count, DdpPgType type)
{
    DDP_CHECK(check_group(pg, "all-gather"));
    DDP_CHECK(check_type(type, "all-gather"));
    take_purpose(pg);
    if (count == 0)
        return DDP_OK;
    if (!pg->ops)
        return send == recv ? DDP_OK : ddp_copy_on_device(recv, send, count * ddp_pg_type_size(type), pg->stream);
    return pg->ops->allgather(pg->impl, send, recv, count, type);
}

DdpStatus ddp_pg_barrier(DdpProcessGroup *pg)
{
    DDP_CHECK(check_group(pg, "barrier"));
    take_purpose(pg);
    return pg->ops ? pg->ops->barrier(pg->impl) : DDP_OK;
}

DdpStatus ddp_pg_allreduce_start(DdpProcessGroup *pg, void *buf, size_t count, DdpPgType type, DdpPgOp op,
                                 const char *what, DdpWork **work)
{
    *work = NULL;
    DDP_CHECK(check_group(pg, "all-reduce"));
    if (type != DDP_F32 && type != DDP_F64)
        return DDP_ERR(DDP_FAIL, "internal error: a bucket all-reduce of %s (floats or doubles only)",
                       ddp_pg_type_name(type));
    DDP_CHECK(check_op(type, op, "all-reduce"));
    pg->purpose = DDP_PG_FOR_OTHER; /* always the gradients' (the backend names them) */
    if (count == 0 || !pg->ops)
        return DDP_OK;
    return pg->ops->allreduce_start(pg->impl, buf, count, type, op, what, work);
}

DdpStatus ddp_pg_wait(DdpProcessGroup *pg, DdpWork *work)
{
    DDP_CHECK(check_group(pg, "wait"));
    if (!work || !pg->ops)
        return DDP_OK;
    return pg->ops->wait(pg->impl, work);
}

DdpStatus ddp_pg_status(DdpProcessGroup *pg)
{
    if (!pg || !pg->ops)
        return DDP_OK;
    return pg->ops->status(pg->impl);
}

DdpStatus ddp_pg_watch(DdpProcessGroup *pg, void *stream, const char *what)
{
    if (!pg || !pg->ops || !pg->ops->watch)
        return DDP_OK;
    return pg->ops->watch(pg->impl, stream, what);
}

DdpStatus ddp_pg_stop_vote(DdpProcessGroup *pg, int local, int *agreed)
{
    *agreed = local;
    if (!pg || !pg->ops)
        return DDP_OK;
    return pg->ops->stop_vote(pg->impl, local, agreed);
}

DdpStatus ddp_pg_stop_vote_alone(DdpProcessGroup *pg, int local, int *agreed)
{
    DDP_CHECK(ddp_pg_stop_vote(pg, local, agreed));
    return ddp_pg_backend(pg) == DDP_PG_MPI ? ddp_pg_barrier(pg) : DDP_OK;
}

/* One run per process, so one set of whereabouts: set once at start-up, read
 * by whichever thread finds a timeout. */
static DdpWhereabouts *_Atomic whereabouts;

void ddp_pg_set_whereabouts(DdpWhereabouts *w)
{
    whereabouts = w;
}

void ddp_pg_why_stuck(char *buf, size_t len)
{
    DdpWhereabouts *w = whereabouts;
    if (w)
        ddp_whereabouts_others(w, buf, len);
    else
        snprintf(buf, len, "a rank may have stopped or be stuck: see the other ranks' messages");
}
