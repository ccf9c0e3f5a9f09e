/*
 * check.cpp: runtime/lane_math.h as a generated program runs it, compiled
 * with ddpc's flags for a CPU program (tests/unit/test_lanes.c builds it so).
 *
 *  - accuracy: ddp_erff, ddp_expf and ddp_tanhf against double's erf, exp
 *    and tanh on every STRIDE'th float (erf and tanh below 10 in magnitude,
 *    exp on [-104, 89]), in
 *    units of the float's last place (ulp) at the exact value, or of the
 *    smallest subnormal below 2^-126; at most MOST_ULP each;
 *  - special values: NaN, infinities, zeros, the ends of exp's range;
 *  - the same bits in a vector loop, in its tail (each value again alone,
 *    a loop of 1) and in a loop the compiler may not vectorise: thread
 *    counts split a kernel's loop at other places, and another machine or
 *    compiler may leave a loop scalar, so this is what keeps a program's
 *    steps independent of them.
 *
 * Prints what it measured, then "lane_math: ok", or each fault and exits 1.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lane_math.h"

enum { STRIDE = 97, VALUES = 4099 };
static const double MOST_ULP = 1.5;

static int faults = 0;

static void fault(const char *what, double x, double got, double want)
{
    if (++faults <= 20)
        printf("lane_math: FAULT %s(%.9g) = %.9g, not %.9g\n", what, x, got, want);
}

/* The float ulp at |V| (a subnormal's below 2^-126). */
static double ulp_at(double v)
{
    v = fabs(v);
    if (v < ldexp(1.0, -126))
        return ldexp(1.0, -149);
    int e;
    frexp(v, &e);
    return ldexp(1.0, e - 24);
}

/* Worst error in ulp of F against REF over every STRIDE'th float of [LO, HI]
 * (one sign: the bit patterns of |x| from FROM to TO, times SIGN). */
static double worst(float (*f)(float), double (*ref)(double), uint32_t from, uint32_t to, float sign, float *at)
{
    double most = 0.0;
    for (uint32_t b = from; b <= to && b >= from; b += STRIDE) {
        const float x = sign * ddp_lane_float(b);
        const double want = ref(x), got = f(x);
        /* past FLT_MAX by half an ulp or more: infinity */
        const double err = isinf((float)want) ? (got == (float)want ? 0.0 : INFINITY) : fabs(got - want) / ulp_at(want);
        if (!(err <= most)) {
            most = err;
            *at = x;
        }
    }
    return most;
}

/* The kernels' form: a loop the compiler vectorises, with a scalar tail. */
template <float (*F)(float)> __attribute__((noinline)) static void vector_loop(int n, const float *x, float *y)
{
    for (int i = 0; i < n; i++)
        y[i] = F(x[i]);
}

/* The same, never vectorised: what a loop the compiler leaves scalar (in
 * another kernel, or on another machine or compiler) computes. */
template <float (*F)(float)>
__attribute__((noinline, optimize("no-tree-vectorize"))) static void scalar_loop(int n, const float *x, float *y)
{
    for (int i = 0; i < n; i++)
        y[i] = F(x[i]);
}

template <float (*F)(float)> static void check_lanes(const char *what, const float *x)
{
    static float all[VALUES], one[VALUES], plain[VALUES];
    vector_loop<F>(VALUES, x, all);
    for (int i = 0; i < VALUES; i++)
        vector_loop<F>(1, x + i, one + i);
    scalar_loop<F>(VALUES, x, plain);
    int differ = 0;
    for (int i = 0; i < VALUES; i++)
        if ((ddp_lane_bits(all[i]) != ddp_lane_bits(one[i]) || ddp_lane_bits(all[i]) != ddp_lane_bits(plain[i])) &&
            differ++ < 5)
            printf("lane_math: FAULT %s(%.9g): %.9g in the vector loop, %.9g alone, %.9g in a scalar loop\n", what,
                   x[i], all[i], one[i], plain[i]);
    faults += differ;
    printf("lane_math: %s: %d values, %d of them other bits alone or in a scalar loop than in the vector loop\n", what,
           VALUES, differ);
}

int main(void)
{
    float at = 0.0f;
    const uint32_t ten = ddp_lane_bits(10.0f), most_exp = ddp_lane_bits(89.0f), least_exp = ddp_lane_bits(104.0f);
    const double erf_ulp = fmax(worst(ddp_erff, erf, 0, ten, 1.0f, &at), worst(ddp_erff, erf, 1, ten, -1.0f, &at));
    printf("lane_math: erf within %.3f ulp (worst at %.9g)\n", erf_ulp, at);
    const double exp_ulp = fmax(worst(ddp_expf, exp, 0, most_exp, 1.0f, &at),
                                worst(ddp_expf, exp, 0, least_exp, -1.0f, &at));
    printf("lane_math: exp within %.3f ulp (worst at %.9g)\n", exp_ulp, at);
    const double tanh_ulp = fmax(worst(ddp_tanhf, tanh, 0, ten, 1.0f, &at), worst(ddp_tanhf, tanh, 1, ten, -1.0f, &at));
    printf("lane_math: tanh within %.3f ulp (worst at %.9g)\n", tanh_ulp, at);
    if (!(erf_ulp <= MOST_ULP))
        fault("erf's worst ulp", 0, erf_ulp, MOST_ULP);
    if (!(tanh_ulp <= MOST_ULP))
        fault("tanh's worst ulp", 0, tanh_ulp, MOST_ULP);
    if (!(exp_ulp <= MOST_ULP))
        fault("exp's worst ulp", 0, exp_ulp, MOST_ULP);

    /* special values, each against what C's erff, expf and tanhf give */
    const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 1.0f, -1.0f, 4.0f, 3.99f,
                             0.9f, -0.9f, 9.1f, 44.0f, 45.0f, 88.72f, 88.73f, 89.0f, 1e30f, -87.3f, -103.0f, -103.98f,
                             -104.0f, -1e30f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        const float x = special[i];
        const float e = ddp_erff(x), want_e = erff(x), p = ddp_expf(x), want_p = expf(x);
        const float th = ddp_tanhf(x), want_th = tanhf(x);
        /* NaN for NaN; otherwise within the ulp bound (exactly, at the ends) */
        if (isnan(want_e) ? !isnan(e) : !(fabs((double)e - want_e) <= ulp_at(want_e)) || signbit(e) != signbit(want_e))
            fault("erf", x, e, want_e);
        if (isnan(want_th) ? !isnan(th)
                           : !(fabs((double)th - want_th) <= 2 * ulp_at(want_th)) || signbit(th) != signbit(want_th))
            fault("tanh", x, th, want_th);
        if (isnan(want_p) ? !isnan(p) : isinf(want_p) || want_p == 0.0f ? p != want_p
                                                                          : !(fabs((double)p - want_p) <= 2 * ulp_at(want_p)))
            fault("exp", x, p, want_p);
    }

    /* values across both erf's parts and exp's range, and the special ones */
    static float x[VALUES];
    uint32_t state = 1;
    for (int i = 0; i < VALUES; i++) {
        state = state * 1664525u + 1013904223u;
        x[i] = ((float)(state >> 8) / 16777216.0f - 0.5f) * (i % 2 ? 12.0f : 200.0f);
    }
    memcpy(x, special, sizeof special);
    check_lanes<ddp_erff>("erf", x);
    check_lanes<ddp_expf>("exp", x);
    check_lanes<ddp_tanhf>("tanh", x);

    if (faults) {
        printf("lane_math: %d faults\n", faults);
        return 1;
    }
    printf("lane_math: ok\n");
    return 0;
}
