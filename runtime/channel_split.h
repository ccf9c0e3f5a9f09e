/*
 * channel_split.h: how a per-channel sum (channel_sum.h) shares a channel's
 * samples and pixels among a GPU's blocks and threads, as plain arithmetic:
 * the same functions compute it inside the kernels and in the unit tests,
 * which check on a machine with no GPU that every (sample, pixel) of a
 * channel is visited once (tests/unit/test_device_rules.c).
 *
 * A channel gets GROUPS blocks of BLOCK threads; group g takes samples
 * [ddp_group_first(g), ddp_group_first(g + 1)); within a block LANES threads
 * share a sample's pixels (thread t: pixels t % LANES, + LANES, ...), so that
 * BLOCK / LANES samples are taken at a time (thread t: the group's first
 * sample + t / LANES, + BLOCK / LANES, ...).
 */
#ifndef DDPRT_CHANNEL_SPLIT_H
#define DDPRT_CHANNEL_SPLIT_H

#include <stdint.h>

#include "host_device.h"  // DDP_HOST_DEVICE

/* About how many blocks a per-channel kernel should keep busy (a few per
 * multiprocessor of a large GPU: an H200 has 132); and the most blocks of
 * all channels together, the room for their partial sums. A channel has
 * more than one block only where C < DDP_CHANNEL_WANT, so C x groups stays
 * under 2 x DDP_CHANNEL_WANT; beyond the room, one block a channel. */
enum { DDP_CHANNEL_WANT = 512, DDP_CHANNEL_BLOCKS = 4 * DDP_CHANNEL_WANT };

/* Threads to a sample: the power of two from 1 up to BLOCK (a power of two)
 * that first covers PIXELS, so a divisor of BLOCK. */
static DDP_HOST_DEVICE inline int ddp_plane_lanes(int64_t pixels, int block)
{
    int lanes = 1;
    while (lanes < pixels && lanes < block)
        lanes *= 2;
    return lanes;
}

/* Blocks per channel: enough that all channels together keep about
 * DDP_CHANNEL_WANT busy, but no more than the passes of BLOCK / LANES samples
 * that N makes (so no block is left without a sample), and all within
 * DDP_CHANNEL_BLOCKS. */
static inline int64_t ddp_channel_groups(int64_t channels, int64_t pixels, int n, int block)
{
    int64_t at_once = block / ddp_plane_lanes(pixels, block);
    int64_t groups = (DDP_CHANNEL_WANT + channels - 1) / channels;
    int64_t passes = ((int64_t)n + at_once - 1) / at_once;
    if (groups > passes)
        groups = passes;
    if (groups > DDP_CHANNEL_BLOCKS / channels)
        groups = DDP_CHANNEL_BLOCKS / channels;
    return groups < 1 ? 1 : groups;
}

/* The first sample of GROUP of GROUPS over N samples: shares differ by at most one. */
static DDP_HOST_DEVICE inline int ddp_group_first(int64_t group, int64_t groups, int n)
{
    return (int)(group * n / groups);
}

/* The most (sample, pixel) terms one thread adds: the largest group's
 * samples in passes of BLOCK / LANES, times a sample's pixels over LANES.
 * (The last block of a channel then adds its GROUPS partials too.) For the
 * launch table (ddpc's), checked against a walk of the loops in the tests. */
static inline int64_t ddp_channel_thread_terms(int64_t channels, int64_t pixels, int n, int block)
{
    int64_t groups = ddp_channel_groups(channels, pixels, n, block);
    int64_t lanes = ddp_plane_lanes(pixels, block), at_once = block / lanes;
    int64_t share = ((int64_t)n + groups - 1) / groups; /* ddp_group_first's shares differ by at most one */
    return (share + at_once - 1) / at_once * ((pixels + lanes - 1) / lanes);
}

#endif
