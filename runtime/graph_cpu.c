/*
 * graph_cpu.c: graph.h's twin on CPUs: no capture, the work run again at each
 * launch with its argument as it was at capture (see graph.h for why).
 */
#include "graph.h"

#include <stdlib.h>
#include <string.h>

struct DdpGraph {
    DdpGraphWork work;
    size_t arg_bytes;
    unsigned char *captured; /* the argument at capture */
    unsigned char *replayed; /* a fresh copy of it for each launch, which the work may write */
};

DdpStatus ddp_graph_capture(DdpGraph **graph, void *stream, DdpGraphWork work, const void *arg, size_t arg_bytes,
                            char *why, size_t why_len)
{
    (void)stream;
    *graph = NULL;
    if (why_len)
        why[0] = '\0';
    DdpGraph *g = calloc(1, sizeof *g);
    if (g) {
        g->captured = malloc(arg_bytes + 1);
        g->replayed = malloc(arg_bytes + 1);
    }
    if (!g || !g->captured || !g->replayed) {
        ddp_graph_destroy(g);
        return DDP_ERR(DDP_FAIL, "out of memory");
    }
    g->work = work;
    g->arg_bytes = arg_bytes;
    memcpy(g->captured, arg, arg_bytes);
    *graph = g;
    return DDP_OK;
}

DdpStatus ddp_graph_launch(DdpGraph *graph, void *stream)
{
    (void)stream;
    memcpy(graph->replayed, graph->captured, graph->arg_bytes);
    return graph->work(graph->replayed);
}

void ddp_graph_destroy(DdpGraph *graph)
{
    if (!graph)
        return;
    free(graph->captured);
    free(graph->replayed);
    free(graph);
}
