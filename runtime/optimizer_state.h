/*
 * optimizer_state.h: what the generated optimizers do to the state they
 * keep from step to step (Adam's exp_avg, SGD's momentum buffer).
 *
 * That state decays geometrically where a parameter's gradient stays zero
 * (a weight of a pixel that is blank in most images, of a unit a ReLU keeps
 * dead): m = 0.9 m a step. Within some hundreds of steps it reaches
 * float's subnormal range, and there it stays: 0.9 times the smallest
 * subnormal rounds back to it, and so do small multiples of it. On x86 CPUs
 * each arithmetic operation on a subnormal takes a microcode assist, about
 * a hundred cycles: mlp.net's AdamW step, 0.32 ms at first on 2 cores, took
 * 1.2 to 1.6 ms from its step 700 on, a fifth of the whole step. PyTorch's
 * CPU optimizers keep those values, and slow down alike.
 *
 * So the generated optimizers store such a momentum as zero. What that
 * drops is below any weight's resolution: a momentum of magnitude below
 * FLT_MIN (2^-126) moves a weight by less than lr x 2^-126 under SGD, and
 * by less than step_size x 2^-126 / eps under Adam, which ddpc flushes only
 * where eps is at least 1e-12 (compiler/emit_cu.c), so only weights within
 * about 2^24 times that of zero could round otherwise. Adam's exp_avg_sq,
 * which decays a thousand times slower, is left as PyTorch keeps it. The
 * GPU build runs the same code (its subnormals cost nothing, but both
 * builds then compute the same values).
 */
#ifndef DDPRT_OPTIMIZER_STATE_H
#define DDPRT_OPTIMIZER_STATE_H

#include <float.h>  // FLT_MIN
#include <math.h>

#include "host_device.h"  // DDP_HOST_DEVICE

/* X, or zero where X is subnormal (nonzero, below FLT_MIN in magnitude).
 * NaNs and infinities are kept, so a diverged run is still seen. */
static inline DDP_HOST_DEVICE float ddp_flush_subnormal(float x)
{
    return fabsf(x) < FLT_MIN ? 0.0f : x;
}

#endif
