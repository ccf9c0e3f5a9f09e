/*
 * gemm_cpu.h: the CPU build's own matrix products, for ops_cpu.c and
 * winograd_cpu.c. They exist for one promise that no BLAS makes: every
 * element of a result is computed by the same instructions in the same order,
 * whatever the matrix sizes, the element's place in them, the thread count or
 * the machine's BLAS kernel.
 *
 * An element C[i][j] is a sum over the inner dimension p = 0, 1, ..., k-1 of
 * a[i][p] * b[p][j], in runs of 32 p's: each run one chain of acc = acc +
 * a * b (one fused multiply-add where the CPU has them, one multiply and one
 * add where it does not: chosen when gemm_cpu.c is compiled, never at run
 * time), the runs' sums added in order. Then alpha and beta apply, as BLAS
 * does.
 * Tiles at the edges are computed as full tiles on zero-padded copies, so
 * they run the same code as the rest. Hence:
 *  - a linear layer's output row for one sample is the same bits in a batch
 *    of 1, 16 or 1000, and whichever rank computes it;
 *  - how a product is split among threads changes no bit;
 *  - nothing depends on OpenBLAS's choice of kernel, which varies between
 *    machines and with OPENBLAS_CORETYPE.
 * BLAS libraries promise none of this: their kernels sum in orders of their
 * own, change kernels by matrix size (OpenBLAS's small-matrix kernels) and
 * by CPU, and treat edge rows with other code. tests/unit/test_ops.c checks
 * these promises, and README.md ("Why the CPU build has its own products")
 * says what they cost.
 *
 * Two products:
 *  - ddp_sgemm_fixed: C = alpha op(A) op(B) + beta C in float, as sgemm;
 *  - ddp_gradsum_exact: C += A^T B, where A and B are floats whose rows are
 *    samples: every product of two floats (exact in double) is one part of
 *    an order-free sum (exact_sum.h), for a linear layer's weight gradient;
 *    where A (the layer's output gradient) has many zeros, only its nonzero
 *    values' products (gemm_cpu.c: SPARSE_AT_MOST).
 *
 * Each call runs on the calling thread, in the caller's SCRATCH (the sizes
 * below), so the callers split big products into tasks themselves.
 */
#ifndef DDPRT_GEMM_CPU_H
#define DDPRT_GEMM_CPU_H

#include <stddef.h>

#include "exact_sum.h"  // DdpExact, DdpExactWindow: ddp_gradsum_exact

/* The rows of C a tile computes: callers that split a product count its
 * rows in them, so that every block is whole tiles. */
enum { DDP_GEMM_TILE_ROWS = 6 };

/* Floats of scratch ddp_sgemm_fixed needs for op(A) of M x K (its packed
 * copy, and one packed panel of op(B)), at either vector width. */
size_t ddp_sgemm_fixed_scratch(int m, int k);

/* C (m x n, row stride ldc) = alpha * op(A) * op(B) + beta * C, row-major:
 * op(A) is m x k (A^T if trans_a), op(B) is k x n (B^T if trans_b). beta 0
 * never reads C. */
void ddp_sgemm_fixed(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc, float *scratch);

/* The same product with op(B) packed beforehand, for several products that
 * share B (Winograd's transformed weights): the floats the packed copy of a
 * K x N op(B) takes; the packing; and the product, with the same bits as
 * ddp_sgemm_fixed's. A copy is packed for the products' vector width
 * (ddp_gemm_cpu_wide), so pack and multiply at the same width. */
size_t ddp_sgemm_fixed_packed_b_floats(int n, int k);
void ddp_sgemm_fixed_pack_b(int trans_b, int n, int k, const float *b, int ldb, float *packed);
void ddp_sgemm_fixed_packed(int trans_a, int m, int n, int k, float alpha, const float *a, int lda,
                            const float *packed_b, float beta, float *c, int ldc, float *scratch);

/* Doubles of scratch ddp_gradsum_exact needs for M columns of A and K rows
 * (enough for any call with fewer columns). */
size_t ddp_gradsum_exact_scratch(int m, int k);

/* C (m x n, row stride ldc) = (ACCUMULATE ? C : the empty sum) + A^T B as
 * order-free sums (exact_sum.h) in window W: every product a[p][i] * b[p][j]
 * (exact in double) is one part. The caller makes sure that every product
 * is finite and below W->limit. */
void ddp_gradsum_exact(int m, int n, int k, const float *a, int lda, const float *b, int ldb, int accumulate,
                       DdpExact *c, int ldc, const DdpExactWindow *w, double *scratch);

/* The columns of A that ddp_gradsum_exact takes as one block at K samples:
 * the dense tiles order the samples (small parts first) once per block, by
 * the block's bounds; the sparse way lists a block's nonzeros at a time (for
 * the tests that cross blocks). */
int ddp_gradsum_exact_block_rows(int k);

/* Whether ddp_gradsum_exact takes these M columns of A (K rows, stride LDA)
 * as lists of their nonzero values rather than in the dense tiles: the same
 * bits either way, so the tests ask which way their data takes. */
int ddp_gradsum_exact_lists(int m, int k, const float *a, int lda);

/* Where 16-float vectors (AVX-512) are built besides the 8-float ones: on
 * x86-64, by GCC (clang knows neither the pragmas nor, without them, the
 * instructions). Code between DDP_CPU_WIDE_BEGIN and DDP_CPU_WIDE_END is
 * compiled for AVX-512 and FMA, and runs only where ddp_gemm_cpu_wide()
 * says so: where the CPU has what it was compiled for,
 * DDP_CPU_RUNS_WIDE(). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DDP_CPU_WIDE_VECTORS 1
#define DDP_CPU_WIDE_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,fma\")")
#define DDP_CPU_WIDE_END _Pragma("GCC pop_options")
#define DDP_CPU_RUNS_WIDE() (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"))
#else
#define DDP_CPU_WIDE_VECTORS 0
#endif

/* Whether the products, and winograd_cpu.c's tile transforms and weight
 * gradient sums, run on 16-float vectors (AVX-512, where the CPU has it)
 * rather than 8-float ones: the same bits either way, twice the
 * multiply-adds per instruction. Chosen at the first call. */
int ddp_gemm_cpu_wide(void);
/* For the tests that compare the two: asks for the 16-float vectors (ON) or
 * the 8-float ones; returns what the products now use (0 where the CPU has
 * no AVX-512). Not while a product runs, nor between packing a B and its
 * products. DDP_CPU_VECTOR=8 in the environment makes the first choice 8. */
int ddp_gemm_cpu_set_wide(int on);

#endif
