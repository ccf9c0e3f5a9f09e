/*
 * graph_cuda.cu: graph.h on an NVIDIA GPU: stream capture into a CUDA graph,
 * instantiated once and launched per step.
 *
 * Capture is thread-local (cudaStreamCaptureModeThreadLocal): the NCCL
 * watchdog and the loader's threads go on with their own CUDA calls while
 * the trainer's thread captures, and only this thread's calls that a graph
 * cannot hold (a synchronisation, an allocation, an event queried) end the
 * capture. Such a refusal leaves the capture invalidated:
 * cudaStreamEndCapture says so with a capture error (refusal, below), the
 * error the refused call left is cleared, so that the next launch's check
 * does not take it for its own, and the caller is told why. Any other error
 * is returned as the failure it is.
 */
#include "graph.h"
#include "cuda_check.h"  // CUDA_TRY

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct DdpGraph {
    cudaGraphExec_t exec;
};

/* An error that says the capture, not the device, failed: the work can run
 * without a graph. Any other (a fault, no memory) is the run's failure. */
static int refusal(cudaError_t e)
{
    switch (e) {
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorCapturedEvent:
    case cudaErrorNotSupported:
        return 1;
    default:
        return 0;
    }
}

DdpStatus ddp_graph_capture(DdpGraph **graph, void *stream, DdpGraphWork work, const void *arg, size_t arg_bytes,
                            char *why, size_t why_len)
{
    *graph = NULL;
    if (why_len)
        why[0] = '\0';
    void *copy = malloc(arg_bytes + 1);
    DdpGraph *g = (DdpGraph *)calloc(1, sizeof *g);
    if (!copy || !g) {
        free(copy);
        free(g);
        return DDP_ERR(DDP_FAIL, "out of memory");
    }
    memcpy(copy, arg, arg_bytes);
    cudaStream_t s = (cudaStream_t)stream;
    cudaError_t began = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    DdpStatus worked = DDP_OK;
    cudaGraph_t captured = NULL;
    cudaError_t ended = cudaSuccess;
    if (began == cudaSuccess) {
        worked = work(copy);
        ended = cudaStreamEndCapture(s, &captured);
    }
    free(copy);
    const char *refused = NULL; /* the call the device refused, for WHY */
    cudaError_t error = cudaSuccess;
    if (began != cudaSuccess) {
        refused = "cudaStreamBeginCapture";
        error = began;
    } else if (ended != cudaSuccess || !captured) {
        refused = "cudaStreamEndCapture";
        error = ended;
    } else if (worked != DDP_OK) {
        (void)cudaGraphDestroy(captured);
        free(g);
        return worked;
    } else {
        error = cudaGraphInstantiate(&g->exec, captured, 0);
        (void)cudaGraphDestroy(captured); /* the instantiated graph keeps what it needs */
        captured = NULL;
        if (error != cudaSuccess)
            refused = "cudaGraphInstantiate";
    }
    if (refused && !refusal(error)) {
        if (captured)
            (void)cudaGraphDestroy(captured);
        free(g);
        return DDP_ERR(DDP_FAIL, "%s: %s (%s)", refused, cudaGetErrorName(error), cudaGetErrorString(error));
    }
    if (refused) {
        (void)cudaGetLastError();
        if (captured)
            (void)cudaGraphDestroy(captured);
        free(g);
        /* the work's own message names the call refused inside the capture */
        if (worked != DDP_OK)
            snprintf(why, why_len, "%s", ddp_error_message());
        else
            snprintf(why, why_len, "%s: %s (%s)", refused, cudaGetErrorName(error), cudaGetErrorString(error));
        return DDP_OK;
    }
    *graph = g;
    return DDP_OK;
}

DdpStatus ddp_graph_launch(DdpGraph *graph, void *stream)
{
    CUDA_TRY(cudaGraphLaunch(graph->exec, (cudaStream_t)stream));
    return DDP_OK;
}

void ddp_graph_destroy(DdpGraph *graph)
{
    if (!graph)
        return;
    if (graph->exec)
        (void)cudaGraphExecDestroy(graph->exec);
    free(graph);
}
