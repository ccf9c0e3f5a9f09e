/*
 * launch_shape.h: how the generated kernels are laid out on a GPU, as plain
 * arithmetic: kernel.h launches by it, and ddpc's launch table (the comment
 * table at the end of OUT.cu, and `ddpc --emit plan`) reports by it, so that
 * what the table says a thread does is what the launch makes it do.
 *
 * A kernel of DDP_FOR items runs ddp_grid(items) blocks of DDP_BLOCK threads,
 * each thread striding over the items (a grid-stride loop); the grid is
 * capped at DDP_MAX_GRID blocks, beyond which a thread takes several items.
 * Per-channel sums have a layout of their own: channel_split.h.
 */
#ifndef DDPRT_LAUNCH_SHAPE_H
#define DDPRT_LAUNCH_SHAPE_H

#include <stdint.h>

#include "host_device.h"  // DDP_HOST_DEVICE

enum { DDP_BLOCK = 256, DDP_MAX_GRID = 1 << 20 };

/* Blocks for ITEMS work items: one thread an item, at least one block, at
 * most DDP_MAX_GRID. */
static DDP_HOST_DEVICE inline unsigned ddp_grid(int64_t items)
{
    int64_t blocks = (items + DDP_BLOCK - 1) / DDP_BLOCK;
    return (unsigned)(blocks < 1 ? 1 : blocks > (int64_t)DDP_MAX_GRID ? (int64_t)DDP_MAX_GRID : blocks);
}

/* The most items one thread of that grid takes. */
static inline int64_t ddp_items_per_thread(int64_t items)
{
    int64_t threads = (int64_t)ddp_grid(items) * DDP_BLOCK;
    return (items + threads - 1) / threads;
}

#endif
