/*
 * graph.h: a step's work captured once and replayed, as a CUDA graph on
 * GPUs, with a twin on CPUs that keeps what a CUDA graph keeps.
 *
 * A small net's GPU step is tens of short kernels and library calls, and
 * queuing each costs the host a few microseconds: the GPU waits for the host.
 * Captured into a CUDA graph, the step's launches, cuDNN and cuBLAS calls,
 * and the bucket all-reduces NCCL queues on its own stream are queued again
 * by one cudaGraphLaunch.
 *
 * What a replay does is what capture recorded: the kernels' arguments, the
 * library calls' host values (cuBLAS's beta), the host code that ran between
 * them (the reducer's counting, which bucket follows which) ran once, at
 * capture. So whatever changes from step to step is read from device memory
 * (step_scalars.h) or makes a graph of its own (step_graphs.h). The CPU twin
 * holds the work's argument as it was at capture and replays the work with
 * that copy, so a per-step value passed by the host instead of read from
 * device memory is as stale on a CPU as on a GPU, and the CPU tests see it.
 * (The twin does run the work's host code at each replay: MPI's collectives
 * are host calls.)
 *
 * Two implementations, as device.h: graph_cpu.c in libddprt.a (CPU
 * programs) and graph_cuda.cu in libddprt_cuda.a (GPU programs), which
 * leaves out every *_cpu.o.
 */
#ifndef DDPRT_GRAPH_H
#define DDPRT_GRAPH_H

#include <stddef.h>

#include "status.h"  // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

typedef struct DdpGraph DdpGraph;

/* Queues a step's work on the stream it was made for; its failures are kept
 * in ARG or returned. */
typedef DdpStatus (*DdpGraphWork)(void *arg);

/* Captures what WORK(ARG) queues on STREAM (and on the streams that join it
 * through events, NCCL's) into *GRAPH, running none of it: ddp_graph_launch
 * runs it. ARG_BYTES of ARG are copied and the copy is what WORK is given,
 * at capture and, on CPUs, at each replay. WORK's own failure is returned.
 * A capture the device refuses (an operation a graph cannot hold) is not a
 * failure: *GRAPH is NULL, WHY says what was refused, and the caller runs
 * the work without a graph. */
DdpStatus ddp_graph_capture(DdpGraph **graph, void *stream, DdpGraphWork work, const void *arg, size_t arg_bytes,
                            char *why, size_t why_len);

/* Queues GRAPH's work on STREAM, to run after what was queued before it. */
DdpStatus ddp_graph_launch(DdpGraph *graph, void *stream);

/* NULL is fine. */
void ddp_graph_destroy(DdpGraph *graph);

#ifdef __cplusplus
}
#endif

#endif
