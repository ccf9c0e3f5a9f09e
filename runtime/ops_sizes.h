/*
 * ops_sizes.h: what both ops implementations know alike of the copies they
 * round operands into (precision.h): the floats a call's operands span (a
 * conv's input, output or their gradients and weights at batch N, a
 * row-major matrix with a row stride, a linear layer's largest operand),
 * and the checks on the plans that size them. Inline, so that the two ops
 * objects keep exactly the same symbols.
 */
#ifndef DDPRT_OPS_SIZES_H
#define DDPRT_OPS_SIZES_H

#include <stddef.h>

#include "ops.h"  // DdpConvShape, DdpPrecision, DdpStatus

static inline size_t ddp_conv_input_floats(const DdpConvShape *s, int n) { return (size_t)n * s->c * s->h * s->w; }
static inline size_t ddp_conv_output_floats(const DdpConvShape *s, int n)
{
    return (size_t)n * s->k * s->out_h * s->out_w;
}
static inline size_t ddp_conv_weight_floats(const DdpConvShape *s)
{
    return (size_t)s->k * (s->c / s->groups) * s->r * s->s;
}

/* Floats a ROWS x COLS matrix with row stride LD spans (0 when empty). */
static inline size_t ddp_matrix_span(int rows, int cols, int ld)
{
    return rows && cols ? (size_t)(rows - 1) * ld + cols : 0;
}

/* The largest of a linear layer's operands at batch N: x (N x IN), its
 * weights (OUT x IN), the output's gradient (N x OUT). */
static inline size_t ddp_linear_operand_floats(int n, int in, int out)
{
    const size_t x = (size_t)n * in, w = (size_t)out * in, dy = (size_t)n * out;
    return x > w ? (x > dy ? x : dy) : (w > dy ? w : dy);
}

/* ddp_ops_plan_linear's arguments and timing, in either build. */
static inline DdpStatus ddp_linear_plan_check(int finalized, int n, int in, int out)
{
    if (finalized || n < 1 || in < 1 || out < 1)
        return DDP_ERR(DDP_FAIL, "internal error: ddp_ops_plan_linear(n=%d, in=%d, out=%d)%s", n, in, out,
                       finalized ? " after ddp_ops_finalize" : "");
    return DDP_OK;
}

/* ddp_ops_set_precision's argument and timing, in either build. */
static inline DdpStatus ddp_precision_set_check(int finalized, DdpPrecision precision)
{
    if (finalized || (unsigned)precision >= DDP_PRECISION_COUNT)
        return DDP_ERR(DDP_FAIL, "internal error: ddp_ops_set_precision(%d) %s", (int)precision,
                       finalized ? "after ddp_ops_finalize" : "out of range");
    return DDP_OK;
}

#endif
