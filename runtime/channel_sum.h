/*
 * channel_sum.h: per-channel sums over a batch (a bias's gradient, batchnorm's
 * statistics and its backward sums, and the loss's: one channel of one value
 * a sample, in plain doubles), written once for both targets. Included
 * by kernel.h, after DdpSum. A generated kernel reads:
 *
 *   DDP_FOR_CHANNELS(c, C) {
 *       DdpSum sum = ddp_sum_empty();
 *       DDP_FOR_SAMPLES(s, n, HW) {
 *           double sample = 0.0;
 *           DDP_SIMD_SUM(sample)
 *           DDP_FOR_PIXELS(j, HW)
 *               sample += dy[((int64_t)s * C + c) * HW + j];
 *           ddp_grad_sum_add(&sum, sample);
 *       }
 *       if (DDP_CHANNEL_DONE(c, &sum, NULL)) {
 *           ... write the channel's results from sum ...
 *       }
 *   }
 *
 * and is started with DDP_LAUNCH_CHANNELS(kernel, C, HW, n, other args...),
 * n being the kernel's first argument. DDP_CHANNEL_DONE takes one or two sums
 * (the second NULL where there is one) and is true where the channel's
 * totals are in them, for the one thread that writes them. The sums are
 * DdpSum *; a GPU's DdpSum is a double, so a kernel of plain doubles (the
 * loss's) passes its own, which on a CPU are not read.
 *
 * On the CPU that is the loop it reads as: a channel to a thread, its samples
 * in order, each sample's part in vector lanes (DDP_SIMD_SUM), DdpSums that
 * are order-free; DDP_CHANNEL_DONE is always true.
 *
 * On the GPU a channel is GROUPS blocks, each taking a contiguous share of the
 * samples, and a block's threads share out each sample's pixels: LANES
 * threads to a sample (channel_split.h: a plane of 576 pixels gets the whole
 * block, a linear layer's one value a thread per sample), so a block takes
 * DDP_BLOCK / LANES samples at a time. Each thread keeps its own sums; a
 * block adds its threads' in a fixed tree (ddp_block_sum), and the last of a
 * channel's blocks to finish adds the blocks' partial sums in group order.
 * The result depends on the block size and the batch alone, never on timing.
 * In a channels-last program (ddpc --layout) a sample's pixels of one
 * channel lie C floats apart, so a block's loads are not coalesced there;
 * lanes across channels would be, at the price of another order of sums.
 * Not yet measured on a GPU.
 * (Before, one thread summed a channel's whole batch alone, 36,864 loads for
 * mnist.net's first bias: its step on an H200 took 7.9 ms, now 0.6 to 0.9.)
 */
#ifndef DDPRT_CHANNEL_SUM_H
#define DDPRT_CHANNEL_SUM_H

#include "channel_split.h"  // ddp_plane_lanes, ddp_channel_groups, ddp_group_first

#ifdef __CUDACC__

/* Every per-channel kernel of a program shares these. That is safe because
 * they run one after another on the step's one stream, and each kernel's
 * last blocks leave the counts at zero; two running at once (another stream,
 * parallel branches of a graph) would need their own. */
static __device__ double ddp_channel_partials[2 * DDP_CHANNEL_BLOCKS];
static __device__ unsigned ddp_channel_arrivals[DDP_CHANNEL_BLOCKS];

/* The groups the grid gives each of CHANNELS channels. A grid that is not a
 * whole number of groups (a per-channel kernel started with plain
 * DDP_LAUNCH, say, in an edited OUT.cu) would skip channels silently: it
 * traps instead, which ends the run with a launch failure (reported at the
 * next synchronisation; DDP_SYNC_LAUNCHES=1 names the kernel). */
static __device__ inline int64_t ddp_grid_groups(int64_t channels)
{
    if (gridDim.x < channels || gridDim.x % channels != 0)
        __trap();
    return gridDim.x / channels;
}

/* Channel c's blocks are blockIdx.x = group * C + c; the grid is exactly
 * C x groups (ddp_channel_groups), so each block has one channel. */
#define DDP_FOR_CHANNELS(c, count)                                                                        \
    for (int64_t c = blockIdx.x % (int64_t)(count), ddp_group = blockIdx.x / (int64_t)(count),           \
                 ddp_groups = ddp_grid_groups(count), ddp_once = 0;                                         \
         !ddp_once; ddp_once = 1)
#define DDP_FOR_SAMPLES(s, n, pixels)                                                                     \
    for (int s = ddp_group_first(ddp_group, ddp_groups, n) + (int)threadIdx.x / ddp_plane_lanes(pixels, DDP_BLOCK); \
         s < ddp_group_first(ddp_group + 1, ddp_groups, n); s += DDP_BLOCK / ddp_plane_lanes(pixels, DDP_BLOCK))
#define DDP_FOR_PIXELS(j, pixels)                                                                         \
    for (int64_t j = (int64_t)threadIdx.x % ddp_plane_lanes(pixels, DDP_BLOCK); j < (int64_t)(pixels);   \
         j += ddp_plane_lanes(pixels, DDP_BLOCK))
#define DDP_CHANNEL_DONE(c, a, b) ddp_channel_done(c, ddp_group, ddp_groups, a, b)
#define DDP_LAUNCH_CHANNELS(kernel, channels, pixels, n, ...)                                            \
    DDP_LAUNCH_GRID(kernel, (unsigned)((channels) * ddp_channel_groups(channels, pixels, n, DDP_BLOCK)), n, \
                    __VA_ARGS__)

/* The block's threads' sums, added in a fixed order (each warp's by
 * shuffles, then the warps' in turn); every thread gets the total. Every
 * thread of the block calls it, the same number of times. */
static __device__ inline void ddp_block_sum(DdpSum *s)
{
    __shared__ double warp_sums[DDP_BLOCK / 32];
    double v = *s;
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    __syncthreads(); /* a previous call's reads of warp_sums are over */
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = v;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < DDP_BLOCK / 32; w++)
        total += warp_sums[w];
    *s = total;
}

/* The block's sums into A (and B); then, where the channel has several
 * blocks, each block's thread 0 leaves its partials and counts itself in, and
 * the last to arrive adds all the channel's partials in group order (and
 * resets the count for the next launch). True for the one thread holding the
 * channel's totals. */
static __device__ inline int ddp_channel_done(int64_t c, int64_t group, int64_t groups, DdpSum *a, DdpSum *b)
{
    ddp_block_sum(a);
    if (b)
        ddp_block_sum(b);
    if (threadIdx.x != 0)
        return 0;
    if (groups == 1)
        return 1;
    double *mine = ddp_channel_partials + 2 * (c * groups + group);
    mine[0] = *a;
    mine[1] = b ? *b : 0.0;
    __threadfence(); /* the partials are visible before the count says so */
    if (atomicAdd(&ddp_channel_arrivals[c], 1u) != (unsigned)groups - 1)
        return 0;
    __threadfence();
    const volatile double *all = ddp_channel_partials + 2 * c * groups;
    double ta = 0.0, tb = 0.0;
    for (int64_t g = 0; g < groups; g++) {
        ta += all[2 * g];
        tb += all[2 * g + 1];
    }
    *a = ta;
    if (b)
        *b = tb;
    ddp_channel_arrivals[c] = 0;
    return 1;
}

#else

#define DDP_FOR_CHANNELS(c, count) DDP_FOR(c, count)
#define DDP_FOR_SAMPLES(s, n, pixels) for (int s = 0; s < (int)(n); s++)
#define DDP_FOR_PIXELS(j, pixels) for (int64_t j = 0; j < (int64_t)(pixels); j++)
#define DDP_CHANNEL_DONE(c, a, b) 1
#define DDP_LAUNCH_CHANNELS(kernel, channels, pixels, n, ...) kernel(n, __VA_ARGS__)

#endif

#endif
