/*
 * test_precision.c: tf32 and bf16 (runtime/precision.h, round_cpu.c, and the
 * ops' use of them in ops_cpu.c).
 *
 *  - The rounding rule on its edge cases, worked out by hand: ties to even,
 *    the carry into the exponent (to infinity at the top), subnormals to a
 *    signed zero, NaN kept and made quiet.
 *  - The rule against an independent definition on 2^24 spread bit
 *    patterns: the nearest of the two neighbours on the coarser grid,
 *    found in double.
 *  - AVX-512 BF16's instruction and the bit arithmetic give the same bits
 *    (where this CPU has the instruction; said when it has not), so a CPU
 *    build trains alike with it and without it.
 *  - Every library call rounds both its operands, and nothing else: in bf16
 *    and tf32 each call gives the bits the fp32 call gives on operands
 *    rounded beforehand, on every conv path (im2col, 1x1, Winograd, and
 *    oneDNN's), on the products and on the linear weight gradient; and not
 *    the fp32 call's bits on the operands as they are.
 */
#include "ops.h"
#include "onednn_cpu.h"  // ddp_onednn_choose: each conv on the own kernels, then as planned
#include "precision.h"
#include "round_cpu.h"   // ddp_round_operands, ddp_round_bf16_instruction, ddp_round_bits
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ---- the rule ---- */

static void test_rule_edges(void)
{
    static const struct {
        uint32_t in, bf16, tf32;
        const char *what;
    } cases[] = {
        {0x3f800000u, 0x3f800000u, 0x3f800000u, "1 stays"},
        {0x3f808000u, 0x3f800000u, 0x3f808000u, "1 + 2^-8: a bf16 tie, to even (down)"},
        {0x3f818000u, 0x3f820000u, 0x3f818000u, "1 + 3 * 2^-8: a bf16 tie, to even (up)"},
        {0x3f808001u, 0x3f810000u, 0x3f808000u, "just past a bf16 tie: up"},
        {0x3f801000u, 0x3f800000u, 0x3f800000u, "1 + 2^-11: a tf32 tie, to even (down)"},
        {0x3f803000u, 0x3f800000u, 0x3f804000u, "1 + 3 * 2^-11: a tf32 tie, to even (up)"},
        {0xbf818000u, 0xbf820000u, 0xbf818000u, "negative: the same magnitude"},
        {0x3fffffffu, 0x40000000u, 0x40000000u, "the carry steps the exponent"},
        {0x7f7fffffu, 0x7f800000u, 0x7f800000u, "the largest float rounds to infinity"},
        {0x7f800000u, 0x7f800000u, 0x7f800000u, "infinity stays"},
        {0xff800000u, 0xff800000u, 0xff800000u, "-infinity stays"},
        {0x7f800001u, 0x7fc00000u, 0x7fc00000u, "a NaN whose payload is all dropped stays a NaN, quiet"},
        {0xffc12345u, 0xffc10000u, 0xffc12000u, "a quiet NaN keeps its sign and upper payload"},
        {0x00000001u, 0x00000000u, 0x00000000u, "the smallest subnormal: zero"},
        {0x807fffffu, 0x80000000u, 0x80000000u, "a negative subnormal: -0"},
        {0x00800000u, 0x00800000u, 0x00800000u, "the smallest normal stays"},
        {0x80000000u, 0x80000000u, 0x80000000u, "-0 stays"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint32_t b = ddp_round_significand(cases[i].in, ddp_precision_dropped_bits(DDP_PRECISION_BF16));
        uint32_t t = ddp_round_significand(cases[i].in, ddp_precision_dropped_bits(DDP_PRECISION_TF32));
        if (b != cases[i].bf16 || t != cases[i].tf32)
            fprintf(stderr, "\n    %08x (%s): bf16 %08x, want %08x; tf32 %08x, want %08x", cases[i].in, cases[i].what,
                    b, cases[i].bf16, t, cases[i].tf32);
        CU_ASSERT_EQUAL(b, cases[i].bf16);
        CU_ASSERT_EQUAL(t, cases[i].tf32);
    }
    CU_ASSERT_EQUAL(ddp_precision_dropped_bits(DDP_PRECISION_FP32), 0);
}

/* The nearest of X's two neighbours on a grid DROP bits coarser (ties: the
 * one whose last kept bit is 0), by comparing distances in double: a
 * definition that shares nothing with the rule's carry arithmetic. Finite
 * normal X only. */
static uint32_t nearest_by_distance(uint32_t x, int drop)
{
    const uint32_t step = 1u << drop, down = x & ~(step - 1), up = down + step;
    const double v = from_bits(x);
    /* UP may be the next binade's first value; past the largest finite it is
     * infinity's pattern, which stands for 2^128 (the next binade's start) */
    const double up_value = (up & 0x7fffffffu) == 0x7f800000u ? copysign(0x1p128, v) : from_bits(up);
    const double dd = fabs(v - from_bits(down)), du = fabs(up_value - v);
    if (dd < du)
        return down;
    if (du < dd)
        return up;
    return (down >> drop) & 1 ? up : down;
}

static void test_rule_against_distances(void)
{
    const DdpPrecision kinds[] = {DDP_PRECISION_BF16, DDP_PRECISION_TF32};
    long wrong = 0;
    for (int k = 0; k < 2; k++) {
        const int drop = ddp_precision_dropped_bits(kinds[k]);
        /* an odd step visits 2^24 patterns spread over all 2^32, every low-bit pattern among them */
        for (uint64_t i = 0, u = 12345; i < (1u << 24); i++, u += 0x9E3779B1u) {
            const uint32_t x = (uint32_t)u, e = x & 0x7f800000u;
            if (e == 0 || e == 0x7f800000u)
                continue;
            if (ddp_round_significand(x, drop) != nearest_by_distance(x, drop) && wrong++ < 5)
                fprintf(stderr, "\n    %s: %08x rounds to %08x, the nearest is %08x", ddp_precision_name(kinds[k]), x,
                        ddp_round_significand(x, drop), nearest_by_distance(x, drop));
        }
    }
    CU_ASSERT_EQUAL(wrong, 0);
}

/* The instruction's bits are the arithmetic's, on the same spread of
 * patterns (every class: zeros, subnormals, normals, infinities, NaNs) and
 * on every length of a last partial vector. */
static void test_instruction_same_bits(void)
{
    if (!ddp_round_bf16_has_instruction()) {
        fprintf(stderr, "\n    (this CPU lacks AVX-512 BF16: the bit arithmetic alone runs here) ");
        CU_PASS("no AVX-512 BF16");
        return;
    }
    enum { N = 1 << 20 };
    float *src = malloc(N * sizeof *src), *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    CU_ASSERT_FATAL(src && a && b);
    long differ = 0;
    for (int round = 0; round < 16; round++) {
        for (uint32_t i = 0, u = 777u + (uint32_t)round * 0x1000193u; i < N; i++, u += 0x9E3779B1u)
            src[i] = from_bits(u);
        for (int tail = 0; tail < 16; tail++) { /* every length of the last partial vector */
            const size_t n = N - (size_t)tail;
            if (tail) /* sentinels past N, which neither may touch */
                a[n] = 1.5f, b[n] = -2.5f;
            CU_ASSERT_FATAL(ddp_round_bf16_instruction(src, a, n));
            ddp_round_bits(DDP_PRECISION_BF16, src, b, n);
            for (size_t i = 0; i < n; i++)
                if (to_bits(a[i]) != to_bits(b[i]) && differ++ < 5)
                    fprintf(stderr, "\n    %08x: instruction %08x, arithmetic %08x", to_bits(src[i]), to_bits(a[i]),
                            to_bits(b[i]));
            if (tail)
                CU_ASSERT(a[n] == 1.5f && b[n] == -2.5f);
        }
    }
    CU_ASSERT_EQUAL(differ, 0);
    free(src), free(a), free(b);
}

/* The threaded array rounding: the scalar rule's bits, in place too. */
static void test_operands_array(void)
{
    enum { N = 100003 };
    float *src = malloc(N * sizeof *src), *dst = malloc(N * sizeof *dst);
    CU_ASSERT_FATAL(src && dst);
    for (int p = DDP_PRECISION_FP32; p <= DDP_PRECISION_BF16; p++) {
        for (uint32_t i = 0, u = 99; i < N; i++, u += 0x9E3779B1u)
            src[i] = from_bits(u);
        ddp_round_operands((DdpPrecision)p, src, dst, N, 2);
        const int drop = ddp_precision_dropped_bits((DdpPrecision)p);
        long wrong = 0;
        for (size_t i = 0; i < N; i++)
            wrong += to_bits(dst[i]) != (drop ? ddp_round_significand(to_bits(src[i]), drop) : to_bits(src[i]));
        CU_ASSERT_EQUAL(wrong, 0);
        ddp_round_operands((DdpPrecision)p, src, src, N, 3);
        CU_ASSERT_EQUAL(memcmp(src, dst, N * sizeof *src), 0);
    }
    free(src), free(dst);
}

static void test_names(void)
{
    DdpPrecision p = DDP_PRECISION_FP32;
    CU_ASSERT(ddp_precision_parse("bf16", &p) && p == DDP_PRECISION_BF16);
    CU_ASSERT(ddp_precision_parse("tf32", &p) && p == DDP_PRECISION_TF32);
    CU_ASSERT(ddp_precision_parse("fp32", &p) && p == DDP_PRECISION_FP32);
    CU_ASSERT(!ddp_precision_parse("fp16", &p) && !ddp_precision_parse("BF16", &p) && !ddp_precision_parse("", &p));
    CU_ASSERT_STRING_EQUAL(ddp_precision_name(DDP_PRECISION_TF32), "tf32");
}

/* ---- the calls round their operands ---- */

static uint64_t rng = 7;

/* Uniform in [-1, 1) with all 24 bits of a float's significand in use, so
 * that rounding changes nearly every value. */
static float *random_floats(size_t n)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        v[i] = (float)((double)(rng >> 11) * 0x1p-52 - 1.0);
    }
    return v;
}

static float *rounded_copy(DdpPrecision p, const float *v, size_t n)
{
    float *r = malloc(n * sizeof *r);
    ddp_round_bits(p, v, r, n);
    return r;
}

static DdpOps *ops_with(DdpPrecision p, const DdpConvShape *shape)
{
    DdpOps *ops = NULL;
    CU_ASSERT_FATAL(ddp_ops_create(&ops, NULL) == DDP_OK);
    CU_ASSERT_FATAL(ddp_ops_set_precision(ops, p) == DDP_OK);
    if (shape)
        CU_ASSERT_FATAL(ddp_ops_plan_conv(ops, 0, shape) == DDP_OK);
    CU_ASSERT_FATAL(ddp_ops_finalize(ops) == DDP_OK);
    return ops;
}

static int same(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

/* One conv in precision P: its three calls against fp32's on rounded operands. */
static void conv_rounds(DdpPrecision p, int c, int hw, int k, int r, int pad)
{
    DdpConvShape s = {.n = 3, .c = c, .h = hw, .w = hw, .k = k, .r = r, .s = r, .stride = 1, .pad = pad, .groups = 1};
    CU_ASSERT_FATAL(ddp_conv_shape_init(&s) == DDP_OK);
    const size_t nx = (size_t)s.n * c * hw * hw, ny = (size_t)s.n * k * s.out_h * s.out_w, nw = (size_t)k * c * r * r;
    float *x = random_floats(nx), *w = random_floats(nw), *dy = random_floats(ny);
    float *xr = rounded_copy(p, x, nx), *wr = rounded_copy(p, w, nw), *dyr = rounded_copy(p, dy, ny);
    DdpOps *low = ops_with(p, &s), *full = ops_with(DDP_PRECISION_FP32, &s);
    float *y1 = malloc(ny * sizeof *y1), *y2 = malloc(ny * sizeof *y2), *y3 = malloc(ny * sizeof *y3);
    float *dx1 = malloc(nx * sizeof *dx1), *dx2 = malloc(nx * sizeof *dx2);
    DdpGrad *dw1 = malloc(nw * sizeof *dw1), *dw2 = malloc(nw * sizeof *dw2);

    ddp_conv_forward(low, 0, s.n, x, w, y1);
    ddp_conv_forward(full, 0, s.n, xr, wr, y2);
    ddp_conv_forward(full, 0, s.n, x, w, y3);
    CU_ASSERT(same(y1, y2, ny * sizeof *y1));
    CU_ASSERT(!same(y1, y3, ny * sizeof *y1)); /* the rounding changed something */
    ddp_conv_backward_data(low, 0, s.n, dy, w, dx1, 0.0f);
    ddp_conv_backward_data(full, 0, s.n, dyr, wr, dx2, 0.0f);
    CU_ASSERT(same(dx1, dx2, nx * sizeof *dx1));
    ddp_conv_backward_filter(low, 0, s.n, x, dy, dw1, 0.0f);
    ddp_conv_backward_filter(full, 0, s.n, xr, dyr, dw2, 0.0f);
    CU_ASSERT(same(dw1, dw2, nw * sizeof *dw1));
    CU_ASSERT(ddp_ops_status(low) == DDP_OK && ddp_ops_status(full) == DDP_OK);
    /* the operands themselves untouched */
    float *x0 = rounded_copy(DDP_PRECISION_FP32, x, nx);
    CU_ASSERT(same(x, x0, nx * sizeof *x));
    char what[256];
    ddp_ops_describe_conv(low, 0, what, sizeof what);
    fprintf(stderr, "\n    %s %d->%d %dx%d at %d: %s", ddp_precision_name(p), c, k, r, r, hw, what);
    ddp_ops_destroy(low), ddp_ops_destroy(full);
    free(x), free(w), free(dy), free(xr), free(wr), free(dyr), free(x0);
    free(y1), free(y2), free(y3), free(dx1), free(dx2), free(dw1), free(dw2);
}

/* im2col (3 channels in), 1x1, Winograd for 3x3 and 5x5 kernels. */
static void convs_round(void)
{
    for (int p = DDP_PRECISION_TF32; p <= DDP_PRECISION_BF16; p++) {
        conv_rounds((DdpPrecision)p, 3, 9, 8, 5, 2);
        conv_rounds((DdpPrecision)p, 8, 6, 16, 1, 0);
        conv_rounds((DdpPrecision)p, 16, 10, 16, 3, 1);
        conv_rounds((DdpPrecision)p, 16, 12, 16, 5, 0);
    }
}

static void test_convs_round_own(void)
{
    ddp_onednn_choose(DDP_CONV_OWN);
    convs_round();
    ddp_onednn_choose(-1);
}

static void test_convs_round_planned(void)
{
    ddp_onednn_choose(DDP_CONV_PLANNED); /* oneDNN's passes where the rule gives them, where built in */
    convs_round();
    ddp_onednn_choose(-1);
}

/* ddp_gemm (every transpose, strided operands) and ddp_gemm_grad. */
static void test_products_round(void)
{
    enum { M = 7, N = 37, K = 19, LD = 41 };
    for (int p = DDP_PRECISION_TF32; p <= DDP_PRECISION_BF16; p++) {
        DdpOps *low = ops_with((DdpPrecision)p, NULL), *full = ops_with(DDP_PRECISION_FP32, NULL);
        float *a = random_floats((size_t)LD * LD), *b = random_floats((size_t)LD * LD);
        float *ar = rounded_copy((DdpPrecision)p, a, (size_t)LD * LD), *br = rounded_copy((DdpPrecision)p, b, (size_t)LD * LD);
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                float c1[M * N], c2[M * N], c3[M * N];
                ddp_gemm(low, ta, tb, M, N, K, 1.0f, a, LD, b, LD, 0.0f, c1, N);
                ddp_gemm(full, ta, tb, M, N, K, 1.0f, ar, LD, br, LD, 0.0f, c2, N);
                ddp_gemm(full, ta, tb, M, N, K, 1.0f, a, LD, b, LD, 0.0f, c3, N);
                CU_ASSERT(same(c1, c2, sizeof c1));
                CU_ASSERT(!same(c1, c3, sizeof c1));
            }
        DdpGrad g1[M * N], g2[M * N];
        ddp_gemm_grad(low, M, N, K, a, LD, b, LD, 0.0f, g1, N);
        ddp_gemm_grad(full, M, N, K, ar, LD, br, LD, 0.0f, g2, N);
        CU_ASSERT(same(g1, g2, sizeof g1));
        CU_ASSERT(ddp_ops_status(low) == DDP_OK && ddp_ops_status(full) == DDP_OK);
        ddp_ops_destroy(low), ddp_ops_destroy(full);
        free(a), free(b), free(ar), free(br);
    }
}

static void test_set_after_finalize(void)
{
    DdpOps *ops = ops_with(DDP_PRECISION_FP32, NULL);
    CU_ASSERT(ddp_ops_set_precision(ops, DDP_PRECISION_BF16) != DDP_OK);
    ddp_ops_destroy(ops);
}

void suite_precision(void)
{
    static const TestCase cases[] = {
        {"bf16 and tf32 rounding: ties to even, carries, subnormals, infinities, NaNs", test_rule_edges},
        {"bf16 and tf32 rounding: the nearest value of the coarser grid, on 2^24 patterns",
         test_rule_against_distances},
        {"AVX-512 BF16's instruction gives the bit arithmetic's bits", test_instruction_same_bits},
        {"arrays rounded on threads: the rule's bits, in place too", test_operands_array},
        {"precision names", test_names},
        {"every conv call rounds both operands (own kernels): fp32's bits on rounded operands",
         test_convs_round_own},
        {"every conv call rounds both operands (oneDNN where planned)", test_convs_round_planned},
        {"products and linear weight gradients round both operands", test_products_round},
        {"the precision is set before finalize only", test_set_after_finalize},
        {NULL, NULL},
    };
    test_add_suite("precision", cases);
}
