/*
 * Tests of runtime/exact_sum.h: order-free sums give the same bits however
 * their parts are ordered and grouped (into ranks, micro-batches, threads),
 * against plain double sums, which do not; their value is within the window's
 * grid of the exact sum (computed here with long double pairs); parts out of
 * the window poison the sum and raise the flag.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exact_sum.h"
#include "testutil.h"

/* A deterministic generator (xorshift64*), so that failures reproduce. */
static uint64_t state = 88172645463325252u;
static uint64_t next(void)
{
    state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
    return state * 2685821657736338717u;
}

static double uniform(void)
{
    return (double)(next() >> 11) * 0x1p-53;
}

/* Parts as gradients have them: signs mixed, magnitudes over 40 binades,
 * some exact products of two floats, some exact zeros and ties. */
static double part(int top)
{
    switch (next() % 6) {
    case 0: return 0.0;
    case 1: return ldexp(1.0, top - 60 + (int)(next() % 40)) * (next() & 1 ? 1 : -1); /* powers of 2: ties */
    case 2: return (double)(float)(uniform() - 0.5) * (float)(uniform() * 1e-3);     /* a product of floats */
    default: return (uniform() - 0.5) * ldexp(1.0, top - 1 - (int)(next() % 40));
    }
}

static void shuffle(double *v, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(next() % (uint64_t)(i + 1));
        double t = v[i];
        v[i] = v[j], v[j] = t;
    }
}

/* The sum of V[0..n) grouped as RANKS ranks of interleaved parts (rank r
 * takes every RANKS-th), each rank's sum merged in turn, as an all-reduce
 * adds them. */
static DdpExact grouped(const double *v, int n, int ranks, const DdpExactWindow *w)
{
    DdpExact total = {0.0, 0.0};
    for (int r = ranks - 1; r >= 0; r--) {
        DdpExact s = {0.0, 0.0};
        for (int i = r; i < n; i += ranks)
            ddp_exact_add(&s, v[i], w);
        ddp_exact_merge(&total, s);
    }
    return total;
}

/* The levels the tests try: the finest grids, and a coarse one, as the
 * gradients' level makes (parts below 2^(top - 12) have no HI share). */
static DdpExactWindow window_at(int top, int count_bits, int coarse)
{
    return ddp_exact_window(top, coarse ? top - 12 : INT_MIN / 2, count_bits, "test");
}

static double plain_grouped(const double *v, int n, int ranks)
{
    double total = 0.0;
    for (int r = ranks - 1; r >= 0; r--) {
        double s = 0.0;
        for (int i = r; i < n; i += ranks)
            s += v[i];
        total += s;
    }
    return total;
}

/* Any order and any grouping into 1..7 ranks: the same HI and LO bits. Plain
 * double sums of the same parts do differ (else the test proves nothing). */
static void test_order_free(void)
{
    enum { N = 512, TRIALS = 200 };
    double v[N];
    int differ = 0, plain_differ = 0;
    for (int t = 0; t < TRIALS; t++) {
        const DdpExactWindow w = window_at(DDP_EXACT_GRAD_TOP, ddp_exact_count_bits(N), t % 2);
        for (int i = 0; i < N; i++)
            v[i] = part(DDP_EXACT_GRAD_TOP);
        const DdpExact first = grouped(v, N, 1, &w);
        const double plain_first = plain_grouped(v, N, 1);
        for (int ranks = 1; ranks <= 7; ranks++) {
            shuffle(v, N);
            const DdpExact s = grouped(v, N, ranks, &w);
            differ += memcmp(&s, &first, sizeof s) != 0;
            plain_differ += plain_grouped(v, N, ranks) != plain_first;
        }
    }
    CU_ASSERT_EQUAL(differ, 0);
    CU_ASSERT(plain_differ > 0);
}

/* The value is the exact sum up to LO's grid per part: long double sums of
 * pairs (each part split exactly into two doubles' worth) are the reference. */
static void test_close_to_exact(void)
{
    enum { N = 256 };
    for (int t = 0; t < 100; t++) {
        const DdpExactWindow w = window_at(DDP_EXACT_GRAD_TOP, ddp_exact_count_bits(N), t % 2);
        DdpExact s = {0.0, 0.0};
        long double hi = 0.0L, lo = 0.0L; /* a two-sum of long doubles: exact enough here */
        for (int i = 0; i < N; i++) {
            const double x = part(DDP_EXACT_GRAD_TOP);
            ddp_exact_add(&s, x, &w);
            const long double sum = hi + x;
            lo += (hi - (sum - (sum - hi))) + ((long double)x - (sum - hi));
            hi = sum;
        }
        const long double want = hi + lo;
        const long double err = fabsl((long double)ddp_exact_value(s) - want);
        const long double allowed = N * w.lo_grid / 2 + fabsl(want) * 0x1p-52L;
        CU_ASSERT(err <= allowed);
        if (!(err <= allowed))
            printf("\n    error %Lg over the allowed %Lg ", err, allowed);
    }
}

/* A part at or beyond the limit, or infinite, makes the sum NaN and raises
 * the flag; a NaN part makes it NaN without raising it. */
static void test_outside_the_window(void)
{
    const DdpExactWindow w = ddp_exact_window(10, INT_MIN / 2, 4, "test");
    double part_seen = 0.0;
    ddp_exact_overflow_clear();
    DdpExact s = {0.0, 0.0};
    ddp_exact_add(&s, 1023.5, &w);
    CU_ASSERT(!isnan(ddp_exact_value(s)));
    CU_ASSERT_FALSE(ddp_exact_overflowed(NULL, NULL));
    ddp_exact_add(&s, NAN, &w);
    CU_ASSERT(isnan(ddp_exact_value(s)));
    CU_ASSERT_FALSE(ddp_exact_overflowed(NULL, NULL));
    s = (DdpExact){0.0, 0.0};
    ddp_exact_add(&s, -1024.0, &w);
    CU_ASSERT(isnan(ddp_exact_value(s)));
    const DdpExactWindow *seen_in = NULL;
    CU_ASSERT_TRUE(ddp_exact_overflowed(&part_seen, &seen_in));
    CU_ASSERT_EQUAL(part_seen, 1024.0);
    CU_ASSERT_PTR_EQUAL(seen_in, &w);
    ddp_exact_overflow_clear();
    s = (DdpExact){0.0, 0.0};
    ddp_exact_add(&s, INFINITY, &w);
    CU_ASSERT(isnan(ddp_exact_value(s)));
    CU_ASSERT_TRUE(ddp_exact_overflowed(NULL, NULL));
    ddp_exact_overflow_clear();
    /* the row form: the same bits as part by part, and the same check */
    const float row[5] = {1.5f, -3e-7f, 0.0f, 1000.0f, -0.0f};
    double hi[5], lo[5];
    DdpExact by_part[5];
    memset(by_part, 0, sizeof by_part);
    ddp_exact_add_floats(hi, lo, row, 5, 1, &w);
    for (int i = 0; i < 5; i++) {
        ddp_exact_add(&by_part[i], row[i], &w);
        CU_ASSERT(hi[i] == by_part[i].hi && lo[i] == by_part[i].lo);
    }
    const float bad[2] = {1.0f, 4096.0f};
    ddp_exact_add_floats(hi, lo, bad, 2, 0, &w);
    CU_ASSERT(!isnan(hi[0] + lo[0]) && isnan(hi[1] + lo[1]));
    CU_ASSERT_TRUE(ddp_exact_overflowed(NULL, NULL));
    ddp_exact_overflow_clear();
}

/* A part exactly halfway between two steps of HI's grid (a tie) rounds the
 * same way whatever HI already holds: parts are rounded against a constant,
 * ties to even, and the accumulator's last bit, odd or even, must never
 * decide it. */
static void test_ties_do_not_depend_on_the_sum(void)
{
    const DdpExactWindow w = window_at(DDP_EXACT_GRAD_TOP, 8, 0);
    const double grid = ldexp(1.0, w.top + w.count - 50);
    CU_ASSERT_EQUAL(w.lo_only_below, grid / 2);
    const double tie = grid / 2, small = ldexp(1.0, -30);
    DdpExact a = {0.0, 0.0}, b = {0.0, 0.0};
    ddp_exact_add(&a, grid, &w); /* HI odd in its grid steps */
    ddp_exact_add(&a, tie, &w);
    ddp_exact_add(&b, tie, &w); /* HI even */
    ddp_exact_add(&b, grid, &w);
    CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
    ddp_exact_add(&a, small, &w);
    ddp_exact_add(&a, -tie, &w);
    ddp_exact_add(&b, -tie, &w);
    ddp_exact_add(&b, small, &w);
    CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof a), 0);
    CU_ASSERT_EQUAL(ddp_exact_value(a), grid + small);
}

/* The window's edges: 2^count parts just under the limit, all of one sign,
 * and parts whose remainders are just under half a HI step, any grouping:
 * the same bits, and the exact sum, rounded once, as the value. A HI window
 * two binades too tight fails here (the odd steps cross its binade). At a
 * coarse level, 2^count parts just under lo_only_below fill LO to its bound
 * of 2^50 steps: the same bits in any grouping, within LO's half steps. */
static void test_the_window_edges(void)
{
    enum { COUNT = 6, N = 1 << COUNT };
    const DdpExactWindow w = window_at(DDP_EXACT_GRAD_TOP, COUNT, 0);
    const double grid = ldexp(1.0, w.top + w.count - 50);
    const double under = nextafter(w.limit, 0.0), near_half = 1.5 * grid - ldexp(grid, -40);
    const double odd_steps = w.limit - 1.25 * grid; /* HI gets an odd number of grid steps */
    for (int sign = -1; sign <= 1; sign += 2)
        for (int kind = 0; kind < 3; kind++) {
            double v[N];
            for (int i = 0; i < N; i++)
                v[i] = sign * (kind == 0 ? under : kind == 1 ? near_half * (1 + i % 3) : odd_steps);
            const DdpExact first = grouped(v, N, 1, &w);
            for (int ranks = 2; ranks <= 5; ranks++) {
                const DdpExact s = grouped(v, N, ranks, &w);
                CU_ASSERT_EQUAL(memcmp(&s, &first, sizeof s), 0);
            }
            long double exact = 0.0L; /* exact: at most 59 bits wide, long double has 64 */
            for (int i = 0; i < N; i++)
                exact += v[i];
            CU_ASSERT_EQUAL(ddp_exact_value(first), (double)exact);
        }
    const DdpExactWindow coarse = window_at(DDP_EXACT_GRAD_TOP, COUNT, 1);
    for (int sign = -1; sign <= 1; sign += 2) {
        double v[N];
        for (int i = 0; i < N; i++)
            v[i] = sign * nextafter(coarse.lo_only_below, 0.0);
        const DdpExact first = grouped(v, N, 1, &coarse);
        for (int ranks = 2; ranks <= 5; ranks++) {
            const DdpExact s = grouped(v, N, ranks, &coarse);
            CU_ASSERT_EQUAL(memcmp(&s, &first, sizeof s), 0);
        }
        CU_ASSERT_EQUAL(first.hi, 0.0);
        CU_ASSERT_EQUAL(fabs(first.lo), ldexp(1.0, 50) * coarse.lo_grid); /* every share one whole step */
        CU_ASSERT(fabs(ddp_exact_value(first) - N * v[0]) <= N * coarse.lo_grid / 2);
    }
}

/* Below lo_only_below a part has no HI share: ddp_exact_deposit_small, and
 * the row form's all-small rows, give ddp_exact_deposit's bits, at both
 * levels; at the coarse one lo_only_below is 2^level. Exactly at it a part
 * ties, to even: no HI share either; just above it, one. */
static void test_small_parts_in_lo_alone(void)
{
    for (int coarse = 0; coarse <= 1; coarse++) {
        const DdpExactWindow w = window_at(DDP_EXACT_GRAD_TOP, 8, coarse);
        if (coarse)
            CU_ASSERT_EQUAL(w.lo_only_below, ldexp(1.0, DDP_EXACT_GRAD_TOP - 12));
        enum { N = 64 };
        float row[N];
        double hi[N], lo[N];
        size_t differ = 0, hi_shares = 0;
        for (int t = 0; t < 200; t++) {
            double full_hi = 0.0, full_lo = 0.0, small_lo = 0.0;
            for (int i = 0; i < N; i++) {
                const double x = (uniform() - 0.5) * 2 * w.lo_only_below; /* below it */
                ddp_exact_deposit(&full_hi, &full_lo, x, &w);
                ddp_exact_deposit_small(&small_lo, x, &w);
                row[i] = (float)((uniform() - 0.5) * 2 * w.lo_only_below);
            }
            differ += full_hi != 0.0 || full_lo != small_lo;
            ddp_exact_add_floats(hi, lo, row, N, 1, &w);
            for (int i = 0; i < N; i++) {
                DdpExact by_part = {0.0, 0.0};
                ddp_exact_add(&by_part, row[i], &w);
                differ += by_part.hi != hi[i] || by_part.lo != lo[i];
            }
            double at_hi = 0.0, at_lo = 0.0;
            ddp_exact_deposit(&at_hi, &at_lo, w.lo_only_below * (1.001 + uniform()), &w);
            hi_shares += at_hi != 0.0;
            at_hi = 0.0;
            ddp_exact_deposit(&at_hi, &at_lo, (t % 2 ? -1 : 1) * w.lo_only_below, &w);
            differ += at_hi != 0.0;
        }
        CU_ASSERT_EQUAL(differ, 0);
        CU_ASSERT_EQUAL(hi_shares, 200);
    }
    /* A long row in the row form's chunks: all small, one large part, one
     * out of the window, and a short last chunk; part by part the same. */
    const DdpExactWindow w = window_at(DDP_EXACT_GRAD_TOP, 8, 1);
    enum { LONG = 64 * 5 + 7 };
    float row[LONG];
    double hi[LONG], lo[LONG];
    DdpExact by_part[LONG];
    memset(by_part, 0, sizeof by_part);
    for (int i = 0; i < LONG; i++)
        row[i] = (float)((uniform() - 0.5) * w.lo_only_below);
    row[64 + 10] = (float)(3 * w.lo_only_below); /* chunk 1: one part with a HI share */
    row[128 + 63] = (float)(2 * w.limit);        /* chunk 2: out of the window */
    row[LONG - 1] = (float)(5 * w.lo_only_below);
    ddp_exact_overflow_clear();
    for (int fresh = 1; fresh >= 0; fresh--) {
        ddp_exact_add_floats(hi, lo, row, LONG, fresh, &w);
        for (int i = 0; i < LONG; i++)
            ddp_exact_add(&by_part[i], row[i], &w);
    }
    size_t differ = 0;
    for (int i = 0; i < LONG; i++)
        differ += i == 128 + 63 ? !isnan(hi[i] + lo[i]) : (hi[i] != by_part[i].hi || lo[i] != by_part[i].lo);
    CU_ASSERT_EQUAL(differ, 0);
    CU_ASSERT(hi[64 + 10] != 0.0 && hi[LONG - 1] != 0.0);
    CU_ASSERT_TRUE(ddp_exact_overflowed(NULL, NULL));
    ddp_exact_overflow_clear();
}

/* The windows a step sets: the count of parts rounds up to a power of two,
 * and the gradients' limit follows the step's smallest batch. */
static void test_windows(void)
{
    CU_ASSERT_EQUAL(ddp_exact_count_bits(1), 1);
    CU_ASSERT_EQUAL(ddp_exact_count_bits(64), 6);
    CU_ASSERT_EQUAL(ddp_exact_count_bits(65), 7);
    ddp_exact_windows_set(128, 128);
    CU_ASSERT_EQUAL(ddp_grad_window.count, 7);
    CU_ASSERT_EQUAL(ddp_grad_window.top, DDP_EXACT_GRAD_TOP - 7); /* parts carry the mean's 1/128 */
    CU_ASSERT_EQUAL(ddp_stats_window.top, DDP_EXACT_STATS_TOP);
    CU_ASSERT_EQUAL(ddp_grad_window.limit, ldexp(1.0, DDP_EXACT_GRAD_TOP - 7));
    CU_ASSERT_EQUAL(ddp_grad_window.lo_only_below, ldexp(1.0, DDP_EXACT_GRAD_LEVEL - 7));
    CU_ASSERT_EQUAL(ddp_grad_window.lo_grid, ldexp(1.0, DDP_EXACT_GRAD_LEVEL - 50));
    CU_ASSERT_EQUAL(ddp_stats_window.lo_only_below, ldexp(1.0, DDP_EXACT_STATS_TOP + 7 - 51)); /* the finest */
    /* a step of 4 batches of 256 and a last one of 3 (the epoch's end): the
     * short batch's parts are the largest, 256/3 times a full one's */
    ddp_exact_windows_set(3, 4 * 256 + 3);
    CU_ASSERT_EQUAL(ddp_grad_window.count, 11);
    CU_ASSERT_EQUAL(ddp_grad_window.top, DDP_EXACT_GRAD_TOP - 2);
    CU_ASSERT_EQUAL(ddp_grad_window.lo_only_below, ldexp(1.0, DDP_EXACT_GRAD_LEVEL - 11)); /* by all the parts */
    CU_ASSERT_EQUAL(ddp_grad_window.lo_grid, ldexp(1.0, DDP_EXACT_GRAD_LEVEL - 50));
    ddp_exact_windows_set((int64_t)1 << DDP_EXACT_MAX_COUNT_BITS, (int64_t)1 << DDP_EXACT_MAX_COUNT_BITS);
    CU_ASSERT_EQUAL(ddp_grad_window.count, DDP_EXACT_MAX_COUNT_BITS);
    CU_ASSERT_EQUAL(ddp_grad_window.lo_grid, ldexp(1.0, DDP_EXACT_GRAD_LEVEL - 50));
    /* the most parts, the last batch of one sample: the limit, not the
     * level, sets HI's grid, and LO's is coarser */
    ddp_exact_windows_set(1, (int64_t)1 << DDP_EXACT_MAX_COUNT_BITS);
    CU_ASSERT_EQUAL(ddp_grad_window.lo_only_below, ldexp(1.0, -12));
    CU_ASSERT_EQUAL(ddp_grad_window.lo_grid, ldexp(1.0, -42));
    ddp_exact_windows_set(1024, 1024); /* as they started */
}

void suite_exact_sum(void)
{
    static const TestCase cases[] = {
        {"any order and grouping into ranks: the same bits (plain double sums differ)", test_order_free},
        {"the value is the exact sum up to the window's grid", test_close_to_exact},
        {"a part beyond the window: NaN and the flag; NaN: NaN", test_outside_the_window},
        {"a tie rounds the same whatever the sum holds", test_ties_do_not_depend_on_the_sum},
        {"the window's edges: 2^count parts just under the limit, any grouping", test_the_window_edges},
        {"parts below lo_only_below: LO alone, the same bits", test_small_parts_in_lo_alone},
        {"the windows a step sets: the count, and the limit by the smallest batch", test_windows},
        {NULL, NULL},
    };
    test_add_suite("exact_sum", cases);
}
