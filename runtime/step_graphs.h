/*
 * step_graphs.h: a training step's device work (forward, loss, backward, the
 * bucket all-reduces, the optimizer) run as one graph per batch shape
 * (graph.h): a shape's first step runs call by call (what libraries set up
 * on first use stays out of the capture), its second is captured, and the
 * rest replay the graph.
 *
 * A shape is what a captured step keeps: the batch's size (an epoch's last
 * batch may be smaller), whether its gradients add to the ones before
 * (ctx.accumulate, under --no-sync-every) and whether it all-reduces them and
 * steps the optimizer. A run has at most a few; shapes beyond
 * DDP_STEP_GRAPHS_MOST run plainly. What changes every step is read from
 * device memory (step_scalars.h).
 *
 * Off (--no-cuda-graph, or where a step waits inside itself: DDP_DEBUG,
 * DDP_SYNC_LAUNCHES), every step's work is queued call by call, as it is
 * while a graph is captured. A capture the device refuses turns graphs off
 * for the rest of the run, with one warning line naming what was refused,
 * and the step is made again call by call; but with a process group (NCCL)
 * the run fails, saying to use --no-cuda-graph: collectives captured
 * before the refusal count on this rank and not on the others.
 */
#ifndef DDPRT_STEP_GRAPHS_H
#define DDPRT_STEP_GRAPHS_H

#include <stddef.h>

#include "graph.h"       // DdpGraph, DdpGraphWork
#include "model.h"       // DdpNet, DdpCtx
#include "pg.h"          // DdpProcessGroup: a replay's all-reduces watched
#include "reducer.h"     // DdpReducer
#include "status.h"      // DdpStatus
#include "step_times.h"  // DdpStepTimes: the phases the work enters

#ifdef __cplusplus
extern "C" {
#endif

/* One step's work, as ddp_step_graphs_run is given it (copied: a graph keeps
 * its capture's copy). */
typedef struct {
    const DdpNet *net;
    DdpCtx ctx;           /* the trainer's, its accumulate this step's */
    DdpReducer *reducer;  /* NULL: one rank */
    DdpStepTimes *times;
    int n;                /* samples in the batch */
    int sync;             /* 1: all-reduce and step the optimizer; 0: a no_sync step */
} DdpStepWork;

typedef struct DdpStepGraphs DdpStepGraphs;

/* The most graphs a run makes: the shapes a run has (full and short batch,
 * times accumulate and sync under --no-sync-every) are fewer. */
#define DDP_STEP_GRAPHS_MOST 8

/* ON 0: every step plainly. PG (NULL alone) watches each replay's
 * all-reduces; STREAM is the step's. */
DdpStatus ddp_step_graphs_create(DdpStepGraphs **out, int on, DdpProcessGroup *pg, void *stream);
void ddp_step_graphs_destroy(DdpStepGraphs *g);

/* Queues W's step: its shape's graph (captured now, on its second step), or
 * the calls themselves. */
DdpStatus ddp_step_graphs_run(DdpStepGraphs *g, const DdpStepWork *w);

/* The steps' work done call by call, as in a capture: what a graph holds. */
DdpStatus ddp_step_work(void *work);

/* Graphs made so far (the run's last lines on a GPU, and the tests). */
int ddp_step_graphs_count(const DdpStepGraphs *g);

/* How a graph is captured: graph.h's ddp_graph_capture, unless a test
 * gives another (a capture refused, which a CPU's twin never is). */
typedef DdpStatus (*DdpGraphCaptureFn)(DdpGraph **graph, void *stream, DdpGraphWork work, const void *arg,
                                       size_t arg_bytes, char *why, size_t why_len);
void ddp_step_graphs_capture_with(DdpStepGraphs *g, DdpGraphCaptureFn capture);

#ifdef __cplusplus
}
#endif

#endif
