/*
 * pg.h: the process group: collectives over the ranks of a run.
 *
 * Two backends behind one interface: NCCL for GPU buffers (one GPU per rank,
 * the collective enqueued on a stream, the host never waits) and MPI for CPU
 * buffers (a communication thread runs the collectives in the order they were
 * started, so compute and communication overlap without the main thread
 * polling MPI). A world of one rank needs neither: every collective is a
 * no-op, so single-process programs pay nothing.
 *
 * Every rank must call the collectives in the same order with the same
 * sizes, as with NCCL and MPI themselves. A collective that does not finish
 * within the group's timeout fails the run with a message naming the
 * collective (or, for those a CUDA graph replays, the graph: ddp_pg_watch),
 * rather than hanging.
 *
 * One thread (the trainer's) calls into a group; the backends' own threads
 * (MPI's communication thread, NCCL's watchdog) are theirs to manage.
 */
#ifndef DDPRT_PG_H
#define DDPRT_PG_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"  // DdpStore, and through it topology.h's DdpTopology
#include "status.h"      // DdpStatus
#include "whereabouts.h" // DdpWhereabouts

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DDP_PG_NONE, DDP_PG_MPI, DDP_PG_NCCL } DdpPgBackend;
typedef enum { DDP_F32, DDP_F64, DDP_I64, DDP_U8 } DdpPgType;
typedef enum { DDP_SUM, DDP_AVG, DDP_MAX } DdpPgOp;

/* What a collective is for. The MPI backend sends it with every collective,
 * with a sequence number and the size, and the ranks compare them before any
 * data moves: ranks that took different paths (a flag that differs, a bug)
 * stop at once, each saying "rank 1 started the gradient all-reduce (...)
 * where rank 0 started the evaluation all-reduce (...)", instead of MPI
 * writing one collective's data into another's buffer. */
typedef enum {
    DDP_PG_FOR_OTHER,       /* named by its operation alone: "the all-reduce" */
    DDP_PG_FOR_GRADIENTS,   /* a gradient bucket (every ddp_pg_allreduce_start) */
    DDP_PG_FOR_TRAIN_STATS, /* the training loss and counts, at a report */
    DDP_PG_FOR_EVAL_STATS,  /* an evaluation's loss and counts */
    DDP_PG_FOR_BATCHNORM,   /* a synchronised batchnorm's statistics */
    DDP_PG_FOR_WEIGHTS,     /* rank 0's weights and optimizer state, at start-up */
    DDP_PG_FOR_BUFFERS,     /* rank 0's running statistics, each step */
    DDP_PG_FOR_SETTINGS,    /* the start-up check of settings */
    DDP_PG_FOR_HOST_VALUES, /* rank 0's step counts or resume status */
    DDP_PG_FOR_CHECKSUM,    /* the closing check of the weights */
    DDP_PG_FOR_SAVE_CHECK,  /* whether every rank may save a checkpoint (all finite) */
    DDP_PG_FOR_TIMES,       /* every rank's time per phase, at log time (step_times.h) */
    DDP_PG_FOR_STORE,       /* under mpirun, the start-up agreement on the whereabouts' store */
    DDP_PG_PURPOSE_COUNT
} DdpPgPurpose;

typedef struct DdpProcessGroup DdpProcessGroup;
typedef struct DdpWork DdpWork;

/* Joins the ranks of T. A world of one rank gets the no-op group whatever
 * BACKEND says (no MPI or NCCL start-up). MPI is for CPU builds, NCCL for GPU
 * builds; the other is refused with a message. STORE is used by NCCL to share
 * its unique id (key "nccl_id"); it may be NULL under mpirun, where MPI_Bcast
 * carries it. STREAM is the compute stream on GPUs (NULL on CPU). TIMEOUT_S
 * bounds every collective, and the start-up. The MPI backend may be created
 * once per process: MPI cannot start again after it has finished. */
DdpStatus ddp_pg_create(DdpProcessGroup **pg, DdpPgBackend backend, const DdpTopology *t, DdpStore *store,
                        void *stream, double timeout_s);
/* Waits for the collectives started, then finishes the backend (MPI_Finalize,
 * ncclCommDestroy). A group that has failed (a timeout, an NCCL error) is
 * torn down as by ddp_pg_abort instead. NULL is fine. */
void ddp_pg_destroy(DdpProcessGroup *pg);
/* Ends the group after a failure on this rank, without waiting for the other
 * ranks: NCCL's communicator is aborted; MPI is left unfinished, so that when
 * this process exits (status 1) mpirun ends the other ranks, which would
 * otherwise wait for it until their timeout. Call it instead of destroy on the
 * way out of a failed run, after printing the error. NULL is fine. Returns 1
 * when a collective is still running (MPI stuck waiting for a lost rank):
 * its buffers may still be written, so the caller must not free them (the
 * process is about to exit); 0 otherwise. */
int ddp_pg_abort(DdpProcessGroup *pg);
/* Names the purpose of the next collective this thread starts on PG (only
 * that one; the next after it is DDP_PG_FOR_OTHER again unless named). */
void ddp_pg_purpose(DdpProcessGroup *pg, DdpPgPurpose purpose);
/* "the evaluation all-reduce", "the broadcast of the weights": for messages;
 * NULL for DDP_PG_FOR_OTHER, which the operation names. */
const char *ddp_pg_purpose_name(DdpPgPurpose purpose);
int ddp_pg_rank(const DdpProcessGroup *pg);
int ddp_pg_size(const DdpProcessGroup *pg);
DdpPgBackend ddp_pg_backend(const DdpProcessGroup *pg);

/* Collectives complete in stream order: on MPI when the call returns; on
 * NCCL when the compute stream reaches them. In place where one buffer.
 * Buffers are device memory on GPU builds, host memory on CPU builds.
 * AVG (SUM, then divided by the world size) is for F32 and F64 only; I64 and
 * U8 take SUM and MAX. Allgather's RECV holds COUNT elements per rank, in
 * rank order; SEND may be this rank's place in RECV (in place), else the two
 * must not overlap. */
DdpStatus ddp_pg_broadcast(DdpProcessGroup *pg, void *buf, size_t count, DdpPgType type, int root);
DdpStatus ddp_pg_allreduce(DdpProcessGroup *pg, void *buf, size_t count, DdpPgType type, DdpPgOp op);
DdpStatus ddp_pg_allgather(DdpProcessGroup *pg, const void *send, void *recv, size_t count, DdpPgType type);
DdpStatus ddp_pg_barrier(DdpProcessGroup *pg);

/* A gradient bucket's all-reduce (F32 or F64, in place), started as soon as its last
 * gradient is written and overlapping what the compute stream does next;
 * ddp_pg_wait makes the compute stream (GPU) or the host (CPU) wait for it
 * and releases *WORK. WHAT names it in messages ("bucket 3": "all-reduce of
 * bucket 3 did not finish within 600 s (1290 floats); ..."); NULL is fine.
 * *WORK may be set to NULL (a world of one): ddp_pg_wait(pg, NULL) does nothing.
 * Every started work must be waited for before BUF is read or written. */
DdpStatus ddp_pg_allreduce_start(DdpProcessGroup *pg, void *buf, size_t count, DdpPgType type, DdpPgOp op,
                                 const char *what, DdpWork **work);
DdpStatus ddp_pg_wait(DdpProcessGroup *pg, DdpWork *work);

/* DDP_OK, or a failure found in the background since (NCCL's watchdog: a
 * collective past the timeout, an asynchronous NCCL error), recorded as the
 * message. Costs no synchronisation: call it after each step, and after the
 * device synchronisations of reports. */
DdpStatus ddp_pg_status(DdpProcessGroup *pg);

/* Collectives queued on STREAM without this group's calls, those of a CUDA
 * graph launched (graph.h: captured once, their calls made then), are
 * watched as the group's own are: STREAM's work queued so far must end
 * within the timeout, or the group fails with WHAT named ("the step's
 * CUDA graph ... did not finish within 600 s"). Nothing on MPI (CPU
 * builds capture nothing: graph.h's twin makes every call again) or with
 * one rank. */
DdpStatus ddp_pg_watch(DdpProcessGroup *pg, void *stream, const char *what);

/* A stop asked for on some rank (rank_signals.h), agreed by all, so that
 * every rank stops after the same step. Every rank calls it after each
 * optimizer step with LOCAL, the signal of the stop asked of it (0 none);
 * *AGREED is then the largest request the ranks have learned of together,
 * the same on every rank at the same call (0: go on). The MPI backend
 * carries each rank's request in the header of every collective, at no cost
 * of its own; NCCL all-reduces one value per call and reads it at the next
 * call, which waits at most for the step before's all-reduces (the host
 * runs a step ahead of the GPU, no more). Either way a request reaches
 * *AGREED one or two steps after it is made. A world of one: LOCAL. */
DdpStatus ddp_pg_stop_vote(DdpProcessGroup *pg, int local, int *agreed);

/* The same for a loop that makes no other collective (--eval-only's): on
 * MPI a barrier follows, to carry the request, which then reaches *AGREED
 * at the next call; NCCL's vote is a collective of its own. */
DdpStatus ddp_pg_stop_vote_alone(DdpProcessGroup *pg, int local, int *agreed);

/* What a collective's timeout says of the other ranks. With W (the run's,
 * process-wide; NULL: none), where each was last seen (whereabouts.h);
 * without, that one may have stopped. ddp_pg_why_stuck writes it into BUF
 * for the backends' messages; it may wait a few seconds for the store. */
void ddp_pg_set_whereabouts(DdpWhereabouts *w);
void ddp_pg_why_stuck(char *buf, size_t len);

/* ---- for the backends only (pg.c dispatches to them) ------------------------- */

typedef struct {
    const char *name;
    int (*destroy)(void *impl, int abort); /* 1: a collective still runs (see ddp_pg_abort) */
    DdpStatus (*broadcast)(void *impl, void *buf, size_t count, DdpPgType type, int root);
    DdpStatus (*allreduce)(void *impl, void *buf, size_t count, DdpPgType type, DdpPgOp op);
    DdpStatus (*allgather)(void *impl, const void *send, void *recv, size_t count, DdpPgType type);
    DdpStatus (*barrier)(void *impl);
    DdpStatus (*allreduce_start)(void *impl, void *buf, size_t count, DdpPgType type, DdpPgOp op,
                                 const char *what, DdpWork **work);
    DdpStatus (*wait)(void *impl, DdpWork *work);
    DdpStatus (*status)(void *impl);
    DdpStatus (*stop_vote)(void *impl, int local, int *agreed);
    /* the purpose of the next collective; NULL: the backend does not check them */
    void (*purpose)(void *impl, DdpPgPurpose purpose);
    /* ddp_pg_watch; NULL: collectives end when their calls return (MPI) */
    DdpStatus (*watch)(void *impl, void *stream, const char *what);
} DdpPgBackendOps;

/* pg_mpi.c (fails with a message when built without MPI). */
DdpStatus ddp_pg_mpi_open(const DdpTopology *t, double timeout_s, const DdpPgBackendOps **ops, void **impl);
/* pg_nccl.cu, or pg_nccl_cpu.c in CPU builds (fails with a message). */
DdpStatus ddp_pg_nccl_open(const DdpTopology *t, DdpStore *store, void *stream, double timeout_s,
                           const DdpPgBackendOps **ops, void **impl);
/* The size in bytes of one element of TYPE, and its plural for messages
 * ("all-reduce of 1290 floats"). */
size_t ddp_pg_type_size(DdpPgType type);
const char *ddp_pg_type_name(DdpPgType type);

#ifdef __cplusplus
}
#endif

#endif
