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
 * collective, rather than hanging.
 */
#ifndef DDPRT_PG_H
#define DDPRT_PG_H

#include <stddef.h>
#include <stdint.h>

#include "rendezvous.h"  // DdpTopology, DdpStore
#include "status.h"      // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DDP_PG_NONE, DDP_PG_MPI, DDP_PG_NCCL } DdpPgBackend;
typedef enum { DDP_F32, DDP_F64, DDP_I64, DDP_U8 } DdpPgType;
typedef enum { DDP_SUM, DDP_AVG, DDP_MAX } DdpPgOp;

typedef struct DdpProcessGroup DdpProcessGroup;
typedef struct DdpWork DdpWork;

/* STORE is used by NCCL to share its unique id (may be NULL under mpirun,
 * where MPI_Bcast carries it); STREAM is the compute stream on GPUs. */
DdpStatus ddp_pg_create(DdpProcessGroup **pg, DdpPgBackend backend, const DdpTopology *t, DdpStore *store,
                        void *stream, double timeout_s);
void ddp_pg_destroy(DdpProcessGroup *pg);
int ddp_pg_rank(const DdpProcessGroup *pg);
int ddp_pg_size(const DdpProcessGroup *pg);

/* Collectives complete in stream order: on MPI when the call returns; on
 * NCCL when the compute stream reaches them. In place where one buffer. */
DdpStatus ddp_pg_broadcast(DdpProcessGroup *pg, void *buf, size_t count, DdpPgType type, int root);
DdpStatus ddp_pg_allreduce(DdpProcessGroup *pg, void *buf, size_t count, DdpPgType type, DdpPgOp op);
DdpStatus ddp_pg_allgather(DdpProcessGroup *pg, const void *send, void *recv, size_t count, DdpPgType type);
DdpStatus ddp_pg_barrier(DdpProcessGroup *pg);

/* A gradient bucket's all-reduce, started as soon as its last gradient is
 * written and overlapping what the compute stream does next; ddp_pg_wait
 * makes the compute stream (GPU) or the host (CPU) wait for it. */
DdpStatus ddp_pg_allreduce_start(DdpProcessGroup *pg, float *buf, size_t count, DdpPgOp op, DdpWork **work);
DdpStatus ddp_pg_wait(DdpProcessGroup *pg, DdpWork *work);

#ifdef __cplusplus
}
#endif

#endif
