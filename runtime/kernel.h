/*
 * kernel.h: what lets one generated source run on GPUs and on CPUs.
 *
 * A generated kernel is written once, as a loop over independent work items:
 *
 *   DDP_KERNEL relu1_forward(int n, const float *x, float *y)
 *   {
 *       DDP_FOR(i, (int64_t)n * 4608)
 *           y[i] = x[i] < 0.0f ? 0.0f : x[i];
 *   }
 *
 * and started with DDP_LAUNCH(relu1_forward, work_items, args...). Under nvcc
 * it is a __global__ function whose threads stride over the items (a
 * grid-stride loop: any grid covers any size) launched on the step's stream,
 * each launch checked and named if it fails (DDP_SYNC_LAUNCHES=1 waits for
 * each, to name a kernel that faults);
 * under a host compiler it is a function whose loop OpenMP splits across
 * cores. Each item is computed by one thread in a fixed order either way, so
 * results do not depend on the thread count, and the CPU build checks the
 * very code the GPU runs (the CPU build of the same layout: ddpc --layout).
 *
 * DDP_FOR_2D(p, P, j, J) walks the same P x J items as rows and columns (a
 * channel plane and its pixels, say): on the GPU still one thread per item;
 * on the CPU a parallel loop over rows around an inner loop in vector lanes
 * (omp simd: the items are independent, so the compiler need not prove it),
 * with no division per item.
 *
 * DDP_SIMD_SUM(a, b) before a loop that adds into the doubles a (and b): on
 * the CPU the loop runs in vector lanes, each summed in an order fixed by
 * the build (not by the thread count or the data), instead of one chain of
 * dependent adds; on the GPU nothing, a thread's loop is plain.
 *
 * Per-channel sums over a batch (a bias's gradient, batchnorm's sums) have a
 * form of their own, which spreads a channel over many GPU threads:
 * channel_sum.h, included at the end.
 */
#ifndef DDPRT_KERNEL_H
#define DDPRT_KERNEL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"        // ddp_device_launched
#include "dropout_mask.h"  // ddp_dropout_keep, ddp_dropout_layer_key
#include "lane_math.h"    // ddp_erff, ddp_expf, ddp_tanhf: GELU's, sigmoid's, tanh's, in vector lanes on CPUs
#include "launch_shape.h"  // DDP_BLOCK, ddp_grid: how many threads a launch runs
#include "model.h"         // DdpCtx, DdpNet, DdpParamInfo, ddp_batchnorm_allreduce; ops.h
#include "optimizer_state.h"  // ddp_flush_subnormal
#include "trainer.h"       // ddp_main

#ifdef __CUDACC__

#include <cuda_runtime.h>

#define DDP_KERNEL __global__ void
#define DDP_FOR(i, count)                                                                              \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)(count);           \
         i += (int64_t)blockDim.x * gridDim.x)

#define DDP_FOR_2D(p, rows, j, cols)                                                                   \
    DDP_FOR(p##_##j, (int64_t)(rows) * (cols))                                                          \
    for (int64_t p = p##_##j / (cols), j = p##_##j % (cols), p##_once = 0; !p##_once; p##_once = 1)

/* Every launch is checked at once (no wait: device.h's ddp_device_launched),
 * so a bad launch is blamed on its kernel, not on the next cuDNN or cuBLAS
 * call; the first failure stays in ctx->status for the runtime to report. */
#define DDP_LAUNCH(kernel, items, ...) DDP_LAUNCH_GRID(kernel, ddp_grid(items), __VA_ARGS__)
/* The same on GRID blocks of DDP_BLOCK threads (DDP_LAUNCH_CHANNELS's grid). */
#define DDP_LAUNCH_GRID(kernel, grid, ...)                                                      \
    do {                                                                                        \
        kernel<<<grid, DDP_BLOCK, 0, (cudaStream_t)ctx->stream>>>(__VA_ARGS__);                 \
        if (ctx->status == DDP_OK)                                                              \
            ctx->status = ddp_device_launched(#kernel, ctx->stream);                            \
    } while (0)
#define DDP_SIMD_SUM(...)

#else

#define DDP_KERNEL static void
#define DDP_FOR(i, count) \
    _Pragma("omp parallel for schedule(static)") for (int64_t i = 0; i < (int64_t)(count); i++)
#define DDP_FOR_2D(p, rows, j, cols)                                                                      \
    _Pragma("omp parallel for schedule(static)") for (int64_t p = 0; p < (int64_t)(rows); p++) \
        _Pragma("omp simd") for (int64_t j = 0; j < (int64_t)(cols); j++)
#define DDP_LAUNCH(kernel, items, ...) kernel(__VA_ARGS__)
#define DDP_KERNEL_PRAGMA(text) _Pragma(#text)
#define DDP_SIMD_SUM(...) DDP_KERNEL_PRAGMA(omp simd reduction(+ : __VA_ARGS__))

#endif

/* Ends a layer's work in a pass. With DDP_DEBUG=1 (ctx->debug) it waits for
 * the layer's kernels and library calls and names WHERE ("linear1 forward,
 * mlp.net:4") in the first failure (ddp_layer_check, model.h): a cuDNN or
 * cuBLAS call that fails, or a kernel that faults, is then blamed on its
 * layer and line. Otherwise it costs a test of one int. */
#define DDP_LAYER_DONE(where)            \
    do {                                 \
        if (ctx->debug)                  \
            ddp_layer_check(ctx, where); \
    } while (0)

/* Sums over the samples of a batch, written the same for both builds (in
 * the per-channel form of channel_sum.h):
 *
 *   DdpSum sum = ddp_sum_empty();
 *   ...  ddp_grad_sum_add(&sum, this_samples_part);  for each sample
 *   DdpSum total = ddp_grad_open(dbias + c, accumulate);
 *   ddp_sum_merge(&total, sum);
 *   dbias[c] = ddp_grad_close(total);
 *
 * On CPUs a DdpSum is an order-free sum (exact_sum.h), so that the result
 * does not depend on how the samples were dealt out to ranks; a gradient is
 * one already. On GPUs a double, rounded to the float gradient at the end.
 * ddp_stats_sum_add is for batchnorm's forward statistics (their own
 * window); ddp_sum_value reads a sum; ddp_sum_count makes one of a count;
 * ddp_sum_merge adds one sum to another (exactly, on CPUs). */
#ifdef __CUDACC__
typedef double DdpSum;
static __device__ inline DdpSum ddp_sum_empty(void) { return 0.0; }
static __device__ inline DdpSum ddp_grad_open(const DdpGrad *g, int accumulate) { return accumulate ? (double)*g : 0.0; }
static __device__ inline DdpGrad ddp_grad_close(DdpSum s) { return (float)s; }
static __device__ inline void ddp_grad_sum_add(DdpSum *s, double part) { *s += part; }
static __device__ inline void ddp_stats_sum_add(DdpSum *s, double part) { *s += part; }
static __device__ inline double ddp_sum_value(DdpSum s) { return s; }
static __device__ inline DdpSum ddp_sum_count(double count) { return count; }
static __device__ inline void ddp_sum_merge(DdpSum *s, DdpSum t) { *s += t; }
static __device__ inline double ddp_grad_value(DdpGrad g) { return g; }
#else
typedef DdpExact DdpSum;
static inline DdpSum ddp_sum_empty(void) { return (DdpSum){0.0, 0.0}; }
static inline DdpSum ddp_grad_open(const DdpGrad *g, int accumulate) { return accumulate ? *g : ddp_sum_empty(); }
static inline DdpGrad ddp_grad_close(DdpSum s) { return s; }
static inline void ddp_grad_sum_add(DdpSum *s, double part) { ddp_exact_add(s, part, &ddp_grad_window); }
static inline void ddp_stats_sum_add(DdpSum *s, double part) { ddp_exact_add(s, part, &ddp_stats_window); }
static inline double ddp_sum_value(DdpSum s) { return ddp_exact_value(s); }
/* A count (an integer below 2^53) as a sum: ranks' counts add exactly. */
static inline DdpSum ddp_sum_count(double count) { return (DdpSum){count, 0.0}; }
static inline void ddp_sum_merge(DdpSum *s, DdpSum t) { ddp_exact_merge(s, t); }
static inline double ddp_grad_value(DdpGrad g) { return ddp_exact_value(g); }
#endif

#include "channel_sum.h"  // DDP_FOR_CHANNELS, DDP_FOR_SAMPLES, DDP_FOR_PIXELS, DDP_CHANNEL_DONE

/* Adds COUNT DdpSums of per-channel sums over all ranks, in place: the
 * statistics of a synchronised batchnorm are those of the global batch. On
 * CPUs the doubles of order-free sums add exactly, in any order. */
static inline void ddp_sync_batchnorm(DdpCtx *ctx, DdpSum *sums, int64_t count)
{
    ddp_batchnorm_allreduce(ctx, (double *)sums, (size_t)count * (sizeof(DdpSum) / sizeof(double)));
}

#endif
