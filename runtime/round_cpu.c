/*
 * round_cpu.c: product operands rounded to tf32 or bf16 on CPUs (round_cpu.h).
 *
 * The arrays are the convs' and linear layers' inputs, weights and output
 * gradients, a few MB a step: memory-bound work, split into big chunks
 * among the threads, in vectors within each.
 */
#include "round_cpu.h"

#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>  // parallel for
#endif

void ddp_round_bits(DdpPrecision p, const float *src, float *dst, size_t n)
{
    const int drop = ddp_precision_dropped_bits(p);
    if (!drop) {
        if (dst != src)
            memmove(dst, src, n * sizeof *dst);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        u = ddp_round_significand(u, drop);
        memcpy(&dst[i], &u, sizeof u);
    }
}

/* GCC 10 and later know AVX-512 BF16's intrinsics and its CPU feature name. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#define HAVE_BF16_INSTRUCTION 1
#include <immintrin.h>

__attribute__((target("avx512f,avx512bf16"))) static void bf16_instruction(const float *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256bh half = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
        /* a bf16 is a float's upper half: widen, shift into place */
        __m512i wide = _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)half), 16);
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(wide));
    }
    if (i < n) {
        const __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
        __m256bh half = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(tail, src + i));
        __m512i wide = _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)half), 16);
        _mm512_mask_storeu_ps(dst + i, tail, _mm512_castsi512_ps(wide));
    }
}
#else
#define HAVE_BF16_INSTRUCTION 0
#endif

int ddp_round_bf16_has_instruction(void)
{
#if HAVE_BF16_INSTRUCTION
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

int ddp_round_bf16_instruction(const float *src, float *dst, size_t n)
{
#if HAVE_BF16_INSTRUCTION
    if (ddp_round_bf16_has_instruction()) {
        bf16_instruction(src, dst, n);
        return 1;
    }
#endif
    (void)src, (void)dst, (void)n;
    return 0;
}

/* Chunks of 64 KiB: enough to amortise a thread's start, and small layers
 * (a linear layer's weights) stay on one thread. */
enum { CHUNK = 16384 };

void ddp_round_operands(DdpPrecision p, const float *src, float *dst, size_t n, int nthreads)
{
    const int instruction = p == DDP_PRECISION_BF16 && ddp_round_bf16_has_instruction();
    const long chunks = (long)((n + CHUNK - 1) / CHUNK);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nthreads) if (chunks > 1)
#else
    (void)nthreads;
#endif
    for (long c = 0; c < chunks; c++) {
        const size_t at = (size_t)c * CHUNK, len = n - at < CHUNK ? n - at : CHUNK;
        if (!instruction || !ddp_round_bf16_instruction(src + at, dst + at, len))
            ddp_round_bits(p, src + at, dst + at, len);
    }
}
