/*
 * exact_sum.h: sums whose result does not depend on the order of their terms.
 *
 * Why: N ranks x B samples and 1 rank x N*B samples must take bit-identical
 * steps. Each sample's part of a gradient (or of a batchnorm statistic) is
 * the same bits in any batch, but the parts are added in different groupings
 * (one rank in sample order; N ranks each their share, then the all-reduce),
 * and floating-point addition is not associative: a double sum of the same
 * parts differs in its last bit from one grouping to another, and, about once
 * in 10^8 or 10^9 roundings, so does the float it rounds to. Here no grouping
 * can matter, because no addition of two accumulators ever rounds.
 *
 * How (the pre-rounding of Demmel and Nguyen's reproducible sums, with fixed
 * windows): an accumulator is two doubles, HI and LO, each an integer multiple
 * of its own grid, fixed for the step by a DdpExactWindow. A part X is split
 * as HI's grid rounds it (to nearest, ties to even, by adding a constant:
 * ddp_exact_round) plus the remainder, exact, which LO's grid rounds the same
 * way. That rounding depends on X alone, never on what the accumulator
 * already holds; and sums of multiples of a grid that stay below 2^52 grid
 * steps are exact in double, in any order, across ranks too (MPI_SUM of HI
 * and of LO, as plain doubles). The value is HI + LO, rounded once.
 *
 * The window: parts below 2^top in magnitude, at most 2^count of them in one
 * sum (all ranks together), and a level: HI's grid is 2^(level + 1), so that
 * a part below 2^level has no HI share and goes to LO alone, or
 * 2^(top + count - 50) where that is coarser (HI must hold every sum below
 * 2^(top + count)). LO's grid is 2^(count - 51) times HI's, and a sum is
 * within 2^count half steps of it of the exact sum of its parts; what lies
 * below it is rounded away, the same in every grouping. A gradient's parts
 * are each sample's share of a loss that is a mean over the global batch,
 * so the gradient window bounds them by 2^20 / that batch, rounded down to a
 * power of two (2^(20 - count) for a step of one full batch), and its level
 * is DDP_EXACT_GRAD_LEVEL - count: LO's grid is then 2^-50 (8.9e-16) for any
 * step of one global batch, and a step of 128 parts is within 5.7e-14 of the
 * exact sum. (Steps of many micro-batches, --no-sync-every, with a short last
 * batch get a coarser one: with 2^20 parts and a last batch of 1, 2^-42.) A part
 * at or above the limit (a diverging run) cannot be kept exactly: it makes
 * the sum NaN and raises ddp_exact_overflowed(), so that the run stops,
 * saying why, instead of training on.
 *
 * The count is of parts, so a sum takes one part per sample: a kernel that
 * deposited per pixel would overrun the window. Where a sample's part is
 * itself a sum (a bias's over its positions), that inner sum is a plain
 * double sum in an order fixed by the sample alone.
 *
 * The cost: a deposit is 7 floating-point operations where a plain sum takes
 * one add (the linear tiles do a product's in 6 with the multiply, 2 for a
 * part in LO alone, against one multiply-add), and an accumulator two
 * doubles: gradients are 16 bytes on CPUs, and the all-reduce moves four
 * times the bytes of the float parameters.
 *
 * Plain C, no state but the two windows and the overflow flag (exact_sum.c).
 */
#ifndef DDPRT_EXACT_SUM_H
#define DDPRT_EXACT_SUM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An order-free sum: HI + LO, each an integer multiple of its window's grid.
 * All zero bits is the empty sum. */
typedef struct {
    double hi, lo;
} DdpExact;

/* A window (see above): BIAS values of 1.5 * 2^e, whose binade's spacing is
 * the grid a part is rounded to by adding them (ddp_exact_round); LIMIT is
 * 2^top. */
typedef struct {
    double hi_bias, lo_bias, limit;
    double lo_grid;       /* LO's grid: the spacing of lo_bias's binade */
    double lo_only_below; /* half of HI's grid: a smaller part rounds to no HI share */
    int top, count;   /* what it was made for: parts below 2^top, at most 2^count of them */
    const char *what; /* what its sums are, for messages ("gradient") */
} DdpExactWindow;

/* The most parts one sum may have: 2^DDP_EXACT_MAX_COUNT_BITS (a global
 * batch times --no-sync-every). */
enum { DDP_EXACT_MAX_COUNT_BITS = 20 };

/* The two windows of a step (exact_sum.c): gradients (parts below
 * 2^(DDP_EXACT_GRAD_TOP - ceil(log2 of the smallest batch)): each sample's
 * share of a loss that is a mean over its global batch) and batchnorm's
 * forward statistics (a sample's sum of x and of x^2 over a channel's pixels,
 * below 2^DDP_EXACT_STATS_TOP). */
enum { DDP_EXACT_GRAD_TOP = 20, DDP_EXACT_STATS_TOP = 32 };
extern DdpExactWindow ddp_grad_window, ddp_stats_window;

/* Where the gradient window's HI grid starts: parts below
 * 2^DDP_EXACT_GRAD_LEVEL / the step's parts (rounded up to a power of two)
 * have no HI share, and the linear tiles deposit them in LO alone, in 2
 * operations instead of 6; LO's grid is then 2^(DDP_EXACT_GRAD_LEVEL - 50).
 * Measured on mlp.net (Fashion-MNIST, batch 128, 2 cores), against level 0:
 * level -4 trained at 0.93 times its speed, -8 at 0.72 times, 8 no faster. */
enum { DDP_EXACT_GRAD_LEVEL = 0 };

/* The window for parts below 2^TOP, at most 2^COUNT_BITS of them, named WHAT,
 * whose parts below 2^LEVEL have no HI share (a LEVEL below
 * TOP + COUNT_BITS - 51 means that value: the finest grids). */
DdpExactWindow ddp_exact_window(int top, int level, int count_bits, const char *what);

/* The smallest count_bits with 2^count_bits >= PARTS (at least 1). */
int ddp_exact_count_bits(int64_t parts);

/* Sets both windows for one step: PARTS parts in all (the samples of the
 * step's batches, all ranks together), its smallest batch SMALLEST of them
 * (an epoch's last batch may be short, and its parts, each carrying
 * 1/SMALLEST of the mean loss, are the largest). Every rank of a run, and a
 * one-rank run of the same global batches, pass the same values. The
 * windows start out set for one batch of 1024. */
void ddp_exact_windows_set(int64_t smallest, int64_t parts);

/* Nonzero once a part at or above its window's limit has been deposited
 * (since the last ddp_exact_overflow_clear): the part's magnitude and its
 * window (the first such part). */
int ddp_exact_overflowed(double *part, const DdpExactWindow **window);
void ddp_exact_overflow_clear(void);
void ddp_exact_overflow_raise(double part, const DdpExactWindow *window);

/* X rounded to the grid of BIAS, a value 1.5 * 2^e far above |X| (whose
 * binade's spacing is the grid): to nearest, ties to even, by the addition
 * itself. The result depends on X and BIAS alone. */
static inline double ddp_exact_round(double x, double bias)
{
    return (x + bias) - bias;
}

/* The deposit itself: the sum (HI, LO) += X, for |X| < W->limit, unchecked
 * (the callers check, one part or a whole row at a time). X's HI share is X
 * rounded to HI's grid; its LO share, the remainder (exact) rounded to LO's. */
static inline void ddp_exact_deposit(double *hi, double *lo, double x, const DdpExactWindow *w)
{
    const double h = ddp_exact_round(x, w->hi_bias);
    *hi += h; /* sums of grid multiples within the window: exact */
    *lo += ddp_exact_round(x - h, w->lo_bias);
}

/* The same, for |X| < W->lo_only_below, whose HI share is zero: LO alone. */
static inline void ddp_exact_deposit_small(double *lo, double x, const DdpExactWindow *w)
{
    *lo += ddp_exact_round(x, w->lo_bias);
}

/* Adds X (any double with |X| < W->limit) to S. A larger X, or an infinite
 * one, makes S NaN and raises the overflow flag; a NaN X makes S NaN. */
static inline void ddp_exact_add(DdpExact *s, double x, const DdpExactWindow *w)
{
    if (!(fabs(x) < w->limit)) {
        if (x == x)
            ddp_exact_overflow_raise(x, w);
        s->hi = NAN;
        return;
    }
    ddp_exact_deposit(&s->hi, &s->lo, x, w);
}

/* The largest |X[i]| of N floats, NaN if one is: the largest of their
 * magnitudes' bits (which order as the magnitudes do, a NaN's above
 * infinity's), an integer maximum that runs in vector lanes. */
static inline float ddp_largest_magnitude(const float *x, int n)
{
    uint32_t most = 0;
    for (int i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        bits &= 0x7fffffffu;
        most = bits > most ? bits : most;
    }
    float value;
    memcpy(&value, &most, sizeof value);
    return value;
}

/* One chunk of ddp_exact_add_floats (below). */
static inline void ddp_exact_add_floats_chunk(double *hi, double *lo, const float *in, int n, int fresh,
                                              const DdpExactWindow *w)
{
    /* Both bounds are powers of two, exact as floats (lo_only_below 0 where
     * it is beneath a float's range); a NaN is outside, and large. */
    const float most = ddp_largest_magnitude(in, n);
    const int outside = !(most < (float)w->limit), large = !(most < (float)w->lo_only_below);
    if (fresh)
        for (int j = 0; j < n; j++)
            hi[j] = lo[j] = 0.0;
    if (outside)
        for (int j = 0; j < n; j++) {
            DdpExact s = {hi[j], lo[j]};
            ddp_exact_add(&s, in[j], w);
            hi[j] = s.hi;
            lo[j] = s.lo;
        }
    else if (!large)
        for (int j = 0; j < n; j++)
            ddp_exact_deposit_small(&lo[j], in[j], w);
    else
        for (int j = 0; j < n; j++)
            ddp_exact_deposit(&hi[j], &lo[j], in[j], w);
}

/* The sums (HI[j], LO[j]) += IN[j] for j < N, each IN[j] one part, kept as
 * two arrays so that the deposits run in vector lanes; they start as the
 * empty sums if FRESH. The same bits as N calls of ddp_exact_add. The parts
 * go in chunks of 64, each checked first: a chunk of parts all below
 * lo_only_below goes to LO alone, one with a part out of the window the
 * checked way. (A conv's weight gradient has a few parts above
 * lo_only_below in most samples, so whole rows took the full deposit nearly
 * always. Chunks of 16 lost the vector loops, which the compiler unrolled
 * into scalar code; 64 and 128 were as fast as each other, 32 and 256 a
 * little slower, on MNIST's conv2.) */
static inline void ddp_exact_add_floats(double *hi, double *lo, const float *in, int n, int fresh,
                                        const DdpExactWindow *w)
{
    enum { CHUNK = 64 };
    int j0 = 0;
    for (; j0 + CHUNK <= n; j0 += CHUNK) /* a constant count: vector loops with no scalar tails */
        ddp_exact_add_floats_chunk(hi + j0, lo + j0, in + j0, CHUNK, fresh, w);
    if (j0 < n)
        ddp_exact_add_floats_chunk(hi + j0, lo + j0, in + j0, n - j0, fresh, w);
}

/* S += T: both sums in the same window; exact. */
static inline void ddp_exact_merge(DdpExact *s, DdpExact t)
{
    s->hi += t.hi;
    s->lo += t.lo;
}

/* S's value, rounded once. */
static inline double ddp_exact_value(DdpExact s)
{
    return s.hi + s.lo;
}

#ifdef __cplusplus
}
#endif

#endif
