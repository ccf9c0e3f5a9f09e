/*
 * winograd_cpu.h: stride-1 convolutions on the CPU by Winograd's minimal
 * filtering, for ops_cpu.c, which chooses per conv between this and im2col.
 *
 * Each output tile of M x M pixels is computed from an alpha x alpha input
 * tile (M = alpha + 1 - R for an R-tap kernel side) with alpha^2 multiplies
 * per (input channel, output channel) pair, where im2col's product needs
 * M*M*R*S: alpha is 8 for kernel sides 5 to 7 (MNIST's 5x5 conv: 64 for 4x4
 * outputs, 6.25 times fewer) and 6 for 3x3 (36 for 4x4 outputs, 4 times
 * fewer). The alpha^2 products of a tile are independent matrix products over
 * the channels (gemm_cpu.c's, and for the weight gradient winograd_cpu.c's
 * own, summed in registers); what is left are small fixed transforms of tiles
 * (. is the elementwise product, sums run over the channels not shown):
 *   forward          Y  = A^T [ (G g G^T) . (B^T d B) ] A        per tile
 *   backward data    dd = B [ (G g G^T) . (A dy A^T) ] B^T,      the tiles'
 *                         dd, which overlap, added into dx
 *   backward filter  dg = G^T [ sum over tiles (A dy A^T) . (B^T d B) ] G
 * (Lavin and Gray, "Fast algorithms for convolutional neural networks", 2015;
 * the two backward passes are the exact adjoints of the forward one.) The
 * transforms come from interpolation at 0, +-1, +-2 and infinity, and for 8
 * x 8 tiles +-1/2 too. Wider output tiles round worse (winograd_cpu.c's
 * tile_alpha says how much worse 6x6 outputs for 3x3 kernels trained).
 *
 * The results are not im2col's bits. Winograd rounds differently: about 1e-6
 * of the sum of the terms' magnitudes for 5x5 (up to 3e-6 for 7x7), ten times
 * im2col's; tests/unit/test_ops.c checks 4e-6 against a double reference. An
 * output that sees only padding comes out near 1e-6 of its tile's scale
 * rather than exactly 0. They keep the guarantees of ops_cpu.c:
 *  - a sample's forward and data gradient are the same bits in any batch and
 *    with any thread count: every element of a product is the same bits
 *    whatever rows it is computed with (gemm_cpu.h), and tiles are summed in
 *    a fixed order;
 *  - the weight gradient is computed sample by sample (the sample's tiles in
 *    order, its transform back in float), each sample's part added to the
 *    order-free sums of ops.h's DdpGrad (each thread's own, for the samples
 *    it takes, merged exactly at the end), so no grouping of the batch
 *    changes a bit.
 */
#ifndef DDPRT_WINOGRAD_CPU_H
#define DDPRT_WINOGRAD_CPU_H

#include <stddef.h>

#include "ops.h"  // DdpConvShape, DdpGrad

/* The largest input tile's side (tiles are stored 8 x 8 whatever their
 * alpha), its points, and the fewest tiles per group of samples
 * (winograd_cpu.c says why so few). */
enum { WINO_ALPHA = 8, WINO_POINTS = WINO_ALPHA * WINO_ALPHA, WINO_ROWS = 16 };

typedef struct {
    int alpha;             /* input tile side: 6 (3x3 kernels) or 8 (5x5 to 7x7) */
    int mh, mw;            /* output tile: alpha + 1 - r rows by alpha + 1 - s columns */
    int tiles_w, tiles;    /* tiles per row of the output, per sample */
    int group;             /* samples per task of the forward and data passes */
    int nthreads;          /* threads the scratch has room for */
    int fixed;             /* square kernel, matrices as winograd_cpu.c's tables: unrolled transforms */
    int paired;            /* G^T's columns for p and -p alike but for sign: the weight gradient's
                            * transform back takes them in pairs (winograd_lanes.inc's paired_rows) */
    int filter;            /* the weight gradient is done here too (ddp_winograd_filter_suits) */
    int filter_threads;    /* the most threads it runs on: each has scratch of its own */
    /* Transform matrices, row-major in 8 x 8 arrays (unused entries zero):
     * bt = B^T, b = B (8 x 8); at_h = A^T (mh x 8), a_h = A (8 x mh), and the
     * same for columns; g_h = G (8 x r), gt_h = G^T (r x 8), likewise g_w. */
    float bt[64], b[64];
    float at_h[64], a_h[64], at_w[64], a_w[64];
    float g_h[64], g_w[64], gt_h[64], gt_w[64];
} WinogradPlan;

/* Whether SHAPE is better done this way, whatever its batch (shape->n), so
 * that a rank's batch never changes the algorithm: stride 1, one group, a
 * 3x3 kernel or sides 5..7, at least 8 channels in and out, and at most half
 * im2col's multiplies once tiles that hang over the edge are counted. */
int ddp_winograd_suits(const DdpConvShape *shape);

/* Whether PLAN's weight gradient is done this way too (else ops_cpu.c
 * gives it to oneDNN or im2col): each sample's part is computed alone (exact_sum.h), so its tiles'
 * transforms back are per sample, worth it only over enough tiles, at least
 * WINO_FILTER_MIN_TILES. MNIST's conv2 has 4, and is faster here than on
 * im2col (README, "Convolutions on CPUs"); resnet.net's 3x3 convs have 16
 * and 49. And its scratch per thread (the thread's own
 * order-free sums of the whole weight gradient, 16 bytes a weight, and one
 * sample's tiles) within 64 MiB: it depends on the shape alone, so that
 * neither a rank's batch nor the thread count changes the choice. */
enum { WINO_FILTER_MIN_TILES = 4 };
int ddp_winograd_filter_suits(const WinogradPlan *plan);

/* Which of PLAN's passes take two blocks of 8 channels a vector (16 floats)
 * now, on CPUs with AVX-512 (gemm_cpu.h's choice of width): the tile
 * transforms of every pass where they are unrolled (square kernels), and
 * the weight gradient's sums and transforms back where they are paired;
 * the same bits either way. */
enum { DDP_WINOGRAD_WIDE_TILES = 1, DDP_WINOGRAD_WIDE_FILTER = 2 };
int ddp_winograd_wide(const WinogradPlan *plan, const DdpConvShape *shape);

/* Fills PLAN for SHAPE (one that suits; shape->n the largest batch), for
 * calls on at most NTHREADS OpenMP threads. */
void ddp_winograd_plan(WinogradPlan *plan, const DdpConvShape *shape, int nthreads);

/* Bytes of scratch the calls need for PLAN (one buffer, any of them):
 * forward and backward data, and the weight gradient if FILTER (it may go
 * elsewhere even where it suits: ops_cpu.c's plan_onednn). */
size_t ddp_winograd_scratch_bytes(const WinogradPlan *plan, const DdpConvShape *shape, int filter);

/* ops.h's three conv calls, for a planned shape: N samples (at most shape->n),
 * on NTHREADS OpenMP threads (at most the plan's), in SCRATCH (64-byte
 * aligned, the bytes above). */
void ddp_winograd_forward(const WinogradPlan *plan, const DdpConvShape *shape, int nthreads, void *scratch,
                          int n, const float *x, const float *w, float *y);
void ddp_winograd_backward_data(const WinogradPlan *plan, const DdpConvShape *shape, int nthreads,
                                void *scratch, int n, const float *dy, const float *w, float *dx, float beta);
void ddp_winograd_backward_filter(const WinogradPlan *plan, const DdpConvShape *shape, int nthreads,
                                  void *scratch, int n, const float *x, const float *dy, DdpGrad *dw,
                                  float beta);

#endif
