/*
 * gemm_cpu.c: fixed-order matrix products (what and why in gemm_cpu.h).
 *
 * The classic shape of a fast product (Goto and van de Geijn, "Anatomy of
 * high-performance matrix multiplication", 2008), cut down to what the
 * promise allows:
 *  - op(A) is copied once per call into panels of MR rows, each stored
 *    column by column (MR floats per inner index p), zero rows past m;
 *  - op(B) is copied, NR columns at a time, into a panel stored row by row
 *    (NR floats per p), zero columns past n;
 *  - a micro-kernel keeps an MR x NR tile of C in vector registers and runs
 *    the whole inner dimension through it, p = 0 .. k-1, in runs of KB: one
 *    multiply-add per element and p, in the same order for every element of
 *    every tile;
 *  - the tile is then scaled by alpha and added to beta C, by one piece of
 *    code for full and edge tiles alike (an edge tile's missing rows and
 *    columns are computed on the zero padding and not stored).
 * The inner dimension is not split into separate calls, as BLAS does for
 * cache: C would be rounded at block boundaries that depend on cache sizes.
 * Blocks of A and B stay in the core's caches at the sizes the runtime has
 * (k up to a few thousand).
 *
 * The vectors are GCC's vector extension, 8 floats or 4 doubles, so the
 * same source builds anywhere: with -march=native on x86-64 it becomes AVX2
 * and FMA code, and `acc += a * b` a fused multiply-add when this file is
 * compiled with -ffp-contract=fast (the Makefile does; every element goes
 * through the same expression, so contraction changes no promise).
 */
#include "gemm_cpu.h"

#include <string.h>

/* The float tile: 6 rows by 2 vectors of 8, 12 accumulators, which with the
 * two B vectors and one broadcast fill x86-64's 16 AVX registers.
 *
 * The inner dimension is summed in runs of KB: each run in its own
 * accumulators, then added to the tile's total. One accumulator through a
 * long product (a conv's weight gradient sums 784 pixels of MNIST's first
 * layer) gathers rounding error in proportion to its length: 600 times
 * PyTorch's in tests/parity/pool_residual.net after 5 steps. In runs of 32,
 * the error grows with 32 plus the number of runs instead, and the order is
 * still fixed by k alone. */
enum { MR = 6, VL = 8, NV = 2, NR = VL * NV, KB = 32 };
typedef float Vf __attribute__((vector_size(VL * sizeof(float))));
/* The same vector at any float's alignment, for loads from the panels: a
 * memcpy into a Vf array went through the stack, at half the speed. */
typedef float VfLoad __attribute__((vector_size(VL * sizeof(float)), aligned(sizeof(float))));

/* The double tile of the gradient sums: 6 rows by 2 vectors of 4. */
enum { GMR = 6, GVL = 4, GNV = 2, GNR = GVL * GNV };
typedef double Vd __attribute__((vector_size(GVL * sizeof(double))));
typedef double VdLoad __attribute__((vector_size(GVL * sizeof(double)), aligned(sizeof(double))));

static int round_up(int x, int to)
{
    return (x + to - 1) / to * to;
}

static Vf splat_f(float x)
{
    return (Vf){x, x, x, x, x, x, x, x};
}

static Vd splat_d(double x)
{
    return (Vd){x, x, x, x};
}

/* ---- float: C = alpha op(A) op(B) + beta C -------------------------------- */

size_t ddp_sgemm_fixed_scratch(int m, int k)
{
    return ((size_t)round_up(m > 0 ? m : 1, MR) + NR) * (size_t)(k > 0 ? k : 1);
}

/* Rows [i0, i0 + MR) of op(A) into PANEL, MR floats per p; zero past M. */
static void pack_a_panel(int trans_a, const float *a, int lda, int m, int k, int i0, float *panel)
{
    const int rows = m - i0 < MR ? m - i0 : MR;
    for (int r = 0; r < MR; r++) {
        float *dst = panel + r;
        if (r >= rows)
            for (int p = 0; p < k; p++)
                dst[(size_t)p * MR] = 0.0f;
        else if (trans_a) /* op(A)[i][p] = a[p][i] */
            for (int p = 0; p < k; p++)
                dst[(size_t)p * MR] = a[(size_t)p * lda + i0 + r];
        else
            for (int p = 0; p < k; p++)
                dst[(size_t)p * MR] = a[(size_t)(i0 + r) * lda + p];
    }
}

/* Columns [j0, j0 + NR) of op(B) into PANEL, NR floats per p; zero past N. */
static void pack_b_panel(int trans_b, const float *b, int ldb, int n, int k, int j0, float *panel)
{
    const int cols = n - j0 < NR ? n - j0 : NR;
    if (!trans_b) {
        for (int p = 0; p < k; p++) {
            float *dst = panel + (size_t)p * NR;
            memcpy(dst, b + (size_t)p * ldb + j0, (size_t)cols * sizeof *dst);
            memset(dst + cols, 0, (size_t)(NR - cols) * sizeof *dst);
        }
        return;
    }
    for (int col = 0; col < NR; col++) { /* op(B)[p][j] = b[j][p] */
        float *dst = panel + col;
        if (col < cols) {
            const float *src = b + (size_t)(j0 + col) * ldb;
            for (int p = 0; p < k; p++)
                dst[(size_t)p * NR] = src[p];
        } else
            for (int p = 0; p < k; p++)
                dst[(size_t)p * NR] = 0.0f;
    }
}

/* ACC = A panel . B panel over p = 0 .. k-1: the sum of the sums of each
 * run of KB inner indices, each run in order and the runs in order. */
static void float_tile(int k, const float *ap, const float *bp, Vf acc[MR][NV])
{
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++)
            acc[r][v] = splat_f(0.0f);
    for (int p0 = 0; p0 < k; p0 += KB) {
        Vf c[MR][NV];
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++)
                c[r][v] = splat_f(0.0f);
        const int end = k - p0 < KB ? k : p0 + KB;
        for (int p = p0; p < end; p++, ap += MR, bp += NR) {
            Vf b[NV];
            for (int v = 0; v < NV; v++)
                b[v] = *(const VfLoad *)(bp + v * VL);
            for (int r = 0; r < MR; r++) {
                const Vf a = splat_f(ap[r]);
                for (int v = 0; v < NV; v++)
                    c[r][v] += a * b[v];
            }
        }
        for (int r = 0; r < MR; r++)
            for (int v = 0; v < NV; v++)
                acc[r][v] += c[r][v];
    }
}

/* C's ROWS x COLS corner (at most MR x NR) = alpha ACC + beta C. Full rows
 * and partial ones pass through the same vector expression. */
static void finish_float_tile(Vf acc[MR][NV], int rows, int cols, float alpha, float beta, float *c, int ldc)
{
    const Vf va = splat_f(alpha), vb = splat_f(beta);
    for (int r = 0; r < rows; r++) {
        float *row = c + (size_t)r * ldc;
        Vf old[NV], out[NV];
        if (beta != 0.0f) {
            if (cols == NR)
                memcpy(old, row, sizeof old);
            else {
                memset(old, 0, sizeof old);
                memcpy(old, row, (size_t)cols * sizeof *row);
            }
        }
        for (int v = 0; v < NV; v++)
            out[v] = beta == 0.0f ? va * acc[r][v] : va * acc[r][v] + vb * old[v];
        if (cols == NR)
            memcpy(row, out, sizeof out);
        else
            memcpy(row, out, (size_t)cols * sizeof *row);
    }
}

void ddp_sgemm_fixed(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc, float *scratch)
{
    if (m <= 0 || n <= 0)
        return;
    if (k < 0)
        k = 0;
    const int panels = (m + MR - 1) / MR;
    float *apack = scratch, *bpack = scratch + (size_t)panels * MR * k;
    for (int i = 0; i < panels; i++)
        pack_a_panel(trans_a, a, lda, m, k, i * MR, apack + (size_t)i * MR * k);
    for (int j0 = 0; j0 < n; j0 += NR) {
        pack_b_panel(trans_b, b, ldb, n, k, j0, bpack);
        const int cols = n - j0 < NR ? n - j0 : NR;
        for (int i = 0; i < panels; i++) {
            Vf acc[MR][NV];
            float_tile(k, apack + (size_t)i * MR * k, bpack, acc);
            const int rows = m - i * MR < MR ? m - i * MR : MR;
            finish_float_tile(acc, rows, cols, alpha, beta, c + (size_t)i * MR * ldc + j0, ldc);
        }
    }
}

/* ---- double: C = beta C + A^T B over rows of floats ------------------------- */

size_t ddp_gradsum_fixed_scratch(int m, int k)
{
    return ((size_t)round_up(m > 0 ? m : 1, GMR) + GNR) * (size_t)(k > 0 ? k : 1);
}

/* Columns [j0, j0 + WIDTH) of the k x ? float matrix X (row stride LDX) into
 * PANEL as doubles, WIDTH per row p; zero past N. */
static void pack_double_panel(const float *x, int ldx, int n, int k, int j0, int width, double *panel)
{
    const int cols = n - j0 < width ? n - j0 : width;
    for (int p = 0; p < k; p++) {
        const float *src = x + (size_t)p * ldx + j0;
        double *dst = panel + (size_t)p * width;
        for (int col = 0; col < cols; col++)
            dst[col] = src[col];
        for (int col = cols; col < width; col++)
            dst[col] = 0.0;
    }
}

/* ACC = sum over p = 0 .. k-1, in order, of the products of the panels. A
 * product of two floats is exact in double, so a fused multiply-add and a
 * multiply then an add give the same bits here. */
static void double_tile(int k, const double *ap, const double *bp, Vd acc[GMR][GNV])
{
    Vd c[GMR][GNV];
    for (int r = 0; r < GMR; r++)
        for (int v = 0; v < GNV; v++)
            c[r][v] = splat_d(0.0);
    for (int p = 0; p < k; p++, ap += GMR, bp += GNR) {
        Vd b[GNV];
        for (int v = 0; v < GNV; v++)
            b[v] = *(const VdLoad *)(bp + v * GVL);
        for (int r = 0; r < GMR; r++) {
            const Vd a = splat_d(ap[r]);
            for (int v = 0; v < GNV; v++)
                c[r][v] += a * b[v];
        }
    }
    memcpy(acc, c, sizeof c);
}

static void finish_double_tile(Vd acc[GMR][GNV], int rows, int cols, double beta, double *c, int ldc)
{
    const Vd vb = splat_d(beta);
    for (int r = 0; r < rows; r++) {
        double *row = c + (size_t)r * ldc;
        Vd old[GNV], out[GNV];
        if (beta != 0.0) {
            if (cols == GNR)
                memcpy(old, row, sizeof old);
            else {
                memset(old, 0, sizeof old);
                memcpy(old, row, (size_t)cols * sizeof *row);
            }
        }
        for (int v = 0; v < GNV; v++)
            out[v] = beta == 0.0 ? acc[r][v] : vb * old[v] + acc[r][v];
        if (cols == GNR)
            memcpy(row, out, sizeof out);
        else
            memcpy(row, out, (size_t)cols * sizeof *row);
    }
}

void ddp_gradsum_fixed(int m, int n, int k, const float *a, int lda, const float *b, int ldb, double beta,
                       double *c, int ldc, double *scratch)
{
    if (m <= 0 || n <= 0)
        return;
    if (k < 0)
        k = 0;
    const int panels = (m + GMR - 1) / GMR;
    double *apack = scratch, *bpack = scratch + (size_t)panels * GMR * k;
    for (int i = 0; i < panels; i++)
        pack_double_panel(a, lda, m, k, i * GMR, GMR, apack + (size_t)i * GMR * k);
    for (int j0 = 0; j0 < n; j0 += GNR) {
        pack_double_panel(b, ldb, n, k, j0, GNR, bpack);
        const int cols = n - j0 < GNR ? n - j0 : GNR;
        for (int i = 0; i < panels; i++) {
            Vd acc[GMR][GNV];
            double_tile(k, apack + (size_t)i * GMR * k, bpack, acc);
            const int rows = m - i * GMR < GMR ? m - i * GMR : GMR;
            finish_double_tile(acc, rows, cols, beta, c + (size_t)i * GMR * ldc + j0, ldc);
        }
    }
}
