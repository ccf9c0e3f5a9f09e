/*
 * step_graphs.c: the training step's graphs, one per batch shape
 * (step_graphs.h).
 */
#include "step_graphs.h"
#include "graph.h"  // DdpGraph: ddp_graph_capture, _launch
#include "ops.h"    // ddp_ops_forget_failure: a refused capture's calls

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    int n, accumulate, sync;
    DdpGraph *graph;
} Shape;

struct DdpStepGraphs {
    int on;
    DdpProcessGroup *pg;
    void *stream;
    void (*warn)(void *arg, const char *line);
    void *warn_arg;
    Shape shapes[DDP_STEP_GRAPHS_MOST];
    int n_shapes;
};

DdpStatus ddp_step_graphs_create(DdpStepGraphs **out, int on, DdpProcessGroup *pg, void *stream,
                                 void (*warn)(void *arg, const char *line), void *warn_arg)
{
    DdpStepGraphs *g = calloc(1, sizeof *g);
    if (!g)
        return DDP_ERR(DDP_FAIL, "out of memory");
    *g = (DdpStepGraphs){.on = on, .pg = pg, .stream = stream, .warn = warn, .warn_arg = warn_arg};
    *out = g;
    return DDP_OK;
}

void ddp_step_graphs_destroy(DdpStepGraphs *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_shapes; i++)
        ddp_graph_destroy(g->shapes[i].graph);
    free(g);
}

int ddp_step_graphs_count(const DdpStepGraphs *g)
{
    return g ? g->n_shapes : 0;
}

DdpStatus ddp_step_work(void *work)
{
    DdpStepWork *w = work;
    if (w->reducer && !w->sync)
        ddp_reducer_skip(w->reducer);
    ddp_times_enter(w->times, DDP_PHASE_FORWARD); /* train_step enters BACKWARD itself */
    w->net->train_step(&w->ctx, w->n);
    DdpStatus st = ddp_step_status(&w->ctx);
    /* even after a failure: the reducer is ready for the next step only
     * once it has finished this one */
    ddp_times_enter(w->times, DDP_PHASE_ALLREDUCE);
    if (w->reducer) {
        DdpStatus finished = ddp_reducer_finish(w->reducer);
        if (st == DDP_OK)
            st = finished;
    }
    DDP_CHECK(st);
    if (w->sync) {
        ddp_times_enter(w->times, DDP_PHASE_OPTIMIZER);
        w->net->optimizer_step(&w->ctx);
        DDP_CHECK(ddp_step_status(&w->ctx));
    }
    return DDP_OK;
}

/* The graph of W's shape: found, or captured now; NULL when graphs are off
 * or full. */
static DdpStatus graph_of(DdpStepGraphs *g, const DdpStepWork *w, DdpGraph **graph)
{
    *graph = NULL;
    if (!g->on)
        return DDP_OK;
    for (int i = 0; i < g->n_shapes; i++) {
        const Shape *s = &g->shapes[i];
        if (s->n == w->n && s->accumulate == w->ctx.accumulate && s->sync == w->sync) {
            *graph = s->graph;
            return DDP_OK;
        }
    }
    if (g->n_shapes == DDP_STEP_GRAPHS_MOST)
        return DDP_OK;
    char why[512];
    DDP_CHECK(ddp_graph_capture(graph, g->stream, ddp_step_work, w, sizeof *w, why, sizeof why));
    if (!*graph) {
        /* NCCL counts the collectives it was asked for, captured or not: those
         * of the refused capture cannot be taken back, and the ranks' counts
         * would part */
        if (g->pg)
            return DDP_ERR(DDP_FAIL, "the step's CUDA graph could not be captured (%s), and with a process group "
                           "its collectives cannot be made again without it: run with --no-cuda-graph", why);
        ddp_ops_forget_failure(w->ctx.ops); /* the refused calls', which never ran */
        g->on = 0;
        if (g->warn) {
            char line[640];
            snprintf(line, sizeof line, "the steps run without a CUDA graph from here on, call by call: a capture "
                     "was refused (%s)", why);
            g->warn(g->warn_arg, line);
        }
        return DDP_OK;
    }
    g->shapes[g->n_shapes++] = (Shape){.n = w->n, .accumulate = w->ctx.accumulate, .sync = w->sync, .graph = *graph};
    return DDP_OK;
}

DdpStatus ddp_step_graphs_run(DdpStepGraphs *g, const DdpStepWork *w)
{
    DdpGraph *graph = NULL;
    DDP_CHECK(graph_of(g, w, &graph));
    if (!graph) {
        DdpStepWork plain = *w;
        return ddp_step_work(&plain);
    }
    ddp_times_enter(w->times, DDP_PHASE_FORWARD);
    DDP_CHECK(ddp_graph_launch(graph, g->stream));
    return ddp_pg_watch(g->pg, g->stream, "the step's CUDA graph (its gradient all-reduces)");
}
