/*
 * exact_sum.c: the two windows of a run's order-free sums, and the flag a
 * part too large for its window raises (what and why in exact_sum.h).
 */
#include "exact_sum.h"

#include <limits.h>

DdpExactWindow ddp_exact_window(int top, int level, int count_bits, const char *what)
{
    /* A grid is the spacing of its bias's binade, 2^(exp - 52) for a bias of
     * 1.5 * 2^exp; adding the bias rounds a part to it, exactly as long as
     * the part lies within half that binade. The sums start from zero, and
     * are exact while they stay below 2^52 grid steps.
     * HI: the sum of 2^count parts below 2^top, each rounded by at most half
     * a step, stays below 2^(top + count + 1): 2^50 steps of a grid of
     * 2^(top + count - 50), the bias's exponent top + count + 2. Or a coarser
     * grid, whose half step is 2^level. */
    int hi_exp = top + count_bits + 2;
    if (hi_exp < level + 53)
        hi_exp = level + 53;
    /* LO: the remainders, each at most half of HI's grid, 2^(hi_exp - 53),
     * so their sums stay below 2^(hi_exp - 53 + count + 1): the same 2^50
     * steps of LO's grid. */
    const int lo_exp = (hi_exp - 53) + count_bits + 2;
    DdpExactWindow w = {
        .hi_bias = ldexp(1.5, hi_exp),
        .lo_bias = ldexp(1.5, lo_exp),
        .limit = ldexp(1.0, top),
        .lo_grid = ldexp(1.0, lo_exp - 52),
        .lo_only_below = ldexp(1.0, hi_exp - 53),
        .top = top,
        .count = count_bits,
        .what = what,
    };
    return w;
}

int ddp_exact_count_bits(int64_t parts)
{
    int bits = 1;
    while (bits < 62 && ((int64_t)1 << bits) < parts)
        bits++;
    return bits;
}

DdpExactWindow ddp_grad_window = {0}, ddp_stats_window = {0};

/* The windows before ddp_exact_windows_set: those of one global batch of
 * 1024 (gradient parts below 2^10). */
__attribute__((constructor)) static void default_windows(void)
{
    ddp_exact_windows_set(1024, 1024);
}

void ddp_exact_windows_set(int64_t smallest, int64_t parts)
{
    const int bits = ddp_exact_count_bits(parts);
    /* A gradient's parts carry their batch's 1 / global batch of the mean
     * loss: the smallest batch's are the largest. Most of them lie below
     * 2^DDP_EXACT_GRAD_LEVEL / the step's parts, and go to LO alone. */
    ddp_grad_window = ddp_exact_window(DDP_EXACT_GRAD_TOP - ddp_exact_count_bits(smallest),
                                       DDP_EXACT_GRAD_LEVEL - bits, bits, "gradient");
    ddp_stats_window = ddp_exact_window(DDP_EXACT_STATS_TOP, INT_MIN / 2, bits, "batchnorm statistic");
}

/* Written by whichever thread meets the part first; read by the trainer
 * between steps. */
static int overflowed;
static double overflow_part;
static const DdpExactWindow *overflow_window;

void ddp_exact_overflow_raise(double part, const DdpExactWindow *window)
{
    if (!__atomic_exchange_n(&overflowed, 1, __ATOMIC_ACQ_REL)) {
        overflow_part = fabs(part);
        overflow_window = window;
    }
}

int ddp_exact_overflowed(double *part, const DdpExactWindow **window)
{
    int seen = __atomic_load_n(&overflowed, __ATOMIC_ACQUIRE);
    if (seen && part)
        *part = overflow_part;
    if (seen && window)
        *window = overflow_window;
    return seen;
}

void ddp_exact_overflow_clear(void)
{
    __atomic_store_n(&overflowed, 0, __ATOMIC_RELEASE);
}
