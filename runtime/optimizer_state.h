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
 * a hundred cycles: mlp.net's AdamW update, 0.32 ms at first on 2 cores,
 * took 1.2 to 1.6 ms from its step 700 on, about a quarter of the whole
 * step. PyTorch's formula keeps those values.
 *
 * So the generated optimizers store such a momentum as zero. What that
 * changes lies far below the weights' own scale. The momentum dropped, of
 * magnitude below FLT_MIN (2^-126), would have moved a weight by less than
 * lr x 2^-126 under SGD (lr x (1 + momentum) x 2^-126 with nesterov) and
 * by less than step_size x 2^-126 / eps under Adam, which ddpc flushes only
 * where eps is at least 1e-12 (compiler/emit_cu.c). A later momentum can
 * differ from PyTorch's by an ulp while it stays below about 2^-101, in a
 * move below step_size x 2^-101 / eps (lr x 2^-101 under SGD, 1 +
 * momentum times that with nesterov). A weight's bits can differ only where
 * such a move shows in them, within 2^25 times it of zero: about 1e-17 at
 * Adam's defaults (step 1's step_size of 1e-2, eps 1e-8), 1.3e-24 for SGD
 * at lr 0.1.
 *
 * Adam's exp_avg_sq decays about a hundred times slower (0.999 a step): it
 * reaches the subnormal range after some 60,000 steps of zero gradient and
 * would stick there too. It is left as PyTorch keeps it: flushing it could
 * turn its denominator's sqrt(v) + eps into eps alone where eps is small.
 * The GPU build runs the same formula (its subnormals cost nothing).
 */
#ifndef DDPRT_OPTIMIZER_STATE_H
#define DDPRT_OPTIMIZER_STATE_H

#include <float.h>  // FLT_MIN
#include <math.h>

#include "host_device.h"  // DDP_HOST_DEVICE

/* X, or +0 where X is subnormal (nonzero, below FLT_MIN in magnitude) or
 * -0. NaNs and infinities are kept, so a diverged run is still seen. */
static inline DDP_HOST_DEVICE float ddp_flush_subnormal(float x)
{
    return fabsf(x) < FLT_MIN ? 0.0f : x;
}

#endif
