/*
 * distributed.h: what the trainer does differently when there are several
 * ranks, kept out of trainer.c's loop.
 *
 * Start-up, in PyTorch DDP's order: learn the topology (topology.h), or
 * start the ranks ourselves (--nproc-per-node, or every local GPU); join the
 * process group (pg.h: NCCL on GPUs, meeting through the TCP store; MPI on
 * CPUs, under mpirun); check that every rank runs the same net with the same
 * settings; broadcast rank 0's weights. During training: the reducer
 * (reducer.h) all-reduces gradients, statistics are summed over ranks at
 * reports. At the end: a check that every rank holds the same weights.
 *
 * With one rank every function here is a no-op, so a single-process run
 * pays for none of it.
 */
#ifndef DDPRT_DISTRIBUTED_H
#define DDPRT_DISTRIBUTED_H

#include <stdint.h>

#include "flags.h"       // DdpFlags, ddp_flags_agreement
#include "dataset.h"     // DdpDataSet, ddp_data_digest
#include "model.h"       // DdpNet, DdpTrainConfig
#include "pg.h"          // DdpProcessGroup
#include "store.h"  // DdpStore, and through it topology.h's DdpTopology
#include "step_times.h"  // DdpRankTimes
#include "whereabouts.h" // DdpWhereabouts

typedef struct {
    DdpTopology topo;
    DdpStore *store;
    DdpProcessGroup *pg;  /* NULL with one rank */
    DdpWhereabouts *whereabouts; /* where each rank is, for hangs; NULL without a store */
    void *stream;         /* the compute stream, for host <-> device copies of start-up data */
    int rank, world;
    int agreed_failure;   /* every rank failed the same check (at start-up, or a checkpoint's): MPI may finish */
    char not_invariant[320]; /* ddp_dist_not_bit_invariant's line, or "" */
    int call_by_call_rank; /* ddp_dist_check_same: the first rank that runs its steps call by call, or -1 */
} DdpDist;

/* The topology, from flags and environment. */
DdpStatus ddp_dist_topology(DdpDist *d, const DdpFlags *flags);

/* How many local ranks this process should start rather than train itself,
 * into *NPROC: --nproc-per-node N when no launcher started us, or on a GPU
 * build with no topology at all, every local GPU when there are several
 * (ddp_local_ranks_to_start: none for --predict; on a GPU build, more
 * ranks than visible GPUs refused); 0: train here. Where a launcher (or
 * --rank/--world-size) already made this process a rank, --max-restarts,
 * and --nproc-per-node other than the node's ranks, are refused: they
 * would be ignored, and the run would not be the one asked for; so are
 * (but for --predict, which refuses several ranks itself) --world-size 1
 * in each process of an mpirun of several, any build, and on a CPU build
 * any rank mpirun did not place, whose MPI would not open. A Slurm batch script's
 * own shell in a job of several nodes is refused too, but for --predict:
 * the run would use one node of them (topology.h). */
DdpStatus ddp_dist_ranks_to_launch(const DdpDist *d, const DdpFlags *flags, int *nproc);

/* Starts NPROC local ranks and waits for them; returns the exit status. GPU
 * builds fork them with torchrun's environment (launcher.h); CPU builds,
 * whose ranks talk through MPI, run them under mpirun. With --max-restarts
 * N, when a rank fails (not bad input, not a signal to this process) every
 * rank is started again with --resume, from the newest checkpoint in --save
 * DIR, at most N times; the restarted ranks find DDP_RESTART_ENV (the
 * restart's number, 1 for the first) and DDP_RESTART_CAUSE_ENV (what ended
 * the ranks before) in their environment, and rank 0 logs them. */
#define DDP_RESTART_ENV "DDP_RESTART"
/* Set for the ranks ddp_dist_launch starts: it says how to resume a run
 * stopped on request (the command the user typed), not their rank 0. */
#define DDP_LAUNCHER_ENV "DDP_LAUNCHER"
#define DDP_RESTART_CAUSE_ENV "DDP_RESTART_CAUSE"
int ddp_dist_launch(int nproc, int argc, char **argv, const DdpFlags *flags);

/* Joins the process group (world > 1): the backend from --backend or the
 * build (nccl on GPUs, mpi on CPUs); STREAM is the compute stream. Where the
 * run has a store (NCCL's rendezvous; under mpirun, when every rank was
 * given MASTER_ADDR and one MASTER_PORT, as --nproc-per-node gives them,
 * and rank 0 serves there: the ranks agree on that in one all-gather, made
 * on every run under mpirun, whose failure fails the join) every rank
 * publishes its place through it (whereabouts.h), so that a timeout names
 * the ranks that were elsewhere. */
DdpStatus ddp_dist_join(DdpDist *d, const DdpFlags *flags, void *stream);

/* Every rank's MINE into ALL (a row per rank, in rank order): the times of
 * step_times.h, at log time. One rank: ALL[0] = *MINE. */
DdpStatus ddp_dist_gather_times(DdpDist *d, const DdpRankTimes *mine, DdpRankTimes *all);

/* Every rank must run the same net (hash) in the same world, with the same
 * value of every flag flags.h says must agree (or all with it given, or
 * none), on the same TRAIN and TEST data (sizes and ddp_data_digest): a
 * difference is DDP_BAD_INPUT naming the first differing rank, the flag and
 * both values, the same on every rank. KERNELS (ddp_ops_describe_kernels)
 * may differ: the ranks still take the same steps, but not bit for bit
 * those of one rank, which ddp_dist_not_bit_invariant then says.
 * CUDA_GRAPHS: whether this rank would replay its steps from CUDA graphs
 * (step_graphs.h; --no-cuda-graph, DDP_DEBUG and DDP_SYNC_LAUNCHES say not).
 * Whether a collective is captured must be the same on every rank (NCCL's
 * rule), so d->call_by_call_rank gets the first rank that would not (-1:
 * none; always -1 with one rank), and then no rank does. */
DdpStatus ddp_dist_check_same(DdpDist *d, const DdpNet *net, const DdpFlags *flags, const DdpDataSet *train,
                              const DdpDataSet *test, const char *kernels, int cuda_graphs);

/* After ddp_dist_check_same: NULL, or a line saying that the ranks' convs
 * run different kernels, so that N ranks take other steps than one rank. */
const char *ddp_dist_not_bit_invariant(const DdpDist *d);

/* Rank 0's weights, buffers, optimizer state and (host) step counts to every
 * rank, before the first step. */
DdpStatus ddp_dist_broadcast_weights(DdpDist *d, const DdpNet *net, float *params, float *buffers,
                                     float *opt_state, int64_t *counts);

/* Rank 0's N host VALUES to every rank. */
DdpStatus ddp_dist_broadcast_host(DdpDist *d, int64_t *values, int n);

/* Rank 0's TEXT (a C string) into every rank's TEXT, a buffer of CAP bytes
 * on every rank: rank 0's must fit it. */
DdpStatus ddp_dist_broadcast_text(DdpDist *d, char *text, size_t cap);

/* Sums COUNT doubles of device statistics over the ranks, in place;
 * PURPOSE (training or evaluation statistics) names it in messages. */
DdpStatus ddp_dist_sum_stats(DdpDist *d, double *stats, int count, DdpPgPurpose purpose);

/* DDP_FAIL unless every rank's HOST_PARAMS (N floats) are bit-identical. */
DdpStatus ddp_dist_check_identical(DdpDist *d, const float *host_params, int64_t n);

/* Ends the group: cleanly after success (or a start-up check every rank
 * failed alike), by abort after a failure (so that the other ranks are
 * ended, not left waiting). Returns 1 when a collective is still running on
 * the run's buffers (ddp_pg_abort): the caller must not free them. */
int ddp_dist_close(DdpDist *d, int failed);

#endif
