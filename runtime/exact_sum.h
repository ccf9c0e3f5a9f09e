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
 * of its own grid, fixed for the whole run by a DdpExactWindow. A part X is
 * split as HI's grid rounds it (to nearest, ties away from zero) plus the
 * remainder, which LO's grid rounds the same way. That rounding depends on X
 * alone, never on what the accumulator already holds; and sums of multiples
 * of a grid that stay below 2^52 grid steps are exact in double, in any order,
 * across ranks too (MPI_SUM of HI and of LO, as plain doubles). The value is
 * HI + LO, rounded once.
 *
 * The window: parts below 2^top in magnitude, at most 2^count of them in one
 * sum (all ranks together). HI's grid is then 2^(top + count - 50), LO's
 * 2^(top + 2 count - 101), and a sum is within 2^count half steps of LO's
 * grid of the exact sum of its parts. A gradient's parts are each sample's
 * share of a loss that is a mean over the global batch, so the gradient
 * window bounds them by 2^20 / that batch, rounded down to a power of two
 * (2^(20 - count) for a step of one full batch): the sum stays below about
 * 2^20, and LO's grid is 2^(count - 81) (a global batch of 128: 5.3e-23, the
 * sum within 3.4e-21 of the exact one). What lies
 * below LO's grid is rounded away, the same in every grouping. A part at or
 * above the limit (a diverging run) cannot be kept exactly: it makes the sum
 * NaN and raises ddp_exact_overflowed(), so that the run stops, saying why,
 * instead of training on.
 *
 * The count is of parts, so a sum takes one part per sample: a kernel that
 * deposited per pixel would overrun the window. Where a sample's part is
 * itself a sum (a bias's over its positions), that inner sum is a plain
 * double sum in an order fixed by the sample alone.
 *
 * The cost: a deposit is 6 floating-point operations and 2 bit operations
 * where a plain sum takes one add (a linear layer's product: 4 adds, 2 ORs
 * and the multiply, against one multiply-add), and an accumulator two doubles: gradients are 16 bytes on CPUs, and
 * the all-reduce moves four times the bytes of the float parameters.
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

/* A window (see above): BIAS values of 1.5 * 2^e keep an accumulator in one
 * binade, whose spacing is the grid; LIMIT is 2^top. */
typedef struct {
    double hi_bias, lo_bias, limit;
    int top, count;   /* what it was made for: parts below 2^top, at most 2^count of them */
    const char *what; /* what its sums are, for messages ("gradient") */
} DdpExactWindow;

/* The most parts one sum may have: 2^DDP_EXACT_MAX_COUNT_BITS (a global
 * batch times --no-sync-every), where a gradient's LO grid is 2^-61. */
enum { DDP_EXACT_MAX_COUNT_BITS = 20 };

/* The two windows of a step (exact_sum.c): gradients (parts below
 * 2^(DDP_EXACT_GRAD_TOP - ceil(log2 of the smallest batch)): each sample's
 * share of a loss that is a mean over its global batch) and batchnorm's
 * forward statistics (a sample's sum of x and of x^2 over a channel's pixels,
 * below 2^DDP_EXACT_STATS_TOP). */
enum { DDP_EXACT_GRAD_TOP = 20, DDP_EXACT_STATS_TOP = 32 };
extern DdpExactWindow ddp_grad_window, ddp_stats_window;

/* The window for parts below 2^TOP, at most 2^COUNT_BITS of them, named WHAT. */
DdpExactWindow ddp_exact_window(int top, int count_bits, const char *what);

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

/* X with the lowest bit of its significand set: rounding it to a grid coarser
 * than twice its last bit then never meets a tie, and gives what X would round
 * to, ties taken away from zero (the remainder is computed from X itself). A
 * zero becomes the smallest subnormal, which rounds to zero again: an add
 * with a subnormal operand and a normal result costs current x86 CPUs nothing
 * extra, and leaving zeros alone took mlp.net's weight gradients twice as long. */
static inline double ddp_exact_tiebreak(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    bits |= 1;
    memcpy(&x, &bits, sizeof bits);
    return x;
}

/* The deposit itself: the sum (HI, LO) += X, for |X| < W->limit, unchecked
 * (the callers check, one part or a whole row at a time). */
static inline void ddp_exact_deposit(double *hi, double *lo, double x, const DdpExactWindow *w)
{
    const double h = *hi + w->hi_bias;            /* exact: HI is on the grid, far inside the binade */
    const double h_new = h + ddp_exact_tiebreak(x); /* rounds X to the grid, whatever HI holds */
    const double rest = x - (h_new - h);          /* both exact */
    *hi = h_new - w->hi_bias;
    *lo = (*lo + w->lo_bias) + ddp_exact_tiebreak(rest) - w->lo_bias;
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

/* The sums (HI[j], LO[j]) += IN[j] for j < N, each IN[j] one part, kept as
 * two arrays so that the deposits run in vector lanes; they start as the
 * empty sums if FRESH. The parts are checked first, all at once; a row with
 * a part out of the window goes the checked way. The same bits as N calls
 * of ddp_exact_add. */
static inline void ddp_exact_add_floats(double *hi, double *lo, const float *in, int n, int fresh,
                                        const DdpExactWindow *w)
{
    int outside = 0;
    for (int j = 0; j < n; j++)
        outside |= !(fabsf(in[j]) < (float)w->limit);
    if (outside) {
        for (int j = 0; j < n; j++) {
            DdpExact s = {fresh ? 0.0 : hi[j], fresh ? 0.0 : lo[j]};
            ddp_exact_add(&s, in[j], w);
            hi[j] = s.hi;
            lo[j] = s.lo;
        }
        return;
    }
    for (int j = 0; j < n; j++) {
        if (fresh)
            hi[j] = lo[j] = 0.0;
        ddp_exact_deposit(&hi[j], &lo[j], in[j], w);
    }
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
