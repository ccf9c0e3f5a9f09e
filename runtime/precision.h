/*
 * precision.h: the precision of a net's products (`precision fp32|tf32|bf16`
 * in the train { } block, or --precision), and the one rounding rule that
 * gives it meaning on every target.
 *
 * What a precision changes: the operands of every product the library ops
 * make (ops.h: convolutions and matrix products, forward and backward) are
 * rounded to its significand before they are multiplied, the formats
 * tensor cores take: tf32 keeps 10 bits after the point, bf16 7. Everything else
 * stays FP32: the products of two rounded operands (exact in FP32, since
 * 11 + 11 and 8 + 8 bits fit its 24), their sums, the weights (the master
 * copy the optimizer updates), the activations, the gradients and the
 * buckets the ranks all-reduce. So a bf16 run is PyTorch's autocast to
 * bfloat16 where autocast matters most, less its rounding of the products'
 * results to bf16 (kept in FP32 here, as cuBLAS's FP32 outputs keep them).
 *
 * The rule (ddp_round_significand): round to nearest, ties to even;
 * subnormal inputs become zero of the same sign; infinities stay; a NaN
 * stays a NaN (quiet). It is what AVX-512 BF16's VCVTNEPS2BF16 does, so the
 * CPU build gives the same bits with the instruction and without it
 * (round_cpu.h), and the GPU build rounds by the same function before the
 * libraries see the operands (whose own conversions differ: cuBLAS keeps
 * subnormals, TF32 tensor cores may truncate), which then multiply exactly.
 *
 * Plain C, usable from C, from .cu files and from ddpc (which reads the
 * names alone).
 */
#ifndef DDPRT_PRECISION_H
#define DDPRT_PRECISION_H

#include <stdint.h>
#include <string.h>

#include "host_device.h"  // DDP_HOST_DEVICE

typedef enum { DDP_PRECISION_FP32, DDP_PRECISION_TF32, DDP_PRECISION_BF16 } DdpPrecision;

enum { DDP_PRECISION_COUNT = 3 };

/* Their names in .net files, on the command line and in messages, in enum order. */
static const char *const ddp_precision_names[DDP_PRECISION_COUNT] = {"fp32", "tf32", "bf16"};

static inline const char *ddp_precision_name(DdpPrecision p)
{
    return (unsigned)p < DDP_PRECISION_COUNT ? ddp_precision_names[p] : "?";
}

/* NAME's precision into *OUT; 0 for a name that is none. */
static inline int ddp_precision_parse(const char *name, DdpPrecision *out)
{
    for (int i = 0; i < DDP_PRECISION_COUNT; i++)
        if (strcmp(name, ddp_precision_names[i]) == 0) {
            *out = (DdpPrecision)i;
            return 1;
        }
    return 0;
}

/* The low bits of a float's 23-bit significand that P drops: 0, 13 or 16. */
static inline DDP_HOST_DEVICE int ddp_precision_dropped_bits(DdpPrecision p)
{
    return p == DDP_PRECISION_BF16 ? 16 : p == DDP_PRECISION_TF32 ? 13 : 0;
}

/* The bits of X rounded to a significand DROP bits shorter (1..22; 0 would
 * change odd values: callers skip fp32), by the rule above. On bits, so that no compiler or target may change it; in
 * selects rather than branches, so that loops over it vectorise. */
static inline DDP_HOST_DEVICE uint32_t ddp_round_significand(uint32_t x, int drop)
{
    const uint32_t exponent = x & 0x7f800000u, low = (1u << drop) - 1;
    /* Half an ulp less one, plus the kept last bit: ties go to even. A carry
     * out of the significand steps the exponent, to infinity at the top. */
    const uint32_t nearest = (x + (low >> 1) + ((x >> drop) & 1)) & ~low;
    const uint32_t special = (x & 0x007fffffu) ? (x | 0x00400000u) & ~low : x; /* NaN made quiet; infinity */
    return exponent == 0 ? x & 0x80000000u                                    /* zero, subnormal: signed zero */
                         : exponent == 0x7f800000u ? special : nearest;
}

#endif
