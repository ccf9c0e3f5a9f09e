/*
 * round_cpu.h: a CPU build's rounding of product operands to the run's
 * precision (precision.h), a whole array at a time, for ops_cpu.c.
 *
 * bf16 takes AVX-512 BF16's VCVTNEPS2BF16 where the CPU has it (16 floats
 * an instruction) and ddp_round_significand's bit arithmetic elsewhere and
 * for tf32; the two give the same bits (test_precision.c checks), so the
 * CPU build's bits do not depend on which the machine runs.
 */
#ifndef DDPRT_ROUND_CPU_H
#define DDPRT_ROUND_CPU_H

#include <stddef.h>

#include "precision.h"  // DdpPrecision

/* DST[i] = SRC[i] rounded to P's significand, for I below N, on up to
 * NTHREADS OpenMP threads (big arrays split; each element alone, so no bit
 * depends on the split). P fp32 copies. DST and SRC may be the same. */
void ddp_round_operands(DdpPrecision p, const float *src, float *dst, size_t n, int nthreads);

/* Whether ddp_round_operands takes bf16 through AVX-512 BF16 here. */
int ddp_round_bf16_has_instruction(void);

/* For the tests: the two ways of rounding to bf16 on their own, on one
 * thread. The instruction's returns 0, doing nothing, where the CPU lacks it. */
int ddp_round_bf16_instruction(const float *src, float *dst, size_t n);
void ddp_round_bits(DdpPrecision p, const float *src, float *dst, size_t n);

#endif
