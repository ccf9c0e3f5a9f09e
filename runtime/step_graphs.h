/*
 * step_graphs.h: a training step's device work (forward, loss, backward, the
 * bucket all-reduces, the optimizer) run as one graph per batch shape
 * (graph.h), captured the first time the shape comes and replayed after.
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
 * all-reduces; STREAM is the step's. WARN (or NULL) is called once, with the
 * line, if a capture is refused. */
DdpStatus ddp_step_graphs_create(DdpStepGraphs **out, int on, DdpProcessGroup *pg, void *stream,
                                 void (*warn)(void *arg, const char *line), void *warn_arg);
void ddp_step_graphs_destroy(DdpStepGraphs *g);

/* Queues W's step: its shape's graph, captured now if it is new, or the
 * calls themselves. */
DdpStatus ddp_step_graphs_run(DdpStepGraphs *g, const DdpStepWork *w);

/* The steps' work done call by call, as in a capture: what a graph holds. */
DdpStatus ddp_step_work(void *work);

/* Graphs made so far (a test's and the log's count). */
int ddp_step_graphs_count(const DdpStepGraphs *g);

#ifdef __cplusplus
}
#endif

#endif
