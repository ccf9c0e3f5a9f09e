/*
 * step_graphs.c: the training step's graphs, one per batch shape
 * (step_graphs.h).
 */
#include "step_graphs.h"
#include "ops.h"    // ddp_ops_status, ddp_ops_forget_failure: a refused capture's calls

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    int n, accumulate, sync;
    DdpGraph *graph; /* NULL: its first step has run, call by call */
} Shape;

struct DdpStepGraphs {
    int on;
    DdpProcessGroup *pg;
    void *stream;
    DdpGraphCaptureFn capture;
    Shape shapes[DDP_STEP_GRAPHS_MOST];
    int n_shapes;
    int made; /* graphs captured */
};

DdpStatus ddp_step_graphs_create(DdpStepGraphs **out, int on, DdpProcessGroup *pg, void *stream)
{
    DdpStepGraphs *g = calloc(1, sizeof *g);
    if (!g)
        return DDP_ERR(DDP_FAIL, "out of memory");
    *g = (DdpStepGraphs){.on = on, .pg = pg, .stream = stream, .capture = ddp_graph_capture};
    *out = g;
    return DDP_OK;
}

void ddp_step_graphs_capture_with(DdpStepGraphs *g, DdpGraphCaptureFn capture)
{
    g->capture = capture;
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
    return g ? g->made : 0;
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
     * once it has finished this one; the step's own message is the one said */
    ddp_times_enter(w->times, DDP_PHASE_ALLREDUCE);
    if (w->reducer && st == DDP_OK)
        DDP_CHECK(ddp_reducer_finish(w->reducer));
    if (w->reducer && st != DDP_OK) {
        char message[DDP_ERROR_MESSAGE_LEN];
        snprintf(message, sizeof message, "%s", ddp_error_message());
        (void)ddp_reducer_finish(w->reducer);
        return DDP_ERR(st, "%s", message);
    }
    DDP_CHECK(st);
    if (w->sync) {
        ddp_times_enter(w->times, DDP_PHASE_OPTIMIZER);
        w->net->optimizer_step(&w->ctx);
        DDP_CHECK(ddp_step_status(&w->ctx));
    }
    return DDP_OK;
}

/* A capture the device refused (WHY): graphs off for the run, or with a
 * process group the run's end. */
static DdpStatus refused(DdpStepGraphs *g, const DdpStepWork *w, char *why, size_t why_len)
{
    /* a library call the capture refused kept its own failure, which names
     * the call: the better reason */
    if (w->ctx.ops && ddp_ops_status(w->ctx.ops) != DDP_OK)
        snprintf(why, why_len, "%s", ddp_error_message());
    /* NCCL counts the collectives it was asked for, captured or not: those
     * of the refused capture cannot be taken back, and the ranks' counts
     * would part */
    if (g->pg)
        return DDP_ERR(DDP_FAIL, "the step's CUDA graph could not be captured (%s), and with a process group "
                       "its collectives cannot be made again without it: run with --no-cuda-graph", why);
    if (w->ctx.ops)
        ddp_ops_forget_failure(w->ctx.ops); /* the refused calls', which never ran */
    g->on = 0;
    fprintf(stderr, "warning: the steps run without a CUDA graph from here on, call by call: a capture was "
                    "refused (%s)\n", why);
    return DDP_OK;
}

/* The graph of W's shape, or NULL: the step then runs call by call. A
 * shape's first step does (and is remembered), so that whatever the
 * libraries set up on first use, NCCL's connections and CUDA's lazily
 * loaded kernels among them, is done outside a capture, which may not hold
 * it; its second is captured; the rest replay. NULL too when graphs are
 * off, or for shapes past DDP_STEP_GRAPHS_MOST. */
static DdpStatus graph_of(DdpStepGraphs *g, const DdpStepWork *w, DdpGraph **graph)
{
    *graph = NULL;
    if (!g->on)
        return DDP_OK;
    Shape *s = NULL;
    for (int i = 0; i < g->n_shapes && !s; i++)
        if (g->shapes[i].n == w->n && g->shapes[i].accumulate == w->ctx.accumulate && g->shapes[i].sync == w->sync)
            s = &g->shapes[i];
    if (!s) {
        if (g->n_shapes < DDP_STEP_GRAPHS_MOST)
            g->shapes[g->n_shapes++] = (Shape){.n = w->n, .accumulate = w->ctx.accumulate, .sync = w->sync};
        return DDP_OK;
    }
    if (!s->graph) {
        char why[512];
        DDP_CHECK(g->capture(&s->graph, g->stream, ddp_step_work, w, sizeof *w, why, sizeof why));
        /* A library call refused inside a capture that still ended well (the
         * ops keep their failure, ops.h; the step's status does not read
         * it): the graph lacks that call, so it is refused too (refused()
         * names the call), and the step is made call by call, where a real
         * failure fails again. */
        if (s->graph && w->ctx.ops && ddp_ops_status(w->ctx.ops) != DDP_OK) {
            ddp_graph_destroy(s->graph);
            s->graph = NULL;
        }
        if (!s->graph)
            return refused(g, w, why, sizeof why);
        g->made++;
    }
    *graph = s->graph;
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
