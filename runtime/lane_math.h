/*
 * lane_math.h: erff, expf and tanhf for the generated kernels (GELU in both
 * forms, sigmoid, tanh) that a CPU build runs in vector lanes, with the same
 * bits in every lane.
 *
 * Why: glibc's erff, expf and tanhf are calls the compiler cannot
 * vectorise, so a GELU kernel ran one value at a time, 7 to 10 times
 * slower than in vector lanes (GELU's forward loop over 32,768 values, one
 * thread: 470 us with glibc's erff, 47 us with these on a CPU with
 * AVX-512, 63 us built for Haswell's AVX2).
 *
 * How: branch-free float arithmetic, so that a loop over values vectorises;
 * both sides of each choice are computed and one is selected.
 *  - erf: |x| < 1: a + a * Q(a^2); 1 <= |x| < 4: 1 - exp(-a^2) * G(1/a) / a;
 *    beyond, 1 (erfc(4) is below half a float step under 1); the sign put
 *    back by its bit.
 *  - exp: x = k ln 2 + r, |r| <= ln(2) / 2 (k rounded by adding 1.5 * 2^23,
 *    ln 2 in two parts, so that k ln 2 is exact), exp(r) = 1 + r + r^2 H(r),
 *    times 2^k as two powers of two made from their bits, so that a result
 *    below 2^-126 is rounded once, as a subnormal. x is clamped to
 *    [-104, 89] first: beyond, the result is 0 or infinity either way.
 *  - tanh: |x| < 0.9: a + a * t * P(t), t = a^2; beyond, 1 - 2 / (exp(2a) + 1)
 *    (its subtraction loses little there, and tends to 1); the sign put back.
 * Q, G, H and P are Chebyshev fits rounded to float (tools/fit_lane_math.py
 * prints them). Against double's erf, exp and tanh on every float (erf and
 * tanh below 10 in magnitude, beyond which both are +-1; exp on [-104, 89]),
 * compiled as ddpc compiles a program: erf within 1.34 units in the last
 * place, exp within 1.05, tanh within 1.28 (glibc's erff within 0.97, its
 * tanhf 2.19). tests/lane_math/check.cpp holds them to 1.5 on every 97th
 * float. NaN gives NaN (the one given), erf(+-inf) = tanh(+-inf) = +-1,
 * erf(-0) = tanh(-0) = -0, exp(-inf) = 0, exp(inf) = inf.
 *
 * Each operation here is one IEEE operation in any lane, vectorised or not,
 * because ddpc compiles a program with -ffp-contract=off (DDPC_CPU_CXXFLAGS).
 * With g++'s default contraction, GELU's backward expression as the kernels
 * write it took other bits in a vector loop than in a scalar one (1 value
 * in 13); tests/unit/test_lanes.c builds nets both ways.
 *
 * On GPUs CUDA's own erff, expf and tanhf, which are as accurate and fast there.
 */
#ifndef DDPRT_LANE_MATH_H
#define DDPRT_LANE_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "host_device.h"  // DDP_HOST_DEVICE

#ifndef __CUDA_ARCH__
static inline float ddp_lane_float(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint32_t ddp_lane_bits(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

/* 2^K for -126 <= K <= 127, from its bits. */
static inline float ddp_lane_pow2(int32_t k)
{
    return ddp_lane_float((uint32_t)(k + 127) << 23);
}

/* |X|, by its bits. */
static inline float ddp_lane_abs(float x)
{
    return ddp_lane_float(ddp_lane_bits(x) & 0x7fffffffu);
}

/* An odd function's value at X from F_OF_ABS, its value at |X|: the sign
 * of X put back, or X itself where it is a NaN (which NaN arithmetic makes
 * of one varies, between vector and scalar code too). */
static inline float ddp_lane_odd(float x, float f_of_abs)
{
    const float signed_value = ddp_lane_float(ddp_lane_bits(f_of_abs) | (ddp_lane_bits(x) & 0x80000000u));
    return x == x ? signed_value : x;
}
#endif

static inline DDP_HOST_DEVICE float ddp_expf(float x)
{
#ifdef __CUDA_ARCH__
    return expf(x);
#else
    const float given = x;
    x = x < -104.0f ? -104.0f : x; /* a NaN compares false, and stays */
    x = x > 89.0f ? 89.0f : x;
    const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float shifted = x * 1.44269504f + shifter, k = shifted - shifter;
    /* ln 2 = LN2_HI + LN2_LO, LN2_HI with 16 bits, so that k * LN2_HI is exact */
    const float r = (x - k * 0.693145751953125f) - k * 1.42860677e-06f;
    const float h = (((1.392617589e-03f * r + 8.363173343e-03f) * r + 4.166655615e-02f) * r + 1.666657776e-01f) * r +
                    5.000000000e-01f;
    const float exp_r = 1.0f + (r + r * r * h);
    /* k, an integer in [-150, 128], from the low bits of SHIFTED; 2^k as two
     * factors, each normal, so that a subnormal result is rounded once */
    const int32_t whole = (int32_t)(ddp_lane_bits(shifted) - ddp_lane_bits(shifter));
    const int32_t half = whole / 2;
    const float result = (exp_r * ddp_lane_pow2(half)) * ddp_lane_pow2(whole - half);
    return given == given ? result : given; /* a NaN as given (ddp_lane_odd says why) */
#endif
}

static inline DDP_HOST_DEVICE float ddp_erff(float x)
{
#ifdef __CUDA_ARCH__
    return erff(x);
#else
    const float a = ddp_lane_abs(x);
    /* |x| < 1 */
    const float t = a * a;
    const float q = (((((7.875874871e-05f * t - 8.016864303e-04f) * t + 5.189087242e-03f) * t - 2.685421146e-02f) * t +
                      1.128359437e-01f) * t - 3.761262596e-01f) * t + 1.283791661e-01f;
    const float near_zero = a + a * q;
    /* 1 <= |x|, clamped to [1, 4] (a NaN stays) */
    const float b = a > 4.0f ? 4.0f : a < 1.0f ? 1.0f : a;
    const float u = 1.0f / b, w = u - 0.625f;
    const float g = (((((((5.410312861e-02f * w - 3.974847868e-02f) * w - 1.100074872e-02f) * w + 5.121120438e-02f) * w -
                        7.800399512e-02f) * w + 7.203938067e-02f) * w - 1.294897404e-03f) * w - 1.715849936e-01f) * w +
                    4.895247817e-01f;
    const float far = 1.0f - ddp_expf(-(b * b)) * (g * u);
    return ddp_lane_odd(x, a < 1.0f ? near_zero : far);
#endif
}

static inline DDP_HOST_DEVICE float ddp_tanhf(float x)
{
#ifdef __CUDA_ARCH__
    return tanhf(x);
#else
    const float a = ddp_lane_abs(x);
    /* |x| < 0.9 */
    const float t = a * a;
    const float p = (((((-5.203526816e-04f * t + 2.759119263e-03f) * t - 8.450872265e-03f) * t + 2.175940946e-02f) * t -
                      5.395388976e-02f) * t + 1.333326250e-01f) * t - 3.333333135e-01f;
    const float near_zero = a + a * (t * p);
    /* 0.9 <= |x|: exp(2a) is infinite past 44.5, and the result 1 */
    const float far = 1.0f - 2.0f / (ddp_expf(2.0f * a) + 1.0f);
    return ddp_lane_odd(x, a < 0.9f ? near_zero : far);
#endif
}

#endif
