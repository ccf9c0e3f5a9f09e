/*
 * ops_sizes.h: the floats a library call's operands span, for the copies
 * both ops implementations round them into (precision.h): a conv's input,
 * output (or their gradients) and weights at batch N, and a row-major
 * matrix with a row stride. Inline, so that the two ops objects keep
 * exactly the same symbols.
 */
#ifndef DDPRT_OPS_SIZES_H
#define DDPRT_OPS_SIZES_H

#include <stddef.h>

#include "ops.h"  // DdpConvShape

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

#endif
