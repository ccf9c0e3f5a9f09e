/*
 * gemm_cpu.c: fixed-order matrix products (what and why in gemm_cpu.h).
 *
 * The classic shape of a fast product (Goto and van de Geijn, "Anatomy of
 * high-performance matrix multiplication", 2008), cut down to what the
 * promise allows:
 *  - op(A) is copied once per call into panels of MR rows, each stored
 *    column by column (MR floats per inner index p), zero rows past m;
 *  - op(B) is copied, NR columns at a time, into a panel stored row by row
 *    (NR floats per p), zero columns past n; or, when B is not transposed
 *    and the panel's NR columns all exist, read where it lies (the same
 *    values in the same order); or packed once for several products;
 *  - a micro-kernel keeps an MR x NR tile of C in vector registers and runs
 *    the whole inner dimension through it, p = 0 .. k-1, in runs of KB: one
 *    multiply-add per element and p, in the same order for every element of
 *    every tile;
 *  - the tile is then scaled by alpha and added to beta C, by one piece of
 *    code for full and edge tiles alike (an edge tile's missing rows and
 *    columns are computed on the zero padding and not stored), without
 *    fused multiply-adds; or, for alpha 1 and beta 0 in whole vectors, stored
 *    as it is, the same bits (1 * x is x for every x an operation can give).
 * The inner dimension is not split into separate calls, as BLAS does for
 * cache: C would be rounded at block boundaries that depend on cache sizes.
 * Blocks of A and B stay in the core's caches at the sizes the runtime has
 * (k up to a few thousand).
 *
 * The vectors are GCC's vector extension, so the same source builds
 * anywhere: with -march=native on x86-64 it becomes AVX2 and FMA code, and
 * `acc += a * b` a fused multiply-add when this file is compiled with
 * -ffp-contract=fast (the Makefile does; every element goes through the same
 * expression, so contraction changes no promise). The tiles are written
 * once (gemm_tiles.inc) and built twice: with vectors of 8 floats (4
 * doubles), and on x86-64 with 16 (8) for CPUs with AVX-512, chosen at run
 * time. An element is computed by the same operations in either, one lane of
 * a wider vector, so the two give the same bits: a program may run either
 * way on a machine and still agree with itself.
 */
#include "gemm_cpu.h"

#include "transpose_cpu.h"  // ddp_transpose8: transposed operands into panels

#include <pthread.h>  // pthread_once: the width, chosen once
#include <stdlib.h>   // getenv: DDP_CPU_VECTOR
#include <string.h>

/* The float tile: 6 rows by NV = 2 vectors, 12 accumulators, which with the
 * two B vectors and one broadcast fill x86-64's 16 AVX registers (and take
 * half of AVX-512's 32).
 *
 * The inner dimension is summed in runs of KB: each run in its own
 * accumulators, then added to the tile's total. One accumulator through a
 * long product (a conv's weight gradient sums 784 pixels of MNIST's first
 * layer) gathers rounding error in proportion to its length: 600 times
 * PyTorch's in tests/parity/pool_residual.net after 5 steps. In runs of 32,
 * the error grows with 32 plus the number of runs instead, and the order is
 * still fixed by k alone.
 *
 * The tile of the gradient sums: 6 rows by GNV = 2 vectors of doubles (the
 * panels of A hold 6 rows; gemm_tiles.inc's exact tile takes 3 or 6 of them). */
enum { MR = DDP_GEMM_TILE_ROWS, NV = 2, KB = 32, GMR = DDP_GEMM_TILE_ROWS, GNV = 2 };
/* The gradient sums' blocks of A: panels of about this many doubles in all
 * (256 KB, within any x86-64 core's L2), as many as fit, at least one. */
enum { EXACT_BLOCK_DOUBLES = 32768 };

/* The panels of A in one block of the gradient sums at K samples. */
static int exact_block_panels(int k)
{
    return k > 0 && EXACT_BLOCK_DOUBLES / ((size_t)GMR * k) > 1 ? (int)(EXACT_BLOCK_DOUBLES / ((size_t)GMR * k)) : 1;
}

int ddp_gradsum_exact_block_rows(int k)
{
    return exact_block_panels(k) * GMR;
}

/* The widest panels, which scratch is sized for: 2 vectors of 16 floats. */
enum { NR_MOST = 32, GNR_MOST = 16 };

static int round_up(int x, int to)
{
    return (x + to - 1) / to * to;
}

size_t ddp_sgemm_fixed_scratch(int m, int k)
{
    return ((size_t)round_up(m > 0 ? m : 1, MR) + NR_MOST) * (size_t)(k > 0 ? k : 1);
}

typedef float Float4 __attribute__((vector_size(4 * sizeof(float))));
typedef float Float4Store __attribute__((vector_size(4 * sizeof(float)), aligned(sizeof(float))));
typedef float Float2Store __attribute__((vector_size(2 * sizeof(float)), aligned(sizeof(float))));
typedef int Int8 __attribute__((vector_size(8 * sizeof(int))));

/* DST[0 .. COUNT) = V's first COUNT lanes (COUNT at most 8), stored from the
 * registers: a memcpy of a vector went through the stack and back in 8-byte
 * pieces, and the packing of panels took three times as long. */
static inline void store_lanes(float *dst, DdpFloat8 v, int count)
{
    if (count == 8) {
        *(DdpFloat8Mem *)dst = v;
        return;
    }
    Float4 rest = __builtin_shufflevector(v, v, 0, 1, 2, 3);
    if (count >= 4) {
        *(Float4Store *)dst = rest;
        rest = __builtin_shufflevector(v, v, 4, 5, 6, 7);
        dst += 4, count -= 4;
    }
    if (count >= 2) {
        *(Float2Store *)dst = __builtin_shufflevector(rest, rest, 0, 1);
        rest = __builtin_shufflevector(rest, rest, 2, 3, 2, 3);
        dst += 2, count -= 2;
    }
    if (count)
        *dst = rest[0];
}

/* PANEL[p][col] = ROW[col][p] for p < k and col < WIDTH, zero from column
 * COUNT on: a transposed operand's panel, rows of the operand in, panel rows
 * out. ROW has round_up(WIDTH, 8) entries, the ones from COUNT on readable
 * (they are masked to zero). Blocks of 8 x 8 floats go through the
 * registers' transpose; the rest, one float at a time. */
static void gather_transposed(const float *const row[], int count, int width, int k, float *panel)
{
    for (int c0 = 0; c0 < width; c0 += 8) {
        const int store = width - c0 < 8 ? width - c0 : 8;
        Int8 keep;
        for (int v = 0; v < 8; v++)
            keep[v] = c0 + v < count ? -1 : 0;
        int p = 0;
        for (; p + 8 <= k; p += 8) {
            DdpFloat8 in[8], out[8];
            for (int v = 0; v < 8; v++)
                in[v] = *(const DdpFloat8Mem *)(row[c0 + v] + p);
            ddp_transpose8(in, out);
            for (int q = 0; q < 8; q++)
                store_lanes(panel + (size_t)(p + q) * width + c0, (DdpFloat8)((Int8)out[q] & keep), store);
        }
        for (; p < k; p++)
            for (int v = 0; v < store; v++)
                panel[(size_t)p * width + c0 + v] = c0 + v < count ? row[c0 + v][p] : 0.0f;
    }
}

/* Rows [i0, i0 + MR) of op(A) into PANEL, MR floats per p; zero past M. */
static void pack_a_panel(int trans_a, const float *a, int lda, int m, int k, int i0, float *panel)
{
    const int rows = m - i0 < MR ? m - i0 : MR;
    if (trans_a) { /* op(A)[i][p] = a[p][i]: row p of A holds the MR floats */
        if (rows == MR) /* a constant size: moves, not a call nor a float at a time */
            for (int p = 0; p < k; p++)
                memcpy(panel + (size_t)p * MR, a + (size_t)p * lda + i0, MR * sizeof(float));
        else
            for (int p = 0; p < k; p++) {
                const float *src = a + (size_t)p * lda + i0;
                for (int r = 0; r < MR; r++)
                    panel[(size_t)p * MR + r] = r < rows ? src[r] : 0.0f;
            }
        return;
    }
    const float *row[8]; /* MR rows, rounded up to the transpose's 8 */
    for (int r = 0; r < 8; r++)
        row[r] = a + (size_t)(i0 + (r < rows ? r : 0)) * lda;
    gather_transposed(row, rows, MR, k, panel);
}

/* Columns [j0, j0 + WIDTH) of op(B) = B^T (B is n x k, row stride LDB) into
 * PANEL, WIDTH floats per p; zero past N. WIDTH is at most NR_MOST. */
static void pack_transposed_b_panel(const float *b, int ldb, int n, int k, int j0, int width, float *panel)
{
    const int cols = n - j0 < width ? n - j0 : width;
    const float *row[NR_MOST];
    for (int col = 0; col < width; col++)
        row[col] = b + (size_t)(j0 + (col < cols ? col : 0)) * ldb;
    gather_transposed(row, cols, width, k, panel);
}

/* MOST[p] = the largest |x| of row P of X (COLS values, rows LDX apart), for
 * the K rows (samples): the bounds of a sample's products in the gradient
 * sums (NaN where a row has a NaN). */
static void samples_largest(const float *x, int ldx, int cols, int k, double *most)
{
    for (int p = 0; p < k; p++)
        most[p] = ddp_largest_magnitude(x + (size_t)p * ldx, cols);
}

/* The gradient sums' order of the K samples (rows of A and B): ORDER[0 ..
 * the count returned) = the samples p whose products are all below
 * LO_ONLY_BELOW by their bounds (A_MOST[p] * B_MOST[p], the largest |a| and
 * |b| of the sample's rows, exact: two floats' product; a NaN bound fails),
 * then the others, each in order. The tiles deposit the first in LO alone
 * (gemm_tiles.inc's exact_tile). */
static int exact_samples_order(int k, const double *a_most, const double *b_most, double lo_only_below, int *order)
{
    int small = 0;
    for (int p = 0; p < k; p++)
        if (a_most[p] * b_most[p] < lo_only_below)
            order[small++] = p;
    int other = small;
    for (int p = 0; p < k; p++)
        if (!(a_most[p] * b_most[p] < lo_only_below))
            order[other++] = p;
    return small;
}

/* PANEL[q][col] = X[ORDER[q]][j0 + col] as doubles, for q < K and col <
 * WIDTH, zero from column N - J0 on: a panel of A or of B, its samples in the
 * gradient sums' order, so that the tiles read them in a run (ORDER NULL:
 * in their own order). */
static void pack_double_panel(const float *x, int ldx, int n, int k, int j0, int width, const int *order,
                              double *panel)
{
    const int cols = n - j0 < width ? n - j0 : width;
    for (int q = 0; q < k; q++) {
        const float *src = x + (size_t)(order ? order[q] : q) * ldx + j0;
        double *dst = panel + (size_t)q * width;
        for (int col = 0; col < cols; col++)
            dst[col] = src[col];
        for (int col = cols; col < width; col++)
            dst[col] = 0.0;
    }
}

/* ---- the sparse gradient sums' lists ------------------------------------------ */

/* The sparse gradient sums' panels of B are 4 vectors of doubles wide
 * (gemm_tiles.inc: SNR), at most SPARSE_NR_MOST doubles a sample: 32 KB at
 * 128 samples with 16-float vectors, 16 KB with 8. A's columns are listed
 * in blocks of ddp_gradsum_exact_block_rows, as the dense tiles take them
 * (their lists take 12 bytes a nonzero, at most 1.5 times the dense panels'
 * 256 KB); then B's panels, packed one at a time, meet every list of the
 * block. (B packed whole, once, went through memory: slower than the dense
 * tiles on mlp.net's first layer split among 2 threads.) */
enum { SPARSE_NR_MOST = 32 };

/* A sparse gradient sum's scratch (gradsum_sparse): a panel of B, each
 * sample's largest |b|, and a block of A's columns as lists (K values and
 * samples a column, and its counts: sparse_row_list's). */
typedef struct {
    double *b_panel, *b_most, *vals;
    int *idx, *small, *large_from;
    int block; /* the columns listed at a time */
} SparseScratch;

/* The parts of SCRATCH (NULL: none) for M columns of A and K samples; returns
 * the doubles they take. */
static size_t sparse_scratch(double *scratch, int m, int k, SparseScratch *s)
{
    const size_t kk = (size_t)(k > 0 ? k : 1);
    const int most = ddp_gradsum_exact_block_rows(k);
    s->block = m > 0 && m < most ? m : most;
    const size_t block = (size_t)s->block, listed = block * kk;
    s->b_panel = scratch;
    s->b_most = scratch ? s->b_panel + (size_t)SPARSE_NR_MOST * kk : NULL;
    s->vals = scratch ? s->b_most + kk : NULL;
    s->idx = scratch ? (int *)(s->vals + listed) : NULL;
    s->small = scratch ? s->idx + listed : NULL;
    s->large_from = scratch ? s->small + block : NULL;
    /* the ints in half as many doubles' room, rounded up */
    return (size_t)SPARSE_NR_MOST * kk + kk + listed + (listed + 2 * block + 1) / 2;
}

/* A column of A (A_COL[p * LDA], p < K) as the list of its nonzero values and
 * their samples (VALS, IDX): from the front, the first *SMALL, whose products
 * with their sample's row of B are all below LO_ONLY_BELOW by B_MOST (so LO
 * alone takes them); from the back, [*LARGE_FROM, K), the others. Without
 * branches, which the zeros (a ReLU's, dropout's) would make unpredictable:
 * every value is written to the slot its kind takes next, and counted only
 * when it is not zero (a slot written and not counted is free: at sample p,
 * at most p slots are taken, so the two ends never meet). */
static void sparse_row_list(const float *a_col, int lda, int k, const double *b_most, double lo_only_below,
                            double *vals, int *idx, int *small_out, int *large_from_out)
{
    int small = 0, large_from = k;
    for (int p = 0; p < k; p++) {
        const float v = a_col[(size_t)p * lda];
        const int is_small = fabs((double)v) * b_most[p] < lo_only_below, kept = v != 0.0f;
        const int slot = is_small ? small : large_from - 1;
        vals[slot] = v;
        idx[slot] = p;
        small += kept & is_small;
        large_from -= kept & !is_small;
    }
    *small_out = small;
    *large_from_out = large_from;
}

/* ---- the tiles, once per vector width ---------------------------------------- */

/* X stays in a register: an empty asm that takes and gives it back there.
 * The exact sums' loop over small parts needs it for B's vectors: GCC folds
 * their load into each row's multiply-add, 3 loads of each where 1 will do,
 * and the loop waited on loads (512 x 784 x 128, one AVX2 thread, best of
 * 30: 5.5-5.9 ms folded, 4.1-4.5 ms kept; the same bits). Only where the
 * vectors have registers (x86 with AVX); elsewhere it does nothing. */
#if defined(__x86_64__) && defined(__AVX__)
#define KEEP_IN_REGISTER(x) __asm__("" : "+v"(x))
#else
#define KEEP_IN_REGISTER(x) ((void)0)
#endif

#define EIGHT_TIMES(x) x, x, x, x, x, x, x, x

/* 8 floats (AVX2), everywhere. */
#define VL 8
#define GVL 4
#define WIDTH(name) name##_8
#define EVERY_LANE_F(x) EIGHT_TIMES(x)
#define EVERY_LANE_D(x) x, x, x, x
#define INTERLEAVE_FIRST_D 0, 4, 1, 5
#define INTERLEAVE_SECOND_D 2, 6, 3, 7
#include "gemm_tiles.inc"
#undef VL
#undef GVL
#undef WIDTH
#undef EVERY_LANE_F
#undef EVERY_LANE_D
#undef INTERLEAVE_FIRST_D
#undef INTERLEAVE_SECOND_D

/* 16 floats (AVX-512), where they are built (gemm_cpu.h:
 * DDP_CPU_WIDE_VECTORS), used where the CPU has them: twice the
 * multiply-adds per instruction, the same bits. Valgrind's CPU has no
 * AVX-512, so under make memcheck the 8-float tiles run. */
#if DDP_CPU_WIDE_VECTORS
DDP_CPU_WIDE_BEGIN
#define VL 16
#define GVL 8
#define WIDTH(name) name##_16
#define EVERY_LANE_F(x) EIGHT_TIMES(x), EIGHT_TIMES(x)
#define EVERY_LANE_D(x) EIGHT_TIMES(x)
#define INTERLEAVE_FIRST_D 0, 8, 1, 9, 2, 10, 3, 11
#define INTERLEAVE_SECOND_D 4, 12, 5, 13, 6, 14, 7, 15
#include "gemm_tiles.inc"
#undef VL
#undef GVL
#undef WIDTH
#undef EVERY_LANE_F
#undef EVERY_LANE_D
#undef INTERLEAVE_FIRST_D
#undef INTERLEAVE_SECOND_D
DDP_CPU_WIDE_END
#endif

/* ---- which width -------------------------------------------------------------- */

static pthread_once_t width_once = PTHREAD_ONCE_INIT;
static int wide; /* the 16-float tiles; set once, by choose_width */

/* Whether this CPU can run the 16-float tiles. */
static int cpu_runs_wide_tiles(void)
{
#if DDP_CPU_WIDE_VECTORS
    return DDP_CPU_RUNS_WIDE();
#else
    return 0;
#endif
}

static void choose_width(void)
{
    const char *asked = getenv("DDP_CPU_VECTOR");
    wide = !(asked && strcmp(asked, "8") == 0) && cpu_runs_wide_tiles();
}

int ddp_gemm_cpu_wide(void)
{
    pthread_once(&width_once, choose_width);
    return wide;
}

int ddp_gemm_cpu_set_wide(int on)
{
    pthread_once(&width_once, choose_width);
    wide = on && cpu_runs_wide_tiles();
    return wide;
}

/* Whether a float product of N columns takes the 16-float tiles: where the
 * CPU runs them and N passes one 8-float panel (NV vectors of 8), which
 * the 16-float panel would leave half padding. The same bits either way.
 * (resnet.net's 16 -> 16 3x3 convs at 28x28, whose Winograd products have 16
 * columns, one thread, a batch of 64: 2.4 ms forward and 2.55 backward
 * data, against 3.0 and 3.2 when they took the 16-float tiles.) */
#if DDP_CPU_WIDE_VECTORS
static int float_tiles_wide(int n)
{
    return ddp_gemm_cpu_wide() && n > 8 * NV;
}
#endif

void ddp_sgemm_fixed(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc, float *scratch)
{
#if DDP_CPU_WIDE_VECTORS
    if (float_tiles_wide(n)) {
        sgemm_16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, NULL, beta, c, ldc, scratch);
        return;
    }
#endif
    sgemm_8(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, NULL, beta, c, ldc, scratch);
}

size_t ddp_sgemm_fixed_packed_b_floats(int n, int k)
{
    return (size_t)round_up(n > 0 ? n : 1, NR_MOST) * (size_t)(k > 0 ? k : 1);
}

void ddp_sgemm_fixed_pack_b(int trans_b, int n, int k, const float *b, int ldb, float *packed)
{
#if DDP_CPU_WIDE_VECTORS
    if (float_tiles_wide(n)) {
        pack_b_16(trans_b, n, k, b, ldb, packed);
        return;
    }
#endif
    pack_b_8(trans_b, n, k, b, ldb, packed);
}

void ddp_sgemm_fixed_packed(int trans_a, int m, int n, int k, float alpha, const float *a, int lda,
                            const float *packed_b, float beta, float *c, int ldc, float *scratch)
{
#if DDP_CPU_WIDE_VECTORS
    if (float_tiles_wide(n)) {
        sgemm_16(trans_a, 0, m, n, k, alpha, a, lda, NULL, 0, packed_b, beta, c, ldc, scratch);
        return;
    }
#endif
    sgemm_8(trans_a, 0, m, n, k, alpha, a, lda, NULL, 0, packed_b, beta, c, ldc, scratch);
}

/* ---- the gradient sums: dense or sparse ---------------------------------------- */

size_t ddp_gradsum_exact_scratch(int m, int k)
{
    const size_t rows = (size_t)round_up(m > 0 ? m : 1, GMR);
    /* the dense tiles: the packed panels of A and of one B panel, then a
     * bound per sample of B and of a block of A, and the samples' order (k
     * ints, in the room of k doubles: gradsum_exact); or the sparse way's */
    const size_t dense = (rows + GNR_MOST + 3) * (size_t)(k > 0 ? k : 1);
    SparseScratch parts;
    const size_t sparse = sparse_scratch(NULL, m, k, &parts);
    return dense > sparse ? dense : sparse;
}

/* The share of nonzero values among X's ROWS x COLS (row stride LDX). */
static double nonzero_share(const float *x, int ldx, int rows, int cols)
{
    long count = 0;
    for (int p = 0; p < rows; p++)
        for (int j = 0; j < cols; j++)
            count += x[(size_t)p * ldx + j] != 0.0f;
    return rows > 0 && cols > 0 ? (double)count / ((double)rows * cols) : 0.0;
}

/* Where at most this share of A's values are nonzero, A's columns are
 * listed (the sparse way); otherwise the dense tiles run. Which way runs
 * changes no bit, only the time. Measured (one thread, Zen 4, best of 30
 * calls, ms, dense / lists, with 16-float vectors and then 8), on values
 * whose products are mostly below lo_only_below, as a gradient's are:
 *  - 84 x 784 x 128 (a thread's share of mlp.net's first layer): A all
 *    nonzero, 0.49 / 0.73 and 0.47 / 0.93; 3 in 4 nonzero, 0.54 / 0.56 and
 *    0.71 / 0.75; 3 in 5 nonzero, 0.50 / 0.46 and 0.47 / 0.43; half, 0.50 /
 *    0.40 and 0.78 / 0.57;
 *  - 64 x 1024 x 64 (a share of mnist.net's first linear layer): all
 *    nonzero, 0.29 / 0.33 and 0.29 / 0.44; 3 in 5 nonzero, 0.29 / 0.23 and
 *    0.28 / 0.24.
 * The machine was shared: the dense tiles, whose work the zeros do not
 * change, took 0.47 to 0.78 ms on the first shape. In training, mlp.net's
 * first layer had 45% to 57% of its gradient nonzero (a ReLU's and
 * dropout's), mnist.net's first linear layer 55% to 64%. Listing B instead,
 * where B has the zeros, was slower than the dense tiles: C's elements then
 * come out a column at a time, and B's columns outnumber A's. */
#define SPARSE_AT_MOST (2.0 / 3.0)

int ddp_gradsum_exact_lists(int m, int k, const float *a, int lda)
{
    return nonzero_share(a, lda, k, m) <= SPARSE_AT_MOST;
}

void ddp_gradsum_exact(int m, int n, int k, const float *a, int lda, const float *b, int ldb, int accumulate,
                       DdpExact *c, int ldc, const DdpExactWindow *w, double *scratch)
{
    const int sixteen = ddp_gemm_cpu_wide();
    (void)sixteen; /* (unused where there are no 16-float tiles) */
    if (ddp_gradsum_exact_lists(m, k, a, lda)) {
#if DDP_CPU_WIDE_VECTORS
        if (sixteen) {
            gradsum_sparse_16(m, n, k, a, lda, b, ldb, accumulate, c, ldc, w, scratch);
            return;
        }
#endif
        gradsum_sparse_8(m, n, k, a, lda, b, ldb, accumulate, c, ldc, w, scratch);
        return;
    }
#if DDP_CPU_WIDE_VECTORS
    if (sixteen) {
        gradsum_exact_16(m, n, k, a, lda, b, ldb, accumulate, c, ldc, w, scratch);
        return;
    }
#endif
    gradsum_exact_8(m, n, k, a, lda, b, ldb, accumulate, c, ldc, w, scratch);
}
