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
    cudaError_t inside = cudaSuccess; /* what the work's failing call left, before EndCapture replaces it */
    cudaGraph_t captured = NULL;
    cudaError_t ended = cudaSuccess;
    if (began == cudaSuccess) {
        worked = work(copy);
        inside = worked != DDP_OK ? cudaPeekAtLastError() : cudaSuccess;
        ended = cudaStreamEndCapture(s, &captured);
    }
    free(copy);
    /* A refusal names the call refused (CALL, or the work's own message);
     * any other error is the run's failure. */
    const char *call = NULL;
    cudaError_t error = cudaSuccess;
    int refused = 0;
    if (began != cudaSuccess) {
        call = "cudaStreamBeginCapture", error = began, refused = refusal(began);
    } else if (worked != DDP_OK) {
        /* a failure with no capture error behind it is the work's own; the
         * error its call left may have been read (and cleared) by a launch
         * check since, but EndCapture still says the capture was broken */
        refused = refusal(inside) || refusal(ended);
    } else if (ended != cudaSuccess || !captured) {
        call = "cudaStreamEndCapture", error = ended != cudaSuccess ? ended : cudaErrorStreamCaptureInvalidated;
        refused = refusal(error);
    } else {
        error = cudaGraphInstantiate(&g->exec, captured, 0);
        call = "cudaGraphInstantiate";
        /* a graph it cannot instantiate (cudaErrorNotSupported, say) runs without one; no memory is no memory */
        refused = error != cudaSuccess && error != cudaErrorMemoryAllocation;
    }
    if (captured)
        (void)cudaGraphDestroy(captured); /* an instantiated graph keeps what it needs */
    if (error == cudaSuccess && worked == DDP_OK) {
        *graph = g;
        return DDP_OK;
    }
    free(g);
    if (!refused) {
        if (worked != DDP_OK)
            return worked;
        return DDP_ERR(DDP_FAIL, "%s: %s (%s)", call, cudaGetErrorName(error), cudaGetErrorString(error));
    }
    (void)cudaGetLastError();
    if (worked != DDP_OK) /* its message names the call refused inside the capture */
        snprintf(why, why_len, "%s", ddp_error_message());
    else
        snprintf(why, why_len, "%s: %s (%s)", call, cudaGetErrorName(error), cudaGetErrorString(error));
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
