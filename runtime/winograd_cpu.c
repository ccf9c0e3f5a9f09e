/*
 * winograd_cpu.c: stride-1 convolutions by Winograd's minimal filtering on the
 * CPU; what and why in winograd_cpu.h.
 *
 * Layout. A tile is a row, numbered sample-major (row = sample * tiles +
 * tile). For each of the 64 points xi, the transformed input of a set of rows
 * is a matrix D[xi] (rows x C), the transformed weights U[xi] (C x K), and
 * forward's product M[xi] = D[xi] . U[xi] (rows x K). A row's 64 points are
 * stored together (D[xi] starts at d + xi * C, rows 64 * C apart), so that a
 * tile's transform writes one contiguous block and each product reads its
 * matrix with a leading dimension of 64 * C. The products are gemm_cpu.c's,
 * whose every element is the same bits whatever rows it is computed with.
 * (The weight gradient's tiles lie otherwise: transformed_tiles_floats.)
 *  - Forward and backward data take groups of whole samples (at least
 *    WINO_ROWS tiles), one OpenMP task each, in the thread's own scratch.
 *    Backward data multiplies E[xi] (the transformed dy, rows x K) by
 *    U[xi]^T, stored K x C.
 *  - The weight gradient (for convs with enough tiles per sample:
 *    ddp_winograd_filter_suits) gives each thread whole samples: a sample's
 *    tiles transformed, then V[xi] = E[xi]^T . D[xi] (K x C) over its tiles
 *    and its transform back, a block of pairs at a time (block_products),
 *    into the thread's own order-free sums (exact_sum.h): each sample's
 *    part is computed alone.
 *
 * Every tile transform works on 8 channels at once, one 8-float vector per
 * tile point; x, dy, y and dx pass through a layout with 8 channels
 * interleaved per pixel (block_channels) so that those vectors are contiguous.
 * Where the CPU has AVX-512, the unrolled tile transforms (square kernels)
 * and the weight gradient's sums and transforms back take two such blocks
 * a vector, with the same bits (winograd_lanes.inc).
 */
#include "winograd_cpu.h"

#include "gemm_cpu.h"  // ddp_sgemm_fixed_packed: products in a fixed order
#include "transpose_cpu.h"  // ddp_transpose8: channels to pixels and back

#include <string.h>

#ifdef _OPENMP
#include <omp.h>     // omp_get_thread_num, omp_get_num_threads
#define WINO_PRAGMA(text) _Pragma(#text)
#define OMP(directive) WINO_PRAGMA(omp directive)
#else
#define OMP(directive)
static int omp_get_thread_num(void) { return 0; }
static int omp_get_num_threads(void) { return 1; }
#endif

/* WINO_ROWS (winograd_cpu.h): the fewest rows (tiles) of a group of samples,
 * few, so that a group's matrices stay in the core's own cache between the
 * transforms and the products (for MNIST's conv2, 16 rows make 128 KiB and
 * 256 KiB, and U 512 KiB). A tile's result does not depend on the rows it
 * is computed with (gemm_cpu.h). A vector holds blocks of LANES channels. */
enum { LANES = 8 };

/* The most scratch a Winograd conv's weight gradient may take per thread
 * (filter_suits: the thread's own order-free sums of the whole weight
 * gradient, 16 bytes a weight, its part, 4, and one sample's blocked and
 * transformed tiles; a conv with more leaves its weight gradient to
 * another pass: a 512 -> 512 3x3 at 14x14 takes 50 MiB, 1024 -> 1024 190),
 * and the most all the threads' may take together: past it, fewer threads
 * run the pass (filter_threads; the sums are exact, so no bit changes). */
#define WINO_SCRATCH_CAP ((size_t)64 << 20)
#define WINO_FILTER_BUDGET ((size_t)256 << 20)

/* One point of a tile for LANES channels, a vector (GCC's vector extension,
 * so that the transforms' sums stay in registers): tile[point][lane]. */
typedef DdpFloat8 Lanes;
_Static_assert(LANES == 8, "a tile's vector is transpose_cpu.h's DdpFloat8");

/* Whole vectors in and out of memory at any float's alignment, in the
 * registers (transpose_cpu.h's DdpFloat8Mem). */
static inline Lanes lanes_load(const float *at)
{
    return *(const DdpFloat8Mem *)at;
}

static inline void lanes_store(float *at, Lanes v)
{
    *(DdpFloat8Mem *)at = v;
}


/* ---- the transform matrices ----------------------------------------------- */

/* The finite interpolation points, ALPHA - 1 of them (the last point is
 * infinity): the first five for 6 x 6 tiles, all seven for 8 x 8 ones. */
static const double points[WINO_ALPHA - 1] = {0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5};

/* COEF (degree + 1 doubles, lowest power first) = prod (x - points[l]) over
 * l < ALPHA - 1, l != SKIP (SKIP -1 skips none); the degree. */
static int point_polynomial(int alpha, int skip, double coef[WINO_ALPHA])
{
    int degree = 0;
    memset(coef, 0, WINO_ALPHA * sizeof *coef);
    coef[0] = 1.0;
    for (int l = 0; l < alpha - 1; l++) {
        if (l == skip)
            continue;
        for (int i = degree + 1; i > 0; i--) /* times (x - p) */
            coef[i] = coef[i - 1] - points[l] * coef[i];
        coef[0] *= -points[l];
        degree++;
    }
    return degree;
}

/* The matrices are ALPHA x ALPHA (or M x ALPHA), stored 8 x 8, zero beyond. */

/* B^T: row j < ALPHA - 1 is prod over l != j of (x - p_l), row ALPHA - 1 the
 * product of all. */
static void data_transform(int alpha, double bt[WINO_POINTS])
{
    memset(bt, 0, WINO_POINTS * sizeof *bt);
    for (int j = 0; j < alpha; j++)
        point_polynomial(alpha, j < alpha - 1 ? j : -1, bt + j * WINO_ALPHA);
}

/* A^T for M outputs: A^T[i][j] = p_j^i, and infinity's column picks the last. */
static void output_transform(int alpha, int m, double at[WINO_POINTS])
{
    memset(at, 0, WINO_POINTS * sizeof *at);
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < alpha - 1; j++) {
            double power = 1.0;
            for (int e = 0; e < i; e++)
                power *= points[j];
            at[i * WINO_ALPHA + j] = power;
        }
        at[i * WINO_ALPHA + alpha - 1] = i == m - 1;
    }
}

/* G for an R-tap kernel: G[j][k] = p_j^k / prod over l != j of (p_j - p_l),
 * and infinity's row picks the last tap. */
static void kernel_transform(int alpha, int r, double g[WINO_POINTS])
{
    memset(g, 0, WINO_POINTS * sizeof *g);
    for (int j = 0; j < alpha - 1; j++) {
        double denominator = 1.0;
        for (int l = 0; l < alpha - 1; l++)
            if (l != j)
                denominator *= points[j] - points[l];
        double power = 1.0;
        for (int k = 0; k < r; k++) {
            g[j * WINO_ALPHA + k] = power / denominator;
            power *= points[j];
        }
    }
    g[(alpha - 1) * WINO_ALPHA + r - 1] = 1.0;
}

static void to_float(const double *in, float *out)
{
    for (int i = 0; i < WINO_POINTS; i++)
        out[i] = (float)in[i];
}

static void transpose(const double *in, double *out)
{
    for (int i = 0; i < WINO_ALPHA; i++)
        for (int j = 0; j < WINO_ALPHA; j++)
            out[j * WINO_ALPHA + i] = in[i * WINO_ALPHA + j];
}

/* M as floats, and its transpose. */
static void to_floats_and_transposed(const double *m, float *as_is, float *transposed)
{
    double t[WINO_POINTS];
    transpose(m, t);
    to_float(m, as_is);
    to_float(t, transposed);
}

/* ---- the rule and the plan -------------------------------------------------- */

static int tiles_of(int out, int m)
{
    return (out + m - 1) / m;
}

static int tile_alpha(const DdpConvShape *sh); /* below */

/* The tiles of one sample of SHAPE (a plan's p->tiles). */
static int sample_tiles(const DdpConvShape *sh)
{
    const int alpha = tile_alpha(sh);
    return tiles_of(sh->out_h, alpha + 1 - sh->r) * tiles_of(sh->out_w, alpha + 1 - sh->s);
}

static size_t filter_scratch_bytes(const DdpConvShape *sh); /* below, with the rest of the scratch */

/* The input tile's side for SHAPE's kernel, the same on both axes: 6 for 3x3
 * (4x4 output tiles), 8 for sides 5 to 7 (4- to 2-wide output tiles); 0 for
 * other kernels. Wider output tiles round worse. (With 8x8 input tiles for
 * its 3x3 convs, resnet.net's parity run ended 3.9e-3 of the update away
 * from PyTorch in float64; that was one ReLU input within a float32
 * rounding of zero, rounded to the other side: tests/parity/run.sh's
 * kinks.) */
static int tile_alpha(const DdpConvShape *sh)
{
    if (sh->r == 3 && sh->s == 3)
        return 6;
    if (sh->r >= 5 && sh->r <= 7 && sh->s >= 5 && sh->s <= 7)
        return 8;
    return 0;
}

/* Whether the weight gradient is done here too (ddp_winograd_filter_suits):
 * enough tiles, and its scratch within the cap. */
static int filter_suits(const DdpConvShape *sh)
{
    return sample_tiles(sh) >= WINO_FILTER_MIN_TILES && filter_scratch_bytes(sh) <= WINO_SCRATCH_CAP;
}

int ddp_winograd_suits(const DdpConvShape *sh)
{
    const int alpha = tile_alpha(sh);
    if (sh->stride != 1 || sh->groups != 1 || !alpha || sh->c < LANES || sh->k < LANES)
        return 0;
    /* Multiplies per (c, k) pair and sample: alpha^2 per tile against one per
     * tap and output pixel. Half or less, or the transforms eat the gain. */
    double tiles = sample_tiles(sh);
    return alpha * alpha * tiles * 2 <= (double)sh->out_h * sh->out_w * sh->r * sh->s;
}

/* ---- scratch -------------------------------------------------------------------- */

/* Counts rounded up to 64 bytes, so that no part shares a cache line. */
static size_t align_floats(size_t count)
{
    return (count + 15) / 16 * 16;
}

static int channel_blocks(int c)
{
    return (c + LANES - 1) / LANES;
}

/* Floats of one sample's input, and of its output gradient, with channels
 * in blocks (block_channels). */
static size_t blocked_input_floats(const DdpConvShape *sh)
{
    return (size_t)channel_blocks(sh->c) * LANES * sh->h * sh->w;
}

static size_t blocked_gradient_floats(const DdpConvShape *sh)
{
    return (size_t)channel_blocks(sh->k) * LANES * sh->out_h * sh->out_w;
}

/* The weight gradient's transformed tiles: a sample's, for C channels (D of
 * its input, or with K, E of its dy), lie by block of LANES channels, then
 * point, then tile: block cb's point xi of tile t at ((cb * 64 + xi) * T +
 * t) * LANES (T tiles a sample), lanes past the last channel zero
 * (block_channels's), so that a block's products (block_products) read
 * each point's tiles in one run. The floats of a sample's, and where block
 * CB's point XI starts. */
static size_t transformed_tiles_floats(int tiles, int c)
{
    return (size_t)channel_blocks(c) * WINO_POINTS * tiles * LANES;
}

static size_t tile_points_at(int tiles, int cb, int xi)
{
    return ((size_t)cb * WINO_POINTS + xi) * tiles * LANES;
}

/* The forward and backward data passes: U (C x K per point, or K x C), shared,
 * then each thread's own space for a group of samples: D (rows x C per point:
 * the input, or backward's product N), M (rows x K: forward's product, or
 * backward's E), and the group's blocked input, or its blocked dy and then
 * its blocked dx. */
typedef struct {
    float *d, *m, *blocked, *packs;
} GroupScratch;

/* U, then each point's U packed for the products (gemm_cpu.h), for the
 * larger of forward's C x K and backward data's K x C. */
static size_t packed_point_floats(const DdpConvShape *sh)
{
    const size_t as_is = ddp_sgemm_fixed_packed_b_floats(sh->k, sh->c);
    const size_t transposed = ddp_sgemm_fixed_packed_b_floats(sh->c, sh->k);
    return align_floats(as_is > transposed ? as_is : transposed);
}

static size_t weights_floats(const DdpConvShape *sh)
{
    return align_floats((size_t)WINO_POINTS * sh->c * sh->k) + WINO_POINTS * packed_point_floats(sh);
}

static size_t group_scratch(const WinogradPlan *p, const DdpConvShape *sh, float *base, GroupScratch *at)
{
    const size_t rows = (size_t)p->group * p->tiles;
    const size_t d = align_floats((size_t)WINO_POINTS * rows * sh->c);
    const size_t m = align_floats((size_t)WINO_POINTS * rows * sh->k);
    const size_t larger = blocked_input_floats(sh) > blocked_gradient_floats(sh) ? blocked_input_floats(sh)
                                                                                   : blocked_gradient_floats(sh);
    const size_t blocked = align_floats(p->group * larger);
    if (at) {
        at->d = base;
        at->m = at->d + d;
        at->blocked = at->m + m;
        at->packs = at->blocked + blocked;
    }
    return d + m + blocked + align_floats(ddp_sgemm_fixed_scratch((int)rows, sh->c > sh->k ? sh->c : sh->k));
}

/* The filter pass's scratch, each thread's own (each takes whole samples):
 * its order-free sums of dw in R x S x K x C order (HI, then LO); one
 * sample's part, R x S rows of K x C floats (pair_stride apart), deposited
 * row by row in vector lanes; the sample's input and dy with their
 * channels blocked; then its transformed tiles, D and E
 * (transformed_tiles_floats says how they lie). Each piece starts on a
 * cache line. */
typedef struct {
    double *sum_hi, *sum_lo;
    float *part;
    float *blocked_x, *blocked_dy, *d, *e;
} FilterScratch;

/* The floats from one position's K x C pairs of a sample's part to the
 * next's: K x C rounded up to a cache line, and one line more. A block of
 * pairs is written at every position; at a multiple of 4 KiB apart those
 * writes would fall in one set of the L1 cache. (Measured when a pair's 64
 * points were read back from the same layout: with K x C = 2048 they took
 * a quarter of the pass; the part's writes alone were not measured.) */
static size_t pair_stride(const DdpConvShape *sh)
{
    return align_floats((size_t)sh->k * sh->c) + 16;
}

/* One thread's scratch, at BASE + THREAD times its size; its size. */
static size_t filter_scratch(const DdpConvShape *sh, void *base, int thread, FilterScratch *at)
{
    const int tiles = sample_tiles(sh);
    const size_t ck = (size_t)sh->k * sh->c, sums = (ck * sh->r * sh->s + 7) / 8 * 8; /* doubles, whole lines */
    const size_t bx = align_floats(blocked_input_floats(sh)), bdy = align_floats(blocked_gradient_floats(sh));
    const size_t d = align_floats(transformed_tiles_floats(tiles, sh->c));
    const size_t e = align_floats(transformed_tiles_floats(tiles, sh->k));
    const size_t part = align_floats((size_t)sh->r * sh->s * pair_stride(sh));
    const size_t bytes = 2 * sums * sizeof(double) + (part + bx + bdy + d + e) * sizeof(float);
    if (at) {
        base = (char *)base + (size_t)thread * bytes;
        at->sum_hi = base;
        at->sum_lo = at->sum_hi + sums;
        at->part = (float *)(at->sum_lo + sums);
        at->blocked_x = at->part + part;
        at->blocked_dy = at->blocked_x + bx;
        at->d = at->blocked_dy + bdy;
        at->e = at->d + d;
    }
    return bytes;
}

/* The size that filter_suits caps: one thread's, which depends on the
 * shape alone, never on the batch or the thread count, so that neither
 * changes the choice (and so the bits). */
static size_t filter_scratch_bytes(const DdpConvShape *sh)
{
    return filter_scratch(sh, NULL, 0, NULL);
}

static int tables_match(const WinogradPlan *p); /* below, with the tables */
static int point_pairs_hold(int alpha, int r, const float *gt); /* below, with the tables */

void ddp_winograd_plan(WinogradPlan *p, const DdpConvShape *sh, int nthreads)
{
    memset(p, 0, sizeof *p);
    p->alpha = tile_alpha(sh);
    p->mh = p->alpha + 1 - sh->r;
    p->mw = p->alpha + 1 - sh->s;
    p->tiles_w = tiles_of(sh->out_w, p->mw);
    p->tiles = tiles_of(sh->out_h, p->mh) * p->tiles_w;
    p->group = p->tiles >= WINO_ROWS ? 1 : WINO_ROWS / p->tiles;
    p->nthreads = nthreads;

    double m[WINO_POINTS];
    data_transform(p->alpha, m);
    to_floats_and_transposed(m, p->bt, p->b);
    output_transform(p->alpha, p->mh, m);
    to_floats_and_transposed(m, p->at_h, p->a_h);
    output_transform(p->alpha, p->mw, m);
    to_floats_and_transposed(m, p->at_w, p->a_w);
    kernel_transform(p->alpha, sh->r, m);
    to_floats_and_transposed(m, p->g_h, p->gt_h);
    kernel_transform(p->alpha, sh->s, m);
    to_floats_and_transposed(m, p->g_w, p->gt_w);
    p->fixed = tables_match(p);
    p->paired = point_pairs_hold(p->alpha, sh->r, p->gt_h) && point_pairs_hold(p->alpha, sh->s, p->gt_w);
    p->filter = filter_suits(sh);
    const size_t fit = WINO_FILTER_BUDGET / filter_scratch_bytes(sh); /* threads' scratch within the budget */
    p->filter_threads = fit < 1 ? 1 : fit < (size_t)nthreads ? (int)fit : nthreads;
}

int ddp_winograd_filter_suits(const WinogradPlan *p)
{
    return p->filter;
}


size_t ddp_winograd_scratch_bytes(const WinogradPlan *p, const DdpConvShape *sh, int filter)
{
    size_t data = (weights_floats(sh) + (size_t)p->nthreads * group_scratch(p, sh, NULL, NULL)) * sizeof(float);
    size_t wgrad = filter && ddp_winograd_filter_suits(p) ? p->filter_threads * filter_scratch_bytes(sh) : 0;
    return data > wgrad ? data : wgrad;
}

/* Whether point XI (row xi / 8, column xi % 8 of the 8 x 8 storage) is one
 * of PLAN's alpha x alpha points: the products and transforms skip the rest. */
static int point_used(const WinogradPlan *p, int xi)
{
    return xi / WINO_ALPHA < p->alpha && xi % WINO_ALPHA < p->alpha;
}

/* ---- tile transforms, 8 channels at a time ----------------------------------- */

/* OUT[i][j] = sum over a, b < ALPHA of L[i][a] IN[a][b] R[j][b], per lane,
 * for i < RO and j < CO: L and R are stored 8 x 8 (zero where the transform
 * is smaller), IN and OUT 8 x 8 tiles of which the first ALPHA rows and
 * columns are read. The general form: for the weights' G g G^T,
 * non-square kernels' tile transforms, and the weight gradient's transform
 * back where the plan's G^T lacks the symmetry of its points
 * (WinogradPlan.paired); zero entries (a third) are skipped. Square
 * kernels' tile transforms use winograd_lanes.inc's transform_fixed, and
 * the weight gradient's transform back its kernel_gradient_paired. */
static void sandwich(int alpha, int ro, const float *restrict l, int co, const float *restrict r,
                     const Lanes *restrict in, Lanes *restrict out)
{
    for (int i = 0; i < ro; i++) {
        Lanes half[WINO_ALPHA] = {0}; /* row i of L . IN */
        for (int a = 0; a < alpha; a++) {
            const float coef = l[i * WINO_ALPHA + a];
            if (coef != 0.0f)
                for (int b = 0; b < alpha; b++)
                    half[b] += coef * in[a * WINO_ALPHA + b];
        }
        for (int j = 0; j < co; j++) {
            Lanes acc = {0};
            for (int b = 0; b < alpha; b++) {
                const float coef = r[j * WINO_ALPHA + b];
                if (coef != 0.0f)
                    acc += coef * half[b];
            }
            out[i * WINO_ALPHA + j] = acc;
        }
    }
}

/* ---- the same transforms, unrolled with constant matrices ------------------------- */

/* The tile transforms run once per tile and 8 channels, a fifth of a step's
 * time if sandwich's loops test each matrix entry. With the matrices as
 * constants, the compiler unrolls the loops and drops the zero terms (a
 * third of B^T) and the multiplies by 1 and -1. The tables are the matrices
 * of the points above, for 8 x 8 and 6 x 6 tiles, checked against them in
 * ddp_winograd_plan, which uses sandwich instead if they ever differ (and
 * for non-square kernels). */
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

static const float BT_TABLE[WINO_POINTS] = {
    -1.0f, 0.0f,  5.25f, 0.0f,   -5.25f, 0.0f,   1.0f, 0.0f, /* rows: 0, 1, -1, 2, -2, 1/2, -1/2, inf */
    0.0f,  1.0f,  1.0f,  -4.25f, -4.25f, 1.0f,   1.0f, 0.0f,
    0.0f,  -1.0f, 1.0f,  4.25f,  -4.25f, -1.0f,  1.0f, 0.0f,
    0.0f,  0.5f,  0.25f, -2.5f,  -1.25f, 2.0f,   1.0f, 0.0f,
    0.0f,  -0.5f, 0.25f, 2.5f,   -1.25f, -2.0f,  1.0f, 0.0f,
    0.0f,  2.0f,  4.0f,  -2.5f,  -5.0f,  0.5f,   1.0f, 0.0f,
    0.0f,  -2.0f, 4.0f,  2.5f,   -5.0f,  -0.5f,  1.0f, 0.0f,
    0.0f,  -1.0f, 0.0f,  5.25f,  0.0f,   -5.25f, 0.0f, 1.0f,
};

static const float BT6_TABLE[6 * 6] = {
    4.0f, 0.0f,  -5.0f, 0.0f,  1.0f, 0.0f, /* rows: 0, 1, -1, 2, -2, inf */
    0.0f, -4.0f, -4.0f, 1.0f,  1.0f, 0.0f,
    0.0f, 4.0f,  -4.0f, -1.0f, 1.0f, 0.0f,
    0.0f, -2.0f, -1.0f, 2.0f,  1.0f, 0.0f,
    0.0f, 2.0f,  -1.0f, -2.0f, 1.0f, 0.0f,
    0.0f, 4.0f,  0.0f,  -5.0f, 0.0f, 1.0f,
};

/* p^i for the finite points p: A^T's rows i < 7 without infinity's column
 * (6 x 6 tiles use the first five points). */
static const float POWER_TABLE[WINO_ALPHA - 1][WINO_ALPHA - 1] = {
    {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f},
    {0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, -0.5f},
    {0.0f, 1.0f, 1.0f, 4.0f, 4.0f, 0.25f, 0.25f},
    {0.0f, 1.0f, -1.0f, 8.0f, -8.0f, 0.125f, -0.125f},
    {0.0f, 1.0f, 1.0f, 16.0f, 16.0f, 0.0625f, 0.0625f},
    {0.0f, 1.0f, -1.0f, 32.0f, -32.0f, 0.03125f, -0.03125f},
    {0.0f, 1.0f, 1.0f, 64.0f, 64.0f, 0.015625f, 0.015625f},
};

/* B^T[i][a] and A^T[i][a] (M outputs) of ALPHA x ALPHA tiles. */
static ALWAYS_INLINE float bt_entry(int alpha, int i, int a)
{
    return alpha == WINO_ALPHA ? BT_TABLE[i * WINO_ALPHA + a] : BT6_TABLE[i * 6 + a];
}

static ALWAYS_INLINE float at_entry(int alpha, int m, int i, int a)
{
    return a < alpha - 1 ? POWER_TABLE[i][a] : i == m - 1 ? 1.0f : 0.0f;
}

/* Whether G^T's entry (I, A), R x ALPHA, is nonzero: G[a][i] is point a to
 * the power i over a constant, so point 0's (the first) only for i = 0, and
 * infinity's (the last) only for the last i; point_pairs_hold checks the plan's. */
static ALWAYS_INLINE int kernel_gradient_nonzero(int alpha, int r, int i, int a)
{
    return a == 0 ? i == 0 : a == alpha - 1 ? i == r - 1 : 1;
}

/* The four tile transforms are T X T^T for one matrix T: B^T (input), B
 * (backward data's inverse), A^T (output, M x ALPHA) and A (output
 * gradient, ALPHA x M). */
enum { INPUT_TILE, DATA_GRADIENT_TILE, OUTPUT_TILE, GRADIENT_TILE };

static ALWAYS_INLINE float transform_entry(int alpha, int kind, int m, int i, int a)
{
    switch (kind) {
    case INPUT_TILE:
        return bt_entry(alpha, i, a);
    case DATA_GRADIENT_TILE:
        return bt_entry(alpha, a, i);
    case OUTPUT_TILE:
        return at_entry(alpha, m, i, a);
    default:
        return a < m ? at_entry(alpha, m, a, i) : 0.0f;
    }
}

/* Whether PLAN's tile transforms' matrices, B^T and A^T, are the tables
 * (square kernels only), entry by entry (the computed ones have some -0). */
static int tables_match(const WinogradPlan *p)
{
    int same = (p->alpha == WINO_ALPHA || p->alpha == 6) && p->mh == p->mw;
    for (int i = 0; i < p->alpha && same; i++)
        for (int a = 0; a < p->alpha; a++) {
            same &= p->bt[i * WINO_ALPHA + a] == bt_entry(p->alpha, i, a);
            same &= p->at_h[i * WINO_ALPHA + a] == (i < p->mh ? at_entry(p->alpha, p->mh, i, a) : 0.0f);
            same &= p->at_w[i * WINO_ALPHA + a] == p->at_h[i * WINO_ALPHA + a];
        }
    return same;
}

/* Whether G^T (R rows, of the plan's G_h^T or G_w^T) has the zeros and the
 * symmetry that winograd_lanes.inc's paired_rows takes: point 0's column zero but in row 0,
 * infinity's but in the last row, and each -p's column p's times (-1)^i. */
static int point_pairs_hold(int alpha, int r, const float *gt)
{
    int same = 1;
    for (int i = 0; i < r; i++) {
        for (int a = 0; a < alpha; a++)
            same &= (gt[i * WINO_ALPHA + a] != 0.0f) == kernel_gradient_nonzero(alpha, r, i, a);
        for (int q = 0; q < (alpha - 2) / 2; q++)
            same &= gt[i * WINO_ALPHA + 2 + 2 * q] == (i % 2 ? -1.0f : 1.0f) * gt[i * WINO_ALPHA + 1 + 2 * q];
    }
    return same;
}

/* The sides of a tile transform's input and output (winograd_lanes.inc's
 * FIXED_TRANSFORM): the whole alpha x alpha tile, or M x M of it. */
#define TILE_SIDE(alpha, m) (m)
#define ALPHA_SIDE(alpha, m) (alpha)

/* The lanes of the blocks from B on that exist, of COUNT channels, at most
 * VL (a vector's floats): all of them but in a last, short block. */
static ALWAYS_INLINE int lanes_from(int b, int count, int vl)
{
    return count - b * LANES < vl ? count - b * LANES : vl;
}

/* COUNT lanes of a block and the next, from FROM to TO, whose second
 * blocks lie FROM_STEP and TO_STEP floats on (LANES for a vector in
 * memory, another step where a layout keeps the blocks apart): a short
 * vector's loads and stores, at either width. */
static void copy_block_lanes(float *to, size_t to_step, const float *from, size_t from_step, int count)
{
    const int first = count < LANES ? count : LANES;
    memcpy(to, from, (size_t)first * sizeof(float));
    if (count > LANES)
        memcpy(to + to_step, from + from_step, (size_t)(count - LANES) * sizeof(float));
}

/* ---- the parts at each vector width (winograd_lanes.inc) ----------------------- */

/* The kernels (ALPHA, R, S) whose transform back is paired and unrolled
 * (winograd_lanes.inc): tile_alpha's, every one ddp_winograd_suits admits. */
#define PAIRED_KERNELS(X) \
    X(6, 3, 3) X(8, 5, 5) X(8, 5, 6) X(8, 5, 7) X(8, 6, 5) X(8, 6, 6) X(8, 6, 7) X(8, 7, 5) X(8, 7, 6) X(8, 7, 7)

/* Whether the weight gradient's transform back takes the pairs, unrolled:
 * the plan's G^T has their symmetry and the kernel is one of PAIRED_KERNELS. */
static int paired_kernel(const WinogradPlan *p, const DdpConvShape *sh)
{
#define PAIRED_SHAPE(a_, r_, s_) || (p->alpha == (a_) && sh->r == (r_) && sh->s == (s_))
    return p->paired && (0 PAIRED_KERNELS(PAIRED_SHAPE));
#undef PAIRED_SHAPE
}

/* The transforms at 8 floats, below: unrolled, or sandwich's plain sums. */
static void input_transform(const WinogradPlan *p, const Lanes *in, Lanes *out);
static void data_gradient_transform(const WinogradPlan *p, const Lanes *in, Lanes *out);
static void output_transform_tile(const WinogradPlan *p, const Lanes *in, Lanes *out);
static void gradient_transform(const WinogradPlan *p, const Lanes *in, Lanes *out);
static void kernel_gradient_transform(const WinogradPlan *p, const DdpConvShape *sh, const float *v, size_t stride,
                                      Lanes *out);

/* 8 floats, everywhere. */
#define VL 8
#define WIDTH(name) name##_8
#define INPUT_TRANSFORM input_transform
#define DATA_GRADIENT_TRANSFORM data_gradient_transform
#define OUTPUT_TRANSFORM output_transform_tile
#define GRADIENT_TRANSFORM gradient_transform
#define KERNEL_GRADIENT_TRANSFORM kernel_gradient_transform
#include "winograd_lanes.inc" /* which undefines its parameters */

static void input_transform(const WinogradPlan *p, const Lanes *in, Lanes *out)
{
    if (!input_transform_fixed_8(p, in, out))
        sandwich(p->alpha, p->alpha, p->bt, p->alpha, p->bt, in, out);
}

static void data_gradient_transform(const WinogradPlan *p, const Lanes *in, Lanes *out)
{
    if (!data_gradient_transform_fixed_8(p, in, out))
        sandwich(p->alpha, p->alpha, p->b, p->alpha, p->b, in, out);
}

static void output_transform_tile(const WinogradPlan *p, const Lanes *in, Lanes *out)
{
    if (!output_transform_fixed_8(p, in, out))
        sandwich(p->alpha, p->mh, p->at_h, p->mw, p->at_w, in, out);
}

static void gradient_transform(const WinogradPlan *p, const Lanes *in, Lanes *out)
{
    if (!gradient_transform_fixed_8(p, in, out))
        sandwich(p->alpha, p->alpha, p->a_h, p->alpha, p->a_w, in, out);
}

/* The weight gradient's transform back for the 8 pairs of a block:
 * paired and unrolled, or, where the plan's G^T lacks the pairs' symmetry,
 * sandwich's plain sums. */
static void kernel_gradient_transform(const WinogradPlan *p, const DdpConvShape *sh, const float *v, size_t stride,
                                      Lanes *out)
{
    if (kernel_gradient_unrolled_8(p, sh, v, stride, out))
        return;
    Lanes in[WINO_POINTS]; /* IN as sandwich reads it */
    for (int xi = 0; xi < WINO_POINTS; xi++)
        in[xi] = point_used(p, xi) ? lanes_load(v + xi * stride) : (Lanes){0};
    sandwich(p->alpha, sh->r, p->gt_h, sh->s, p->gt_w, in, out);
}

/* 16 floats, two blocks of channels a vector, where the CPU has AVX-512
 * (gemm_cpu.h: the products' choice, DDP_CPU_VECTOR) and the plan has the
 * unrolled transforms (tiles_wide, filter_wide): twice the multiply-adds
 * per instruction, the same bits. */
#if DDP_CPU_WIDE_VECTORS
/* A 16-float transform has no plain sums to fall back to: its callers take
 * that width only where tiles_wide or filter_wide holds, which the unrolled
 * cases match. Should they ever part, the run stops here rather than go on
 * with a tile it never wrote. */
static inline void unrolled_done(int done)
{
    if (!done)
        __builtin_trap();
}

DDP_CPU_WIDE_BEGIN
#define VL 16
#define WIDTH(name) name##_16
#define INPUT_TRANSFORM(...) unrolled_done(input_transform_fixed_16(__VA_ARGS__))
#define DATA_GRADIENT_TRANSFORM(...) unrolled_done(data_gradient_transform_fixed_16(__VA_ARGS__))
#define OUTPUT_TRANSFORM(...) unrolled_done(output_transform_fixed_16(__VA_ARGS__))
#define GRADIENT_TRANSFORM(...) unrolled_done(gradient_transform_fixed_16(__VA_ARGS__))
#define KERNEL_GRADIENT_TRANSFORM(...) unrolled_done(kernel_gradient_unrolled_16(__VA_ARGS__))
#include "winograd_lanes.inc" /* which undefines its parameters */
DDP_CPU_WIDE_END
#endif

/* Whether this plan's tile transforms take two blocks of channels a
 * vector: where the CPU has AVX-512 and they are the unrolled ones. */
static int tiles_wide(const WinogradPlan *p)
{
    return DDP_CPU_WIDE_VECTORS && ddp_gemm_cpu_wide() && p->fixed;
}

/* The same for the weight gradient's sums and transforms back, which are
 * the unrolled pairs (its tiles' transforms go by tiles_wide). */
static int filter_wide(const WinogradPlan *p, const DdpConvShape *sh)
{
    return DDP_CPU_WIDE_VECTORS && ddp_gemm_cpu_wide() && paired_kernel(p, sh);
}

int ddp_winograd_wide(const WinogradPlan *p, const DdpConvShape *sh)
{
    return (tiles_wide(p) ? DDP_WINOGRAD_WIDE_TILES : 0) | (filter_wide(p, sh) ? DDP_WINOGRAD_WIDE_FILTER : 0);
}

/* The blocks of channels a pass takes at block B of BLOCKS: two where
 * WIDE (tiles_wide, filter_wide) and block B + 1 exists, else one. */
static int blocks_taken(int wide, int b, int blocks)
{
    return wide && b + 1 < blocks ? 2 : 1;
}

/* BY_WIDTH(TAKEN, NAME, ARGS...): NAME_16(ARGS...) for TAKEN (blocks_taken)
 * 2, else NAME_8(ARGS...). */
#if DDP_CPU_WIDE_VECTORS
#define BY_WIDTH(taken, name, ...) ((taken) == 2 ? name##_16(__VA_ARGS__) : name##_8(__VA_ARGS__))
#else
#define BY_WIDTH(taken, name, ...) ((void)(taken), name##_8(__VA_ARGS__))
#endif

/* Channels in blocks of LANES, for the transforms' loads: XB[cb][h][w][lane]
 * holds x[cb * LANES + lane][h][w] (zero past the last channel), so that one
 * pixel of 8 channels is one contiguous vector. One sample; X is C x HW. */
static void block_channels(const float *x, int c, size_t hw, float *xb)
{
    for (int cb = 0; cb < channel_blocks(c); cb++) {
        const int lanes = lanes_from(cb, c, LANES);
        float *out = xb + (size_t)cb * hw * LANES;
        size_t px = 0;
        if (lanes == LANES) /* 8 pixels of 8 channels at a time */
            for (; px + LANES <= hw; px += LANES) {
                Lanes rows[LANES], columns[LANES];
                for (int v = 0; v < LANES; v++)
                    rows[v] = lanes_load(x + (size_t)(cb * LANES + v) * hw + px);
                ddp_transpose8(rows, columns);
                for (int v = 0; v < LANES; v++)
                    lanes_store(out + (px + v) * LANES, columns[v]);
            }
        for (; px < hw; px++) {
            for (int v = 0; v < lanes; v++)
                out[px * LANES + v] = x[(size_t)(cb * LANES + v) * hw + px];
            for (int v = lanes; v < LANES; v++)
                out[px * LANES + v] = 0.0f;
        }
    }
}

/* The reverse of block_channels: X (C x HW) = BETA X + XB; BETA 0 ignores
 * X's old contents (which may be NaN). */
static void unblock_channels(const float *xb, int c, size_t hw, float beta, float *x)
{
    for (int cb = 0; cb < channel_blocks(c); cb++) {
        const int lanes = lanes_from(cb, c, LANES);
        const float *in = xb + (size_t)cb * hw * LANES;
        size_t px = 0;
        if (lanes == LANES)
            for (; px + LANES <= hw; px += LANES) {
                Lanes pixels[LANES], channels[LANES];
                for (int v = 0; v < LANES; v++)
                    pixels[v] = lanes_load(in + (px + v) * LANES);
                ddp_transpose8(pixels, channels);
                for (int v = 0; v < LANES; v++) {
                    float *to = x + (size_t)(cb * LANES + v) * hw + px;
                    if (beta != 0.0f) {
                        Lanes old;
                        old = lanes_load(to);
                        channels[v] += beta * old;
                    }
                    lanes_store(to, channels[v]);
                }
            }
        for (; px < hw; px++)
            for (int v = 0; v < lanes; v++) {
                float *to = x + (size_t)(cb * LANES + v) * hw + px;
                *to = beta == 0.0f ? in[px * LANES + v] : beta * *to + in[px * LANES + v];
            }
    }
}

/* U[xi] = G g G^T for every (c, k): as C x K matrices (forward: D . U), or
 * TRANSPOSED as K x C (backward data: E . U^T, which the product does faster with
 * U^T stored than transposing U). Vectors run along the stored rows. */
static void transform_weights(const WinogradPlan *p, const DdpConvShape *sh, const float *w, int transposed,
                              float *u)
{
    const size_t ck = (size_t)sh->c * sh->k, rs = (size_t)sh->r * sh->s;
    const int rows = transposed ? sh->k : sh->c, cols = transposed ? sh->c : sh->k;
    OMP(for schedule(static))
    for (int row = 0; row < rows; row++)
        for (int col0 = 0; col0 < cols; col0 += LANES) {
            const int lanes = lanes_from(col0 / LANES, cols, LANES);
            Lanes g[WINO_POINTS] = {0}, t[WINO_POINTS];
            for (int v = 0; v < lanes; v++) {
                const int k = transposed ? row : col0 + v, c = transposed ? col0 + v : row;
                const float *wkc = w + ((size_t)k * sh->c + c) * rs;
                for (int a = 0; a < sh->r; a++)
                    for (int b = 0; b < sh->s; b++)
                        g[a * WINO_ALPHA + b][v] = wkc[a * sh->s + b];
            }
            sandwich(p->alpha, p->alpha, p->g_h, p->alpha, p->g_w, g, t);
            store_floats_8(p, t, lanes, u + (size_t)row * cols + col0, ck, LANES);
        }
}

/* ---- the passes ----------------------------------------------------------------- */

/* Samples [first, first + count) and their tiles as rows. */
typedef struct {
    int first, count;
    int rows;
} Samples;

static Samples samples_at(const WinogradPlan *p, int first, int most, int n)
{
    Samples sa = {first, n - first < most ? n - first : most, 0};
    sa.rows = sa.count * p->tiles;
    return sa;
}

/* The blocked input (or dx) of the sample of row ROW, and its blocked dy. */
static float *blocked_sample(const WinogradPlan *p, const DdpConvShape *sh, float *blocked, int row)
{
    return blocked + (size_t)(row / p->tiles) * blocked_input_floats(sh);
}

static float *blocked_gradient(const WinogradPlan *p, const DdpConvShape *sh, float *blocked, int row)
{
    return blocked + (size_t)(row / p->tiles) * blocked_gradient_floats(sh);
}

/* Blocks the channels of COUNT samples from FIRST of X (C x H x W each) or
 * of DY (K x out_h x out_w each). */
static void block_inputs(const DdpConvShape *sh, int first, int count, const float *x, float *blocked)
{
    const size_t hw = (size_t)sh->h * sh->w;
    for (int s = 0; s < count; s++)
        block_channels(x + (size_t)(first + s) * sh->c * hw, sh->c, hw, blocked + s * blocked_input_floats(sh));
}

static void block_gradients(const DdpConvShape *sh, int first, int count, const float *dy, float *blocked)
{
    const size_t hw = (size_t)sh->out_h * sh->out_w;
    for (int s = 0; s < count; s++)
        block_channels(dy + (size_t)(first + s) * sh->k * hw, sh->k, hw, blocked + s * blocked_gradient_floats(sh));
}

/* U[xi] (K x N for each point, at U) packed for the products, at PACKED,
 * packed_point_floats apart; the points shared among the team's threads. */
static void pack_weights(const WinogradPlan *p, const DdpConvShape *sh, const float *u, int k, int n,
                         float *packed)
{
    OMP(for schedule(static))
    for (int xi = 0; xi < WINO_POINTS; xi++)
        if (point_used(p, xi))
            ddp_sgemm_fixed_pack_b(0, n, k, u + (size_t)xi * k * n, n, packed + (size_t)xi * packed_point_floats(sh));
}

/* OUT[xi] (rows x N) = IN[xi] (rows x K) . U[xi] (K x N) for every point;
 * point xi of row r is at (r * 64 + xi) * K; U packed by pack_weights, PACKS
 * the products' copies of IN. */
static void products(const WinogradPlan *p, const DdpConvShape *sh, const Samples *sa, const float *in, int k,
                     const float *packed, int n, float *out, float *packs)
{
    for (int xi = 0; xi < WINO_POINTS; xi++)
        if (point_used(p, xi))
            ddp_sgemm_fixed_packed(0, sa->rows, n, k, 1.0f, in + (size_t)xi * k, WINO_POINTS * k,
                               packed + (size_t)xi * packed_point_floats(sh), 0.0f, out + (size_t)xi * n,
                               WINO_POINTS * n, packs);
}

/* The tiles of SA's samples, transformed from their blocked inputs (or, if
 * GRADIENTS, their blocked dy) into D (or E): row r's point xi at
 * OUT + (r * 64 + xi) * channels. */
static void transform_tiles(const WinogradPlan *p, const DdpConvShape *sh, int wide, const Samples *sa,
                            float *blocked, int gradients, float *out)
{
    const int channels = gradients ? sh->k : sh->c, blocks = channel_blocks(channels);
    for (int row = 0; row < sa->rows; row++) {
        const float *b = gradients ? blocked_gradient(p, sh, blocked, row) : blocked_sample(p, sh, blocked, row);
        float *row_out = out + (size_t)row * WINO_POINTS * channels;
        for (int cb = 0, taken; cb < blocks; cb += taken) {
            taken = blocks_taken(wide, cb, blocks);
            BY_WIDTH(taken, tile_into_row, p, sh, b, row % p->tiles, cb, gradients, row_out);
        }
    }
}

/* This thread's space for a group of samples. */
static GroupScratch thread_group_scratch(const WinogradPlan *p, const DdpConvShape *sh, void *scratch)
{
    GroupScratch at;
    size_t each = group_scratch(p, sh, NULL, NULL);
    group_scratch(p, sh, (float *)scratch + weights_floats(sh) + (size_t)omp_get_thread_num() * each, &at);
    return at;
}

/* Forward: per group of samples (one thread's task), the input tiles
 * transformed, the 64 products, and Y = A^T M A per tile, written where the
 * tile lies inside the output. */
void ddp_winograd_forward(const WinogradPlan *p, const DdpConvShape *sh, int nthreads, void *scratch, int n,
                          const float *x, const float *w, float *y)
{
    float *u = scratch, *packed = u + align_floats((size_t)WINO_POINTS * sh->c * sh->k);
    const size_t out_pixels = (size_t)sh->out_h * sh->out_w;
    const int tiles = p->tiles, groups = (n + p->group - 1) / p->group;
    const int kbs = channel_blocks(sh->k), wide = tiles_wide(p);
    OMP(parallel num_threads(nthreads))
    {
        transform_weights(p, sh, w, 0, u);
        pack_weights(p, sh, u, sh->c, sh->k, packed);
        const GroupScratch at = thread_group_scratch(p, sh, scratch);
        OMP(for schedule(dynamic))
        for (int group = 0; group < groups; group++) {
            const Samples sa = samples_at(p, group * p->group, p->group, n);
            block_inputs(sh, sa.first, sa.count, x, at.blocked);
            transform_tiles(p, sh, wide, &sa, at.blocked, 0, at.d);
            products(p, sh, &sa, at.d, sh->c, packed, sh->k, at.m, at.packs);
            /* The output tiles into the blocked y (in the space the blocked
             * input used), then y from it. */
            for (int row = 0; row < sa.rows; row++) {
                float *yb = blocked_gradient(p, sh, at.blocked, row);
                const float *m_row = at.m + (size_t)row * WINO_POINTS * sh->k;
                for (int kb = 0, taken; kb < kbs; kb += taken) {
                    taken = blocks_taken(wide, kb, kbs);
                    BY_WIDTH(taken, output_block, p, sh, m_row, row % tiles, kb, yb);
                }
            }
            for (int s = 0; s < sa.count; s++)
                unblock_channels(at.blocked + s * blocked_gradient_floats(sh), sh->k, out_pixels, 0.0f,
                                 y + (size_t)(sa.first + s) * sh->k * out_pixels);
        }
    }
}

/* Backward data: per group of samples, the dy tiles transformed (E), the 64
 * products N = E . U^T, and dd = B N B^T per tile added into the sample's
 * blocked dx tile by tile in order (whole samples per task: each pixel's sum
 * has a fixed order), then dx = beta dx + that. */
void ddp_winograd_backward_data(const WinogradPlan *p, const DdpConvShape *sh, int nthreads, void *scratch,
                                int n, const float *dy, const float *w, float *dx, float beta)
{
    float *u = scratch, *packed = u + align_floats((size_t)WINO_POINTS * sh->c * sh->k);
    const size_t hw = (size_t)sh->h * sh->w, in_sample = (size_t)sh->c * hw;
    const int tiles = p->tiles, groups = (n + p->group - 1) / p->group;
    const int cbs = channel_blocks(sh->c), wide = tiles_wide(p);
    OMP(parallel num_threads(nthreads))
    {
        transform_weights(p, sh, w, 1, u);
        pack_weights(p, sh, u, sh->k, sh->c, packed);
        const GroupScratch at = thread_group_scratch(p, sh, scratch); /* d: N, m: E, blocked: dx */
        OMP(for schedule(dynamic))
        for (int group = 0; group < groups; group++) {
            const Samples sa = samples_at(p, group * p->group, p->group, n);
            block_gradients(sh, sa.first, sa.count, dy, at.blocked);
            transform_tiles(p, sh, wide, &sa, at.blocked, 1, at.m);
            products(p, sh, &sa, at.m, sh->k, packed, sh->c, at.d, at.packs);
            memset(at.blocked, 0, (size_t)sa.count * channel_blocks(sh->c) * LANES * hw * sizeof *at.blocked);
            for (int row = 0; row < sa.rows; row++) {
                float *xb = blocked_sample(p, sh, at.blocked, row);
                const float *n_row = at.d + (size_t)row * WINO_POINTS * sh->c;
                for (int cb = 0, taken; cb < cbs; cb += taken) {
                    taken = blocks_taken(wide, cb, cbs);
                    BY_WIDTH(taken, data_block, p, sh, n_row, row % tiles, cb, xb);
                }
            }
            for (int s = 0; s < sa.count; s++)
                unblock_channels(at.blocked + s * blocked_input_floats(sh), sh->c, hw, beta,
                                 dx + (size_t)(sa.first + s) * in_sample);
        }
    }
}

/* Backward filter: each thread takes whole samples, in its own scratch:
 * for a sample, its input and dy tiles transformed (D, E); per block of 8 x
 * 8 pairs, V[xi] = the sum over its tiles, in order, of E[xi]^T D[xi], and
 * each pair's transform G^T V G (all in float, the same bits in any batch
 * and on any thread) into the sample's part, which then goes into the
 * thread's order-free sums. At the end dw from all the threads' sums,
 * merged exactly (beta 1 adds them to dw's). No thread waits for another
 * until then. Measured on one thread of an AMD EPYC (bench/conv_cpu.sh,
 * DDP_CPU_CONV=own), a batch of 64: with the transform back unrolled, V and
 * the part laid out pair_stride apart, the part deposited in pieces of rows
 * and the merge into dw in blocks, 32 -> 32 at 14x14 went from 4.35 to 3.2
 * to 3.5 ms, 64 -> 64 at 28x28 from 36 to 31; with V summed a block at a
 * time in registers (block_products), 2.6 to 3.0 and 27; with each thread
 * taking whole samples (before, the whole batch's x and dy were blocked
 * first, and the threads split each sample's pairs, then its deposits),
 * 64 -> 64 at 28x28 19.6, cifar10.net's 32 -> 64 at 32x32 14.1 to 14.3
 * against 22.9 to 23.1, and on two threads MNIST's conv2 3.2 to 3.7
 * against 3.8 to 4.0; with the transform back in pairs of points
 * (paired_rows), MNIST's conv2 on one thread 3.9 against 4.5; on 16-float
 * vectors, two blocks of c's at a time (sample_block_16), as README says;
 * with V point-major (V[xi][kk]: k-major, a block's V took 8 rows 4 KiB
 * apart) 0.05 ms faster at both widths. */
void ddp_winograd_backward_filter(const WinogradPlan *p, const DdpConvShape *sh, int nthreads, void *scratch,
                                  int n, const float *x, const float *dy, DdpGrad *dw, float beta)
{
    const size_t ck = (size_t)sh->c * sh->k, rs = (size_t)sh->r * sh->s;
    const size_t stride = pair_stride(sh);
    const int tiles = p->tiles, cbs = channel_blocks(sh->c), kbs = channel_blocks(sh->k);
    const int wide = filter_wide(p, sh), wide_tiles = tiles_wide(p);
    /* no more threads than the scratch has room for, nor than samples */
    int threads = nthreads < p->filter_threads ? nthreads : p->filter_threads;
    threads = threads < n ? threads : n > 1 ? n : 1;
    int team = 1; /* the threads that ran, each with its sums */
    OMP(parallel num_threads(threads))
    {
        FilterScratch at;
        filter_scratch(sh, scratch, omp_get_thread_num(), &at);
        OMP(single)
        team = omp_get_num_threads();
        memset(at.sum_hi, 0, ck * rs * sizeof(double));
        memset(at.sum_lo, 0, ck * rs * sizeof(double));
        OMP(for schedule(static) nowait)
        for (int s = 0; s < n; s++) {
            block_inputs(sh, s, 1, x, at.blocked_x);
            block_gradients(sh, s, 1, dy, at.blocked_dy);
            for (int tile = 0; tile < tiles; tile++) { /* by block, point and tile (transformed_tiles_floats) */
                for (int cb = 0, taken; cb < cbs; cb += taken) {
                    taken = blocks_taken(wide_tiles, cb, cbs);
                    BY_WIDTH(taken, filter_tile, p, sh, at.blocked_x, tile, cb, 0, at.d);
                }
                for (int kb = 0, taken; kb < kbs; kb += taken) {
                    taken = blocks_taken(wide_tiles, kb, kbs);
                    BY_WIDTH(taken, filter_tile, p, sh, at.blocked_dy, tile, kb, 1, at.e);
                }
            }
            /* c-block major, so that consecutive blocks share D's */
            for (int cb = 0, taken; cb < cbs; cb += taken) {
                taken = blocks_taken(wide, cb, cbs);
                for (int kb = 0; kb < kbs; kb++)
                    BY_WIDTH(taken, sample_block, p, sh, at.e, at.d, kb, cb, stride, at.part);
            }
            for (size_t ab = 0; ab < rs; ab++)
                ddp_exact_add_floats(at.sum_hi + ab * ck, at.sum_lo + ab * ck, at.part + ab * stride, (int)ck, 0,
                                     &ddp_grad_window);
        }
        OMP(barrier)
        /* dw = (beta ? dw : thread 0's sums) + every other thread's sums,
         * exact in any order, from R x S x K x C order back to dw's K x C x
         * R x S. In blocks of MERGE_PAIRS pairs, within which the sums are
         * read along their rows (a pair's own R x S sums lie K x C apart:
         * read pair by pair, they took 3.5% of the pass with K x C = 2048). */
        enum { MERGE_PAIRS = 64 };
        OMP(for schedule(static))
        for (size_t kc0 = 0; kc0 < ck; kc0 += MERGE_PAIRS) {
            const size_t end = ck - kc0 < MERGE_PAIRS ? ck : kc0 + MERGE_PAIRS;
            for (int thread = 0; thread < team; thread++) {
                FilterScratch its;
                filter_scratch(sh, scratch, thread, &its);
                for (size_t ab = 0; ab < rs; ab++)
                    for (size_t kc = kc0; kc < end; kc++) {
                        const DdpExact sum = {its.sum_hi[ab * ck + kc], its.sum_lo[ab * ck + kc]};
                        DdpGrad *out = dw + kc * rs + ab;
                        if (thread == 0 && beta == 0.0f)
                            *out = sum;
                        else
                            ddp_exact_merge(out, sum);
                    }
            }
        }
    }
}
