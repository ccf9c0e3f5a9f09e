/*
 * test_ops.c: the CPU library ops (runtime/ops_cpu.c) against references that
 * share none of their code: a direct seven-loop convolution and its adjoints,
 * accumulated in double; central finite differences in double of the scalar
 * loss L = sum(y * g), whose gradients the backward calls compute; and a
 * three-loop gemm. Tolerances are absolute plus relative (llm.c's
 * validate_result), loose enough for float sums of a few thousand terms and
 * tight enough to catch one wrong tap.
 *
 * The shapes are small but cover each path of the implementation: im2col with
 * stride 1/2, padding 0/1/2, non-square inputs and kernels, groups 1/2 and
 * depthwise, the 1x1 shortcut, weight-gradient blocks that split a group, and a
 * call with a smaller batch than planned. The CUDA build (ops_cuda.cu) cannot
 * run on a machine without a GPU; comparing it with this one belongs in tests/gpu/.
 */
#include "ops.h"
#include "ops_sizes.h" // ddp_conv_input_floats, ddp_conv_output_floats: the NCHW copies' size
#include "gemm_cpu.h"  // ddp_sgemm_fixed_scratch: the products' packed copies, in the scratch size
#include "onednn_cpu.h" // ddp_onednn_choose: each conv test on the own kernels, then with oneDNN
#include "winograd_cpu.h" // ddp_winograd_plan: its unrolled tile transforms and paired transform back taken
#include "optimizer_state.h" // ddp_flush_subnormal
#include "testutil.h"

#include <malloc.h> // mallinfo2: what finalize allocates, measured
#if defined(__SANITIZE_ADDRESS__)
#define DDP_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DDP_TEST_ASAN 1
#endif
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> // _exit: finalize_heap_growth's child
#ifdef _OPENMP
#include <omp.h> // omp_set_num_threads, for the thread-count determinism test
#endif

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t rng = 1;

/* Uniform in [-1, 1), from a fixed seed so a failure reproduces. */
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (2.0 / 16777216.0) - 1.0);
}

static float *random_floats(size_t count)
{
    float *v = malloc(count * sizeof *v);
    for (size_t i = 0; i < count; i++)
        v[i] = frand();
    return v;
}

static double *to_double(const float *v, size_t count)
{
    double *d = malloc(count * sizeof *d);
    for (size_t i = 0; i < count; i++)
        d[i] = v[i];
    return d;
}

static double *absolute(const double *v, size_t count)
{
    double *a = malloc(count * sizeof *a);
    for (size_t i = 0; i < count; i++)
        a[i] = fabs(v[i]);
    return a;
}

static float *filled(size_t count, float value)
{
    float *v = malloc(count * sizeof *v);
    for (size_t i = 0; i < count; i++)
        v[i] = value;
    return v;
}

static const double ATOL = 1e-4, RTOL = 1e-4;

/* Counts the elements of GOT farther than ATOL + RTOL*|want| from WANT (NaN
 * included) and prints the first, naming WHAT. */
static size_t count_mismatches_double(const char *what, const double *got, const double *want, size_t count)
{
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        double err = fabs(got[i] - want[i]);
        if (!(err <= ATOL + RTOL * fabs(want[i]))) {
            if (!bad)
                printf("\n    %s: element %zu is %.8g, expected %.8g ", what, i, got[i], want[i]);
            bad++;
        }
    }
    if (bad)
        printf("(%zu of %zu wrong) ", bad, count);
    return bad;
}

/* Winograd (ops_cpu.c picks it for FIRST_WINOGRAD on) rounds its transforms:
 * its error scales with the sum of the absolute values of the terms of an
 * output, SCALE, rather than with the output, which cancellation can make
 * small. The tolerance, as a fraction of SCALE, from the worst seen in
 * 3000 random trials of one sample per shape (uniform data in [-1, 1), the
 * Winograd shapes of SHAPES): forward and backward data at most 3.4e-6 on
 * every kernel, and the weight gradient 1.7e-6 for 3x3 kernels and 4.1e-6
 * for 5x5: 8e-6 for those; the weight gradient 6.2e-6 for 6x6, 8.6e-6 for
 * 5x7 and 1.4e-5 for 7x7, whose transform back multiplies by G's entries
 * for the points +-2, up to 2^6 over their constant: 3e-5 for kernels
 * with a side past 5 (more samples sum more parts, whose errors partly
 * cancel: 4.5e-6 for 7x7 at three). A wrong transform is off by a good
 * part of SCALE. */
static double winograd_tolerance(const DdpConvShape *sh, int weight_gradient)
{
    return weight_gradient && (sh->r > 5 || sh->s > 5) ? 3e-5 : 8e-6;
}

/* Counts the elements of GOT farther than ATOL + TOLERANCE * SCALE from
 * WANT, prints the first, and the worst error over SCALE seen. */
static size_t count_mismatches_scaled(const char *what, const double *got, const double *want,
                                      const double *scale, double tolerance, size_t count)
{
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < count; i++) {
        double err = fabs(got[i] - want[i]);
        worst = scale[i] > 0 && err / scale[i] > worst ? err / scale[i] : worst;
        if (!(err <= ATOL + tolerance * scale[i])) {
            if (!bad)
                printf("\n    %s: element %zu is %.8g, expected %.8g (terms' scale %.4g) ", what, i, got[i],
                       want[i], scale[i]);
            bad++;
        }
    }
    if (bad)
        printf("(%zu of %zu wrong, worst error %.2g of the scale) ", bad, count, worst);
    return bad;
}

static size_t count_mismatches(const char *what, const float *got, const double *want, size_t count)
{
    double *d = to_double(got, count);
    size_t bad = count_mismatches_double(what, d, want, count);
    free(d);
    return bad;
}

/* GOT against WANT: within count_mismatches_double's tolerance, or for a
 * Winograd conv of shape SH (SCALE not NULL) count_mismatches_scaled's for
 * its forward and backward data, or its WEIGHT_GRADIENT. */
static size_t conv_mismatches(const char *what, const double *got, const double *want, const double *scale,
                              const DdpConvShape *sh, int weight_gradient, size_t count)
{
    return scale ? count_mismatches_scaled(what, got, want, scale, winograd_tolerance(sh, weight_gradient), count)
                 : count_mismatches_double(what, got, want, count);
}

/* The order-free sums' windows (exact_sum.h) for the tests' batches, at
 * most 128 samples: parts up to 2^13, where these tests' random data puts
 * a sample's part of a weight gradient below about 10^3. */
static void set_test_windows(void)
{
    ddp_exact_windows_set(128, 128);
}

/* Gradients as the library ops write them (ops.h: order-free sums on CPUs),
 * each VALUE alone (not a sum: for NaN and zero fills); the windows set. */
static DdpGrad *grads_filled(size_t count, double value)
{
    set_test_windows();
    DdpGrad *g = malloc((count + 1) * sizeof *g);
    for (size_t i = 0; i < count; i++)
        g[i] = (DdpGrad){value, 0.0};
    return g;
}

/* The sums of VALUES, one part each: gradients that accumulation adds to. */
static DdpGrad *grads_of(const float *values, size_t count)
{
    DdpGrad *g = grads_filled(count, 0.0);
    for (size_t i = 0; i < count; i++)
        ddp_exact_add(&g[i], values[i], &ddp_grad_window);
    return g;
}

/* Each gradient's value, as the optimizer reads it. */
static double *grad_values(const DdpGrad *g, size_t count)
{
    double *v = malloc((count + 1) * sizeof *v);
    for (size_t i = 0; i < count; i++)
        v[i] = ddp_exact_value(g[i]);
    return v;
}

/* ---- the direct convolution, in double ------------------------------------------ */

typedef struct {
    int c, h, w, k, r, s, stride, pad, groups;
} Conv;

static DdpConvShape shape_of(const Conv *cv, int n)
{
    DdpConvShape sh = {.n = n, .c = cv->c, .h = cv->h, .w = cv->w, .k = cv->k, .r = cv->r,
                       .s = cv->s, .stride = cv->stride, .pad = cv->pad, .groups = cv->groups};
    CU_ASSERT_EQUAL_FATAL(ddp_conv_shape_init(&sh), DDP_OK);
    return sh;
}

static void describe(char *buf, size_t len, const DdpConvShape *sh, int n)
{
    snprintf(buf, len, "n=%d c=%d %dx%d k=%d kernel %dx%d stride %d pad %d groups %d", n, sh->c,
             sh->h, sh->w, sh->k, sh->r, sh->s, sh->stride, sh->pad, sh->groups);
}

static size_t x_len(const DdpConvShape *sh, int n) { return (size_t)n * sh->c * sh->h * sh->w; }
static size_t y_len(const DdpConvShape *sh, int n)
{
    return (size_t)n * sh->k * sh->out_h * sh->out_w;
}
static size_t w_len(const DdpConvShape *sh)
{
    return (size_t)sh->k * (sh->c / sh->groups) * sh->r * sh->s;
}

/* Calls VISIT(x index, w index, y index) for every multiply-add of the conv:
 * forward, backward data and backward filter are the same sum read three ways. */
#define FOR_EACH_TAP(sh, n, body)                                                             \
    do {                                                                                      \
        const int cg_ = (sh)->c / (sh)->groups, kg_ = (sh)->k / (sh)->groups;                 \
        for (int b_ = 0; b_ < (n); b_++)                                                      \
            for (int k_ = 0; k_ < (sh)->k; k_++)                                              \
                for (int oh_ = 0; oh_ < (sh)->out_h; oh_++)                                   \
                    for (int ow_ = 0; ow_ < (sh)->out_w; ow_++)                               \
                        for (int c_ = 0; c_ < cg_; c_++)                                      \
                            for (int r_ = 0; r_ < (sh)->r; r_++)                              \
                                for (int s_ = 0; s_ < (sh)->s; s_++) {                        \
                                    int ih_ = oh_ * (sh)->stride - (sh)->pad + r_;            \
                                    int iw_ = ow_ * (sh)->stride - (sh)->pad + s_;            \
                                    if (ih_ < 0 || ih_ >= (sh)->h || iw_ < 0 || iw_ >= (sh)->w) \
                                        continue;                                             \
                                    int ci_ = k_ / kg_ * cg_ + c_;                            \
                                    size_t xi = (((size_t)b_ * (sh)->c + ci_) * (sh)->h + ih_) * \
                                                    (sh)->w + iw_;                            \
                                    size_t wi = (((size_t)k_ * cg_ + c_) * (sh)->r + r_) *    \
                                                    (sh)->s + s_;                             \
                                    size_t yi = (((size_t)b_ * (sh)->k + k_) * (sh)->out_h +  \
                                                 oh_) * (sh)->out_w + ow_;                    \
                                    body;                                                     \
                                }                                                             \
    } while (0)

static void ref_forward(const DdpConvShape *sh, int n, const double *x, const double *w,
                        double *y)
{
    memset(y, 0, y_len(sh, n) * sizeof *y);
    FOR_EACH_TAP(sh, n, y[yi] += x[xi] * w[wi]);
}

static void ref_backward_data(const DdpConvShape *sh, int n, const double *dy, const double *w,
                              double *dx)
{
    memset(dx, 0, x_len(sh, n) * sizeof *dx);
    FOR_EACH_TAP(sh, n, dx[xi] += dy[yi] * w[wi]);
}

static void ref_backward_filter(const DdpConvShape *sh, int n, const double *x,
                                const double *dy, double *dw)
{
    memset(dw, 0, w_len(sh) * sizeof *dw);
    FOR_EACH_TAP(sh, n, dw[wi] += dy[yi] * x[xi]);
}

/* L = sum(conv(x, w) * g), the loss whose gradients are backward_data(g) and
 * backward_filter(x, g). */
static double ref_loss(const DdpConvShape *sh, int n, const double *x, const double *w,
                       const double *g, double *y)
{
    ref_forward(sh, n, x, w, y);
    double loss = 0;
    for (size_t i = 0; i < y_len(sh, n); i++)
        loss += y[i] * g[i];
    return loss;
}

/* Central differences of ref_loss with respect to every element of V (x or w). */
static void finite_differences(const DdpConvShape *sh, int n, double *x, double *w,
                               const double *g, double *v, size_t count, double *grad)
{
    const double h = 1e-3;
    double *y = malloc(y_len(sh, n) * sizeof *y);
    for (size_t i = 0; i < count; i++) {
        double keep = v[i];
        v[i] = keep + h;
        double up = ref_loss(sh, n, x, w, g, y);
        v[i] = keep - h;
        double down = ref_loss(sh, n, x, w, g, y);
        v[i] = keep;
        grad[i] = (up - down) / (2 * h);
    }
    free(y);
}

/* ---- the shapes ------------------------------------------------------------------ */

static const Conv SHAPES[] = {
    /* c   h   w   k  r  s  st pad groups */
    {1, 5, 5, 1, 3, 3, 1, 0, 1},    /* smallest 3x3 */
    {3, 7, 9, 4, 3, 3, 1, 1, 1},    /* non-square input, pad 1 */
    {4, 8, 6, 6, 5, 5, 2, 2, 2},    /* kernel 5, stride 2, pad 2, groups 2 */
    {6, 9, 7, 6, 3, 3, 2, 1, 6},    /* depthwise, stride 2 */
    {4, 6, 5, 8, 3, 3, 1, 1, 4},    /* depthwise, 2 outputs per channel */
    {5, 4, 7, 3, 1, 1, 1, 0, 1},    /* 1x1: the no-im2col shortcut */
    {6, 5, 5, 4, 1, 1, 1, 0, 2},    /* 1x1 shortcut with groups */
    {5, 7, 6, 3, 1, 1, 2, 0, 1},    /* 1x1 stride 2: im2col again */
    {3, 4, 5, 2, 1, 1, 1, 1, 1},    /* 1x1 padded: im2col again */
    {2, 10, 11, 3, 5, 5, 2, 0, 1},  /* stride that does not divide the input */
    {3, 5, 4, 2, 3, 3, 1, 2, 1},    /* pad 2 around a 3x3 kernel */
    {2, 7, 7, 4, 3, 3, 2, 2, 1},    /* pad 2, stride 2 */
    {2, 6, 7, 3, 1, 3, 1, 1, 1},    /* non-square kernel */
    {2, 2, 3, 2, 3, 3, 1, 1, 1},    /* input smaller than the kernel */
    {3, 5, 5, 2, 5, 5, 1, 0, 1},    /* kernel the size of the input: 1x1 output */
    {8, 5, 6, 8, 3, 3, 2, 1, 2},    /* groups 2, stride 2 */
    {20, 9, 8, 6, 3, 3, 1, 1, 1},   /* CRS 180: several weight-gradient blocks (K < 8: not Winograd) */
    {18, 6, 5, 6, 3, 3, 1, 1, 3},   /* blocks that do not divide a group's CRS 54 */
    {1, 28, 28, 8, 5, 5, 1, 0, 1},  /* the first conv of the MNIST net */
    /* Winograd (winograd_cpu.c): FIRST_WINOGRAD on */
    {8, 12, 12, 8, 5, 5, 1, 0, 1},   /* 4x4 tiles of a 5x5 kernel, 2x2 of them */
    {16, 14, 13, 8, 5, 5, 1, 1, 1},  /* tiles that overhang the output, pad 1 */
    {9, 11, 10, 10, 5, 7, 1, 2, 1},  /* non-square kernel (4x2 tiles), channels not a multiple of 8 */
    {8, 40, 40, 8, 5, 5, 1, 2, 1},   /* 100 tiles a sample */
    {8, 18, 18, 8, 5, 5, 1, 2, 1},   /* edge tiles that read padding, beside ones that do not */
    {16, 14, 13, 8, 3, 3, 1, 1, 1},  /* 3x3: 6x6 input tiles, 4x4 output tiles that overhang, pad 1 */
    {8, 40, 40, 8, 3, 3, 1, 1, 1},   /* 3x3, 100 tiles a sample */
    {9, 18, 18, 10, 3, 3, 1, 1, 1},  /* 3x3, edge tiles that read padding, channels not a multiple of 8 */
    {32, 12, 12, 64, 5, 5, 1, 0, 1}, /* the second conv of the MNIST net */
    {8, 14, 14, 9, 6, 6, 1, 2, 1},   /* 6x6: 3x3 output tiles, 25 a sample (weight gradient by Winograd) */
    {8, 12, 12, 8, 7, 7, 1, 3, 1},   /* 7x7: 2x2 output tiles, 36 a sample (weight gradient by Winograd) */
    {40, 14, 14, 32, 3, 3, 1, 1, 1}, /* K x C 1280: a part's rows of 20 chunks of deposits (exact_sum.h) */
};
enum { NSHAPES = sizeof SHAPES / sizeof SHAPES[0], PLAN_N = 3, FIRST_WINOGRAD = 19 };

/* Each test plans every shape for batch PLAN_N, then calls it with batch 3 and
 * with batch 1 (a last batch smaller than planned). */
static DdpOps *plan_all(DdpConvShape *shapes)
{
    DdpOps *ops = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    for (int i = 0; i < NSHAPES; i++) {
        shapes[i] = shape_of(&SHAPES[i], PLAN_N);
        CU_ASSERT_EQUAL_FATAL(ddp_ops_plan_conv(ops, i, &shapes[i]), DDP_OK);
    }
    CU_ASSERT_EQUAL_FATAL(ddp_ops_finalize(ops), DDP_OK);
    return ops;
}

static const int BATCHES[] = {3, 1};

/* ---- the tests ---------------------------------------------------------------------- */

static void test_shape_init(void)
{
    DdpConvShape sh = {.n = 64, .c = 1, .h = 28, .w = 28, .k = 32, .r = 5, .s = 5, .stride = 1,
                       .pad = 0, .groups = 1};
    CU_ASSERT_EQUAL(ddp_conv_shape_init(&sh), DDP_OK);
    CU_ASSERT(sh.out_h == 24 && sh.out_w == 24);
    DdpConvShape rn = {.n = 8, .c = 3, .h = 224, .w = 200, .k = 64, .r = 7, .s = 7, .stride = 2,
                       .pad = 3, .groups = 1};
    CU_ASSERT_EQUAL(ddp_conv_shape_init(&rn), DDP_OK);
    CU_ASSERT(rn.out_h == 112 && rn.out_w == 100);

    DdpConvShape bad = sh;
    bad.groups = 3; /* 1 channel in 3 groups */
    CU_ASSERT_EQUAL(ddp_conv_shape_init(&bad), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "bad conv shape"));
    bad = sh;
    bad.h = 3; /* 5x5 kernel over a 3-row input, no padding */
    CU_ASSERT_EQUAL(ddp_conv_shape_init(&bad), DDP_FAIL);
    bad = sh;
    bad.stride = 0;
    CU_ASSERT_EQUAL(ddp_conv_shape_init(&bad), DDP_FAIL);
    bad = sh;
    bad.channels_last = 2; /* a layout other than NCHW (0) and NHWC (1) */
    CU_ASSERT_EQUAL(ddp_conv_shape_init(&bad), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "channels_last=2"));
    bad.channels_last = 1;
    CU_ASSERT_EQUAL(ddp_conv_shape_init(&bad), DDP_OK);
    CU_ASSERT(bad.out_h == 24 && bad.out_w == 24);
    ddp_error_clear();
}

static void test_conv_forward(void)
{
    DdpConvShape sh[NSHAPES];
    DdpOps *ops = plan_all(sh);
    for (int i = 0; i < NSHAPES; i++)
        for (int bi = 0; bi < 2; bi++) {
            int n = BATCHES[bi];
            float *x = random_floats(x_len(&sh[i], n)), *w = random_floats(w_len(&sh[i]));
            float *y = filled(y_len(&sh[i], n), NAN);
            double *xd = to_double(x, x_len(&sh[i], n)), *wd = to_double(w, w_len(&sh[i]));
            double *want = malloc(y_len(&sh[i], n) * sizeof *want);
            ddp_conv_forward(ops, i, n, x, w, y);
            ref_forward(&sh[i], n, xd, wd, want);
            char what[160];
            describe(what, sizeof what, &sh[i], n);
            double *scale = NULL, *yd = to_double(y, y_len(&sh[i], n));
            if (i >= FIRST_WINOGRAD) {
                double *xa = absolute(xd, x_len(&sh[i], n)), *wa = absolute(wd, w_len(&sh[i]));
                scale = malloc(y_len(&sh[i], n) * sizeof *scale);
                ref_forward(&sh[i], n, xa, wa, scale);
                free(xa), free(wa);
            }
            CU_ASSERT_EQUAL(conv_mismatches(what, yd, want, scale, &sh[i], 0, y_len(&sh[i], n)), 0);
            free(x), free(w), free(y), free(xd), free(wd), free(want), free(yd), free(scale);
        }
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_ops_destroy(ops);
}

/* The epilogue's bits, as the generated kernels it replaced computed them. */
static float epilogue_of(DdpEpilogue epilogue, float product, float bias)
{
    float v = product + bias;
    return epilogue == DDP_EPILOGUE_BIAS_RELU ? (v > 0.0f ? v : 0.0f) : v;
}

/* ddp_conv_forward_bias = ddp_conv_forward and then the bias and relu, bit
 * for bit, on every shape's path (im2col, 1x1, Winograd; oneDNN as
 * planned), at the planned batch and a smaller one: the CPU build's fused
 * epilogue changes no result. A bias and a relu that each matter: the
 * products straddle 0 and the bias moves some across. */
static void test_conv_forward_bias(void)
{
    const uint64_t others = rng; /* the later tests' draws left as they were */
    DdpConvShape sh[NSHAPES];
    DdpOps *ops = plan_all(sh);
    for (int i = 0; i < NSHAPES; i++)
        for (int bi = 0; bi < 2; bi++)
            for (int relu = 0; relu < 2; relu++) {
                const int n = BATCHES[bi];
                const DdpEpilogue epilogue = relu ? DDP_EPILOGUE_BIAS_RELU : DDP_EPILOGUE_BIAS;
                const size_t ylen = y_len(&sh[i], n), plane = ylen / ((size_t)n * sh[i].k);
                float *x = random_floats(x_len(&sh[i], n)), *w = random_floats(w_len(&sh[i]));
                float *bias = random_floats((size_t)sh[i].k);
                float *want = filled(ylen, NAN), *got = filled(ylen, NAN);
                ddp_conv_forward(ops, i, n, x, w, want);
                size_t changed = 0, zeroed = 0;
                for (size_t e = 0; e < ylen; e++) {
                    float v = epilogue_of(epilogue, want[e], bias[(e / plane) % (size_t)sh[i].k]);
                    changed += v != want[e];
                    zeroed += v == 0.0f;
                    want[e] = v;
                }
                CU_ASSERT(changed > 0);
                if (relu && ylen >= 8)
                    CU_ASSERT(zeroed > 0);
                ddp_conv_forward_bias(ops, i, n, x, w, bias, epilogue, got);
                if (memcmp(got, want, ylen * sizeof *got) != 0) {
                    char what[160];
                    describe(what, sizeof what, &sh[i], n);
                    fprintf(stderr, "\n  %s%s: ddp_conv_forward_bias differs from the conv and its epilogue", what,
                            relu ? ", relu" : "");
                    CU_FAIL("ddp_conv_forward_bias's bits");
                }
                free(x), free(w), free(bias), free(want), free(got);
            }
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_ops_destroy(ops);
    rng = others;
}

/* ddp_linear_forward_bias = ddp_gemm's x . w^T and then the epilogue, bit
 * for bit, for a few shapes (one row; more features than rows). */
static void test_linear_forward_bias(void)
{
    static const int shapes[][3] = {{1, 7, 5}, {3, 16, 10}, {64, 33, 128}}; /* n, in, out */
    const uint64_t others = rng;
    DdpOps *ops = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    CU_ASSERT_EQUAL_FATAL(ddp_ops_finalize(ops), DDP_OK);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int relu = 0; relu < 2; relu++) {
            const int n = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
            const DdpEpilogue epilogue = relu ? DDP_EPILOGUE_BIAS_RELU : DDP_EPILOGUE_BIAS;
            float *x = random_floats((size_t)n * in), *w = random_floats((size_t)out * in);
            float *bias = random_floats((size_t)out);
            float *want = filled((size_t)n * out, NAN), *got = filled((size_t)n * out, NAN);
            ddp_gemm(ops, 0, 1, n, out, in, 1.0f, x, in, w, in, 0.0f, want, out);
            for (int e = 0; e < n * out; e++)
                want[e] = epilogue_of(epilogue, want[e], bias[e % out]);
            ddp_linear_forward_bias(ops, n, in, out, x, w, bias, epilogue, got);
            CU_ASSERT(memcmp(got, want, (size_t)n * out * sizeof *got) == 0);
            free(x), free(w), free(bias), free(want), free(got);
        }
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_ops_destroy(ops);
    rng = others;
}

/* Backward data and filter against the direct adjoints, and, where the shape is
 * small enough for one forward per element, against finite differences. */
static void test_conv_backward(void)
{
    DdpConvShape sh[NSHAPES];
    DdpOps *ops = plan_all(sh);
    int fd_checked = 0;
    for (int i = 0; i < NSHAPES; i++)
        for (int bi = 0; bi < 2; bi++) {
            const DdpConvShape *s = &sh[i];
            int n = BATCHES[bi];
            size_t nx = x_len(s, n), nw = w_len(s), ny = y_len(s, n);
            float *x = random_floats(nx), *w = random_floats(nw), *g = random_floats(ny);
            float *dx = filled(nx, NAN);
            DdpGrad *dw = grads_filled(nw, NAN);
            double *xd = to_double(x, nx), *wd = to_double(w, nw), *gd = to_double(g, ny);
            double *want_dx = malloc(nx * sizeof *want_dx), *want_dw = malloc(nw * sizeof *want_dw);
            char what[200], base[160];
            describe(base, sizeof base, s, n);

            ddp_conv_backward_data(ops, i, n, g, w, dx, 0.0f);
            ddp_conv_backward_filter(ops, i, n, x, g, dw, 0.0f);
            ref_backward_data(s, n, gd, wd, want_dx);
            ref_backward_filter(s, n, xd, gd, want_dw);
            double *dxd = to_double(dx, nx), *scale_dx = NULL, *scale_dw = NULL;
            if (i >= FIRST_WINOGRAD) {
                double *xa = absolute(xd, nx), *wa = absolute(wd, nw), *ga = absolute(gd, ny);
                scale_dx = malloc(nx * sizeof *scale_dx), scale_dw = malloc(nw * sizeof *scale_dw);
                ref_backward_data(s, n, ga, wa, scale_dx);
                ref_backward_filter(s, n, xa, ga, scale_dw);
                free(xa), free(wa), free(ga);
            }
            snprintf(what, sizeof what, "dx, %s", base);
            CU_ASSERT_EQUAL(conv_mismatches(what, dxd, want_dx, scale_dx, s, 0, nx), 0);
            double *dwd = grad_values(dw, nw);
            snprintf(what, sizeof what, "dw, %s", base);
            CU_ASSERT_EQUAL(conv_mismatches(what, dwd, want_dw, scale_dw, s, 1, nw), 0);

            double forward_macs = (double)ny * (s->c / s->groups) * s->r * s->s;
            if ((double)(nx + nw) * forward_macs < 4e7) {
                finite_differences(s, n, xd, wd, gd, xd, nx, want_dx);
                finite_differences(s, n, xd, wd, gd, wd, nw, want_dw);
                snprintf(what, sizeof what, "dx vs finite differences, %s", base);
                CU_ASSERT_EQUAL(conv_mismatches(what, dxd, want_dx, scale_dx, s, 0, nx), 0);
                snprintf(what, sizeof what, "dw vs finite differences, %s", base);
                CU_ASSERT_EQUAL(conv_mismatches(what, dwd, want_dw, scale_dw, s, 1, nw), 0);
                fd_checked++;
            }
            free(x), free(w), free(g), free(dx), free(dw), free(dwd), free(xd), free(wd), free(gd);
            free(dxd), free(scale_dx), free(scale_dw);
            free(want_dx), free(want_dw);
        }
    /* All but the five largest im2col shapes. The Winograd ones are all too
     * large; they meet the direct adjoints, which the others tie to FD. */
    CU_ASSERT(fd_checked >= 2 * FIRST_WINOGRAD - 5);
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_ops_destroy(ops);
}

/* dw = dw + grad with beta 1 (gradient accumulation: the two sums merge
 * exactly), and two micro-batches accumulated give the very bits of the
 * whole batch, as a batch split between ranks must. */
static void test_backward_filter_beta(void)
{
    DdpConvShape sh[NSHAPES];
    DdpOps *ops = plan_all(sh);
    const int picks[] = {2, 4, 6, 16, FIRST_WINOGRAD, FIRST_WINOGRAD + 2};
    for (size_t pi = 0; pi < sizeof picks / sizeof picks[0]; pi++) {
        int i = picks[pi];
        const DdpConvShape *s = &sh[i];
        size_t nx = x_len(s, 3), nw = w_len(s), ny = y_len(s, 3);
        float *x = random_floats(nx), *g = random_floats(ny), *old = random_floats(nw);
        DdpGrad *grad = grads_filled(nw, 0), *dw = grads_of(old, nw), *want = grads_of(old, nw);
        ddp_conv_backward_filter(ops, i, 3, x, g, grad, 0.0f);
        for (size_t j = 0; j < nw; j++)
            ddp_exact_merge(&want[j], grad[j]);
        ddp_conv_backward_filter(ops, i, 3, x, g, dw, 1.0f);
        CU_ASSERT_EQUAL(memcmp(dw, want, nw * sizeof *dw), 0);

        /* Sample 0 with beta 0, then samples 1..2 with beta 1. */
        ddp_conv_backward_filter(ops, i, 1, x, g, dw, 0.0f);
        ddp_conv_backward_filter(ops, i, 2, x + x_len(s, 1), g + y_len(s, 1), dw, 1.0f);
        CU_ASSERT_EQUAL(memcmp(dw, grad, nw * sizeof *dw), 0);
        free(x), free(g), free(old), free(grad), free(dw), free(want);
    }
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_ops_destroy(ops);
}

static void ref_gemm(int ta, int tb, int m, int n, int k, double alpha, const float *a, int lda,
                     const float *b, int ldb, double beta, const float *c_in, int ldc,
                     double *c_out)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double sum = 0;
            for (int p = 0; p < k; p++)
                sum += (double)(ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]) *
                       (tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j]);
            double old = beta == 0 ? 0 : beta * c_in[(size_t)i * ldc + j];
            c_out[(size_t)i * n + j] = alpha * sum + old;
        }
}

/* One product; C's padding columns must come back untouched. */
static void check_gemm(DdpOps *ops, int ta, int tb, int m, int n, int k, float alpha, float beta)
{
    const int pad = 3;
    int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    float *a = random_floats((size_t)(ta ? k : m) * lda + 1);
    float *b = random_floats((size_t)(tb ? n : k) * ldb + 1);
    float *c = beta == 0 ? filled((size_t)m * ldc + 1, NAN) : random_floats((size_t)m * ldc + 1);
    float *c0 = malloc(((size_t)m * ldc + 1) * sizeof *c0);
    memcpy(c0, c, ((size_t)m * ldc + 1) * sizeof *c);
    double *want = malloc(((size_t)m * n + 1) * sizeof *want);
    float *got = malloc(((size_t)m * n + 1) * sizeof *got);
    ref_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc, want);
    ddp_gemm(ops, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    size_t padding_touched = 0;
    for (int i = 0; i < m; i++) {
        memcpy(got + (size_t)i * n, c + (size_t)i * ldc, (size_t)n * sizeof *got);
        for (int j = n; j < ldc; j++)
            padding_touched += memcmp(&c[(size_t)i * ldc + j], &c0[(size_t)i * ldc + j],
                                      sizeof *c) != 0;
    }
    char what[120];
    snprintf(what, sizeof what, "gemm trans_a=%d trans_b=%d m=%d n=%d k=%d alpha=%g beta=%g", ta,
             tb, m, n, k, alpha, beta);
    CU_ASSERT_EQUAL(count_mismatches(what, got, want, (size_t)m * n), 0);
    CU_ASSERT_EQUAL(padding_touched, 0);
    free(a), free(b), free(c), free(c0), free(want), free(got);
}

/* The generated optimizers' momentum: a subnormal stored as zero, every
 * other float (FLT_MIN itself, infinities, NaN) as it is; and a momentum
 * that decays under a zero gradient, as mlp.net's do, reaches zero instead
 * of staying subnormal for good (0.9 x 4 times the smallest subnormal
 * rounds back to it). */
static void test_flush_subnormal(void)
{
    const float kept[] = {FLT_MIN, -FLT_MIN, 1.0f, -3.5e-20f, FLT_MAX, INFINITY, -INFINITY, 0.0f};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        CU_ASSERT_EQUAL(ddp_flush_subnormal(kept[i]), kept[i]);
    CU_ASSERT(isnan(ddp_flush_subnormal(NAN)));
    const float flushed[] = {FLT_MIN / 2, -FLT_MIN / 2, nextafterf(FLT_MIN, 0.0f), FLT_TRUE_MIN, -FLT_TRUE_MIN,
                             FLT_TRUE_MIN * 3, -0.0f};
    for (size_t i = 0; i < sizeof flushed / sizeof flushed[0]; i++)
        CU_ASSERT(ddp_flush_subnormal(flushed[i]) == 0.0f && !signbit(ddp_flush_subnormal(flushed[i])));
    volatile float decay = 0.9f; /* at run time, as the optimizer's */
    float plain = 1e-3f, flushing = 1e-3f;
    for (int step = 0; step < 2000; step++) {
        plain = decay * plain;
        flushing = ddp_flush_subnormal(decay * flushing);
    }
    CU_ASSERT(plain == 4 * FLT_TRUE_MIN); /* stuck */
    CU_ASSERT(flushing == 0.0f);
}

static void test_gemm(void)
{
    DdpOps *ops = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    /* m, n, k: tiny, odd, a linear layer's three products (batch 64, 1024 -> 128;
     * rows in blocks of 16, a last partial one padded; columns in blocks by
     * n), k = 0. */
    static const int sizes[][3] = {{1, 1, 1},     {5, 7, 3},     {17, 13, 29},  {64, 128, 1024},
                                   {128, 1024, 64}, {64, 1024, 128}, {300, 70, 150}, {4, 6, 0}};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                const int *z = sizes[si];
                check_gemm(ops, ta, tb, z[0], z[1], z[2], 1.0f, 0.0f);
                check_gemm(ops, ta, tb, z[0], z[1], z[2], 0.5f, 1.0f);
                check_gemm(ops, ta, tb, z[0], z[1], z[2], -1.5f, 0.25f);
            }
    check_gemm(ops, 0, 0, 0, 5, 5, 1.0f, 0.0f); /* empty: nothing to do, no failure */
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_ops_destroy(ops);
}

/* A row of C comes out the same bits however many rows the product has: a
 * sample's output in a batch of 40 and alone or among 24 (as on one of
 * several ranks), at another place in gemm_cpu.c's 6-row tiles and in
 * ddp_gemm's blocks of rows. The MLP's and MNIST's layers, a product split
 * into column blocks, and 4096 -> 520, whose last tile is 8 columns wide. A
 * BLAS would fail this: OpenBLAS 0.3.21's Haswell and Zen kernels did for
 * every layer here. */
static void test_gemm_rows_independent_of_m(void)
{
    DdpOps *ops = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    static const int layers[][2] = {{512, 784}, {256, 512}, {10, 256}, {128, 1024}, {520, 4096}};
    const int m = 40, starts[] = {0, 16, 33, 39}, counts[] = {16, 24, 1, 1};
    for (size_t li = 0; li < sizeof layers / sizeof layers[0]; li++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int n = layers[li][0], k = layers[li][1];
                const int lda = ta ? m : k, ldb = tb ? k : n;
                float *a = random_floats((size_t)m * k), *b = random_floats((size_t)n * k);
                float *c = filled((size_t)m * n, NAN), *part = filled((size_t)m * n, NAN);
                ddp_gemm(ops, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
                size_t differ = 0;
                for (size_t si = 0; si < sizeof starts / sizeof starts[0]; si++) {
                    /* rows [start, start + count) of op(A) as a product of their own */
                    const int r0 = starts[si], rows = counts[si];
                    float *sub_a = malloc((size_t)rows * k * sizeof *sub_a);
                    for (int i = 0; i < rows; i++)
                        for (int p = 0; p < k; p++)
                            sub_a[ta ? (size_t)p * rows + i : (size_t)i * k + p] =
                                ta ? a[(size_t)p * m + r0 + i] : a[(size_t)(r0 + i) * k + p];
                    ddp_gemm(ops, ta, tb, rows, n, k, 1.0f, sub_a, ta ? rows : k, b, ldb, 0.0f, part, n);
                    differ += memcmp(part, c + (size_t)r0 * n, (size_t)rows * n * sizeof *c) != 0;
                    free(sub_a);
                }
                char what[120];
                snprintf(what, sizeof what, "%d -> %d, trans_a=%d trans_b=%d", k, n, ta, tb);
                if (differ)
                    printf("\n    %s: %zu of 4 row ranges differ from the whole product ", what, differ);
                CU_ASSERT_EQUAL(differ, 0);
                free(a), free(b), free(c), free(part);
            }
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_ops_destroy(ops);
}

/* ddp_gemm_grad: dw = (beta ? dw : 0) + dy^T x against the double
 * reference, with padding columns left alone, beta 0 ignoring NaN, beta 1
 * accumulating. */
static void check_gemm_grad(DdpOps *ops, int m, int n, int k, float beta, int zeros)
{
    const int pad = 3, ldy = m + pad, ldx = n + 1, ldw = n + pad;
    float *dy = random_floats((size_t)k * ldy + 1), *x = random_floats((size_t)k * ldx + 1);
    for (int p = 0; p < k && zeros; p++) /* 3 in 4 values zero: the lists of nonzeros (a ReLU's gradient) */
        for (int i = 0; i < m; i++)
            if ((p + i) % 4)
                dy[(size_t)p * ldy + i] = 0.0f;
    float *old = random_floats((size_t)m * ldw + 1);
    DdpGrad *dw = beta != 0 ? grads_of(old, (size_t)m * ldw) : grads_filled((size_t)m * ldw + 1, NAN);
    DdpGrad *was = grads_of(old, (size_t)m * ldw);
    double *want = malloc(((size_t)m * n + 1) * sizeof *want), *got = malloc(((size_t)m * n + 1) * sizeof *got);
    ref_gemm(1, 0, m, n, k, 1.0, dy, ldy, x, ldx, beta, old, ldw, want);
    ddp_gemm_grad(ops, m, n, k, dy, ldy, x, ldx, beta, dw, ldw);
    size_t padding_touched = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < ldw; j++) {
            const size_t at = (size_t)i * ldw + j;
            if (j < n)
                got[(size_t)i * n + j] = ddp_exact_value(dw[at]);
            else
                padding_touched += beta == 0 ? !isnan(dw[at].hi) : memcmp(&dw[at], &was[at], sizeof *dw) != 0;
        }
    char what[120];
    snprintf(what, sizeof what, "gemm_grad m=%d n=%d k=%d beta=%g", m, n, k, beta);
    CU_ASSERT_EQUAL(count_mismatches_double(what, got, want, (size_t)m * n), 0);
    CU_ASSERT_EQUAL(padding_touched, 0);
    free(dy), free(x), free(old), free(dw), free(was), free(want), free(got);
}

/* A part beyond the window (one huge dy), or a NaN: ddp_gemm_grad takes the
 * checked way for the whole product; the row it falls in becomes NaN, the
 * flag is raised (not for a NaN, which is no overflow), and every other
 * element has the bits of the fast tiles. */
static void test_gemm_grad_outside_the_window(void)
{
    DdpOps *ops = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    const int m = 13, n = 40, k = 9, bad_row = 5, bad_sample = 4;
    float *dy = random_floats((size_t)k * m), *x = random_floats((size_t)k * n);
    DdpGrad *fast = grads_filled((size_t)m * n, NAN), *checked = grads_filled((size_t)m * n, NAN);
    dy[(size_t)bad_sample * m + bad_row] = 0.0f;
    ddp_gemm_grad(ops, m, n, k, dy, m, x, n, 0.0f, fast, n);
    for (int kind = 0; kind < 3; kind++) { /* too large, NaN, a NaN with its sign bit set */
        ddp_exact_overflow_clear();
        dy[(size_t)bad_sample * m + bad_row] = kind == 0 ? 1e30f : kind == 1 ? NAN : -NAN;
        ddp_gemm_grad(ops, m, n, k, dy, m, x, n, 0.0f, checked, n);
        CU_ASSERT_EQUAL(ddp_exact_overflowed(NULL, NULL), !kind);
        ddp_exact_overflow_clear();
        size_t other_differ = 0, bad_not_nan = 0;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                const size_t at = (size_t)i * n + j;
                if (i == bad_row)
                    bad_not_nan += !isnan(ddp_exact_value(checked[at]));
                else
                    other_differ += memcmp(&fast[at], &checked[at], sizeof *fast) != 0;
            }
        CU_ASSERT_EQUAL(bad_not_nan, 0);
        CU_ASSERT_EQUAL(other_differ, 0);
    }
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_ops_destroy(ops);
    free(dy), free(x), free(fast), free(checked);
}

/* The gradient sums' two ways, dense tiles and lists of A's nonzeros (for
 * an A with many zeros: a ReLU's gradient), and each way's two loops: a
 * product below the window's lo_only_below is deposited in LO alone (2
 * operations a product), the others split. The dense tiles reorder the
 * samples, small ones first, once per block of A's columns, by the block's
 * bounds; the lists sort each column's values by their own. Samples of both
 * kinds, interleaved, one small in the first block's columns alone and one
 * in the second's alone, columns of C past the last whole panel, through
 * ddp_gradsum_exact itself (ddp_gemm_grad would split A's columns among
 * threads), at either vector width, fresh and accumulating: the bits of
 * ddp_exact_add, part by part. ZEROS: 3 in 4 values of A zero, some -0 (the
 * lists), or none (the dense tiles). */
static void check_gradsum_small_and_large_parts(int zeros)
{
    set_test_windows();
    const int k = 24, n = 50, block = ddp_gradsum_exact_block_rows(k), m = block + 38, was = ddp_gemm_cpu_wide();
    const float small = (float)(ddp_grad_window.lo_only_below / 4); /* |dy|, |x| at most 1: every product below it */
    float *dy = random_floats((size_t)k * m), *x = random_floats((size_t)k * n);
    int small_samples = 0;
    for (int p = 0; p < k; p++)
        if (p % 3 != 1) {
            for (int i = 0; i < m; i++)
                dy[(size_t)p * m + i] *= small;
            small_samples++;
        }
    for (int i = 0; i < block; i++) /* sample 1: small in the first block alone */
        dy[(size_t)1 * m + i] *= small;
    for (int i = block; i < m; i++) /* sample 4: in the second alone */
        dy[(size_t)4 * m + i] *= small;
    for (int p = 0; p < k && zeros; p++)
        for (int i = 0; i < m; i++)
            if ((p + i) % 4)
                dy[(size_t)p * m + i] = (p + i) % 8 == 1 ? -0.0f : 0.0f;
    DdpGrad *want = grads_filled((size_t)m * n, 0.0), *twice = grads_filled((size_t)m * n, 0.0);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = k - 1; p >= 0; p--) {
                const double part = (double)dy[(size_t)p * m + i] * x[(size_t)p * n + j];
                ddp_exact_add(&want[(size_t)i * n + j], part, &ddp_grad_window);
                ddp_exact_add(&twice[(size_t)i * n + j], part, &ddp_grad_window);
                ddp_exact_add(&twice[(size_t)i * n + j], part, &ddp_grad_window);
            }
    size_t large_parts = 0;
    for (size_t e = 0; e < (size_t)m * n; e++)
        large_parts += want[e].hi != 0.0;
    CU_ASSERT(small_samples > 0 && large_parts > 0 && m > block); /* both loops, two blocks */
    CU_ASSERT_EQUAL(ddp_gradsum_exact_lists(m, k, dy, m), zeros); /* the way meant */
    double *scratch = malloc(ddp_gradsum_exact_scratch(m, k) * sizeof *scratch);
    CU_ASSERT_FATAL(scratch != NULL);
    for (int wide = 0; wide < 2; wide++) {
        if (ddp_gemm_cpu_set_wide(wide) != wide)
            continue; /* no AVX-512 here */
        DdpGrad *got = grads_filled((size_t)m * n, NAN);
        ddp_gradsum_exact(m, n, k, dy, m, x, n, 0, got, n, &ddp_grad_window, scratch);
        CU_ASSERT_EQUAL(memcmp(got, want, (size_t)m * n * sizeof *got), 0);
        ddp_gradsum_exact(m, n, k, dy, m, x, n, 1, got, n, &ddp_grad_window, scratch);
        CU_ASSERT_EQUAL(memcmp(got, twice, (size_t)m * n * sizeof *got), 0);
        free(got);
    }
    ddp_gemm_cpu_set_wide(was);
    free(scratch);
    free(dy), free(x), free(want), free(twice);
}

static void test_gemm_grad_small_and_large_parts(void)
{
    check_gradsum_small_and_large_parts(0);
}

static void test_gemm_grad_sparse_small_and_large_parts(void)
{
    check_gradsum_small_and_large_parts(1);
}

static void test_gemm_grad(void)
{
    DdpOps *ops = NULL;
    /* no samples, first call on a fresh context: beta 0 still overwrites NaN */
    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    check_gemm_grad(ops, 4, 6, 0, 0.0f, 0);
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_ops_destroy(ops);
    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    /* out, in, batch: tiny, odd, MNIST's two linear layers (the first split by
     * columns), a tall one split by rows, an empty batch; each with a
     * gradient of no zeros (the dense tiles) and 3 in 4 zero (the lists; the
     * tiny one keeps its one value, and an empty batch is listed either way) */
    static const int sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {128, 1024, 64}, {10, 128, 64}, {1200, 70, 40}, {4, 6, 0}};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (int zeros = 0; zeros < 2; zeros++) {
            check_gemm_grad(ops, sizes[si][0], sizes[si][1], sizes[si][2], 0.0f, zeros);
            check_gemm_grad(ops, sizes[si][0], sizes[si][1], sizes[si][2], 1.0f, zeros);
        }
    }
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_ops_destroy(ops);
}

/* What DdpGrad is for: a batch's weight gradient comes out the very same
 * bits when the batch is split in two and the halves are added (two ranks,
 * or two accumulated micro-batches). Sums kept in float or double round
 * differently in the last bit and fail this. */
static void check_gradient_split_invariant(const Conv cv, const char *weight_gradient_by)
{
    const int n = 8, half = n / 2;
    DdpConvShape s = shape_of(&cv, n);
    DdpOps *ops = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    CU_ASSERT_EQUAL_FATAL(ddp_ops_plan_conv(ops, 0, &s), DDP_OK);
    CU_ASSERT_EQUAL_FATAL(ddp_ops_finalize(ops), DDP_OK);
    char line[200];
    ddp_ops_describe_conv(ops, 0, line, sizeof line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, weight_gradient_by));
    size_t nx = x_len(&s, n), nw = w_len(&s), ny = y_len(&s, n);
    float *x = random_floats(nx), *g = random_floats(ny);
    const int m = 128, k = 300, lin = 2 * n; /* a linear layer 300 -> 128 over 16 samples */
    float *dy = random_floats((size_t)lin * m), *xin = random_floats((size_t)lin * k);
    DdpGrad *whole = grads_filled(nw + (size_t)m * k, 0), *halves = grads_filled(nw + (size_t)m * k, 0);
    ddp_conv_backward_filter(ops, 0, n, x, g, whole, 0.0f);
    ddp_conv_backward_filter(ops, 0, half, x, g, halves, 0.0f);
    ddp_conv_backward_filter(ops, 0, half, x + x_len(&s, half), g + y_len(&s, half), halves, 1.0f);
    ddp_gemm_grad(ops, m, k, lin, dy, m, xin, k, 0.0f, whole + nw, k);
    ddp_gemm_grad(ops, m, k, lin / 2, dy, m, xin, k, 0.0f, halves + nw, k);
    ddp_gemm_grad(ops, m, k, lin / 2, dy + (size_t)lin / 2 * m, m, xin + (size_t)lin / 2 * k, k, 1.0f, halves + nw, k);
    size_t differ = 0;
    for (size_t i = 0; i < nw + (size_t)m * k; i++)
        differ += memcmp(&whole[i], &halves[i], sizeof *whole) != 0;
    CU_ASSERT_EQUAL(differ, 0);
    if (differ)
        printf("\n    %zu of %zu gradients differ between the batch and its two halves ", differ,
               nw + (size_t)m * k);
    /* The linear layer again, its first half's output gradients 3 in 4 zero
     * (some -0, as a ReLU's backward gives; 3 in 4 of its columns wholly,
     * empty lists): the whole batch (5 in 8 nonzero) and the first half
     * take the lists of nonzeros, the second half the dense tiles. */
    for (size_t e = 0; e < (size_t)lin / 2 * m; e++)
        if (e % 4)
            dy[e] = e % 8 == 1 ? -0.0f : 0.0f;
    CU_ASSERT(ddp_gradsum_exact_lists(m, lin, dy, m) && ddp_gradsum_exact_lists(m, lin / 2, dy, m) &&
              !ddp_gradsum_exact_lists(m, lin / 2, dy + (size_t)lin / 2 * m, m));
    ddp_gemm_grad(ops, m, k, lin, dy, m, xin, k, 0.0f, whole + nw, k);
    ddp_gemm_grad(ops, m, k, lin / 2, dy, m, xin, k, 0.0f, halves + nw, k);
    ddp_gemm_grad(ops, m, k, lin / 2, dy + (size_t)lin / 2 * m, m, xin + (size_t)lin / 2 * k, k, 1.0f, halves + nw, k);
    CU_ASSERT_EQUAL(memcmp(whole + nw, halves + nw, (size_t)m * k * sizeof *whole), 0);
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_ops_destroy(ops);
    free(x), free(g), free(dy), free(xin), free(whole), free(halves);
}

static void test_gradient_split_invariant(void)
{
    check_gradient_split_invariant((Conv){16, 16, 16, 24, 5, 5, 1, 2, 1}, "weight gradient by Winograd"); /* 16 tiles */
    check_gradient_split_invariant((Conv){16, 12, 10, 24, 5, 5, 1, 2, 1}, "weight gradient by Winograd"); /* 9 tiles */
    check_gradient_split_invariant((Conv){16, 8, 8, 24, 5, 5, 1, 0, 1}, "weight gradient by im2col"); /* 1 tile */
    check_gradient_split_invariant((Conv){16, 12, 10, 24, 3, 3, 1, 1, 1}, "weight gradient by Winograd"); /* 3x3 */
    /* channels not a multiple of 8 (short blocks), a non-square kernel (its own unrolled transform back) */
    check_gradient_split_invariant((Conv){9, 11, 10, 10, 5, 7, 1, 2, 1}, "weight gradient by Winograd");
    check_gradient_split_invariant((Conv){16, 12, 10, 24, 3, 3, 1, 1, 2}, "im2col + product"); /* groups 2 */
}

/* The same inputs give bit-identical outputs whatever the number of threads:
 * the promise the distributed-equivalence tests and --resume rely on. */
static void check_deterministic_across_threads(const Conv cv)
{
#ifdef _OPENMP
    const int n = 5, threads[] = {1, 2, 3, 4, 8}; /* 8: more threads than samples */
    DdpConvShape s = shape_of(&cv, n);
    size_t nx = x_len(&s, n), nw = w_len(&s), ny = y_len(&s, n);
    const int gm = 200, gn = 150, gk = 100; /* large enough to be split */
    float *x = random_floats(nx), *w = random_floats(nw), *g = random_floats(ny);
    float *ga = random_floats((size_t)gm * gk), *gb = random_floats((size_t)gk * gn);
    /* A's first half of columns 3 in 4 zero: one thread lists all of A's
     * nonzeros (5 in 8), 2 threads those of the first half and the dense
     * tiles take the second, 3 and 4 threads list a block across the two */
    for (int p = 0; p < gk; p++)
        for (int i = 0; i < gm / 2; i++)
            if ((p + i) % 4)
                ga[(size_t)p * gm + i] = 0.0f;
    float *first = NULL;
    DdpGrad *first_grads = NULL;
    size_t total = ny + nx + (size_t)gm * gn, total_grads = nw + (size_t)gm * gn;
    int saved = omp_get_max_threads();
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        omp_set_num_threads(threads[t]);
        DdpOps *ops = NULL;
        CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
        CU_ASSERT_EQUAL_FATAL(ddp_ops_plan_conv(ops, 0, &s), DDP_OK);
        CU_ASSERT_EQUAL_FATAL(ddp_ops_finalize(ops), DDP_OK);
        float *out = malloc(total * sizeof *out);
        DdpGrad *grads = grads_filled(total_grads, NAN);
        ddp_conv_forward(ops, 0, n, x, w, out);
        ddp_conv_backward_data(ops, 0, n, g, w, out + ny, 0.0f);
        ddp_gemm(ops, 0, 1, gm, gn, gk, 1.0f, ga, gk, gb, gk, 0.0f, out + ny + nx, gn);
        ddp_conv_backward_filter(ops, 0, n, x, g, grads, 0.0f);
        ddp_gemm_grad(ops, gm, gn, gk, ga, gm, gb, gn, 0.0f, grads + nw, gn);
        CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
        ddp_ops_destroy(ops);
        if (!first) {
            first = out;
            first_grads = grads;
        } else {
            CU_ASSERT_EQUAL(memcmp(first, out, total * sizeof *out), 0);
            CU_ASSERT_EQUAL(memcmp(first_grads, grads, total_grads * sizeof *grads), 0);
            free(out);
            free(grads);
        }
    }
    omp_set_num_threads(saved);
    free(x), free(w), free(g), free(ga), free(gb), free(first), free(first_grads);
#else
    (void)cv;
#endif
}

/* The products' two vector widths (gemm_cpu.h: 8 floats, and 16 where the
 * CPU has AVX-512) give the same bits: ddp_gemm with every transpose, alpha
 * and beta, ddp_gemm_grad, and the convs that use them (im2col, Winograd). */
static void test_vector_widths_same_bits(void)
{
    const int was = ddp_gemm_cpu_wide();
    if (!ddp_gemm_cpu_set_wide(1)) {
        fputs("\n    (one width only: this CPU has no AVX-512)", stderr);
        return;
    }
    const int m = 37, n = 70, k = 300, n_conv = 3;
    const Conv convs[] = {{16, 12, 10, 24, 3, 3, 1, 1, 2}, {16, 16, 16, 24, 5, 5, 1, 2, 1}}; /* im2col, Winograd */
    float *a = random_floats((size_t)m * k), *b = random_floats((size_t)n * k), *c0 = random_floats((size_t)m * n);
    float *x[2], *w[2], *dy[2]; /* each conv's inputs, the same for both widths */
    for (int i = 0; i < 2; i++) {
        const DdpConvShape s = shape_of(&convs[i], n_conv);
        x[i] = random_floats(x_len(&s, n_conv)), w[i] = random_floats(w_len(&s)), dy[i] = random_floats(y_len(&s, n_conv));
    }
    float *out[2] = {NULL, NULL};
    DdpGrad *grads[2] = {NULL, NULL};
    size_t floats = 0, doubles = 0;
    for (int wide = 0; wide < 2; wide++) {
        CU_ASSERT_EQUAL(ddp_gemm_cpu_set_wide(wide), wide);
        DdpOps *ops = NULL;
        CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
        DdpConvShape sh[2];
        for (int i = 0; i < 2; i++) {
            sh[i] = shape_of(&convs[i], n_conv);
            CU_ASSERT_EQUAL_FATAL(ddp_ops_plan_conv(ops, i, &sh[i]), DDP_OK);
        }
        CU_ASSERT_EQUAL_FATAL(ddp_ops_finalize(ops), DDP_OK);
        floats = 4 * (size_t)m * n, doubles = (size_t)m * n;
        for (int i = 0; i < 2; i++)
            floats += y_len(&sh[i], n_conv) + x_len(&sh[i], n_conv), doubles += w_len(&sh[i]);
        float *o = out[wide] = malloc(floats * sizeof *o);
        DdpGrad *g = grads[wide] = grads_filled(doubles, NAN);
        for (int t = 0; t < 4; t++, o += (size_t)m * n) { /* the four transposes, alpha 1.5, beta 0.5 */
            memcpy(o, c0, (size_t)m * n * sizeof *o);
            ddp_gemm(ops, t & 1, t >> 1, m, n, k, 1.5f, a, t & 1 ? m : k, b, t >> 1 ? k : n, 0.5f, o, n);
        }
        ddp_gemm_grad(ops, m, n, k, a, m, b, n, 0.0f, g, n);
        ddp_gemm_grad(ops, m, n, k, a, m, b, n, 1.0f, g, n); /* and accumulating */
        g += (size_t)m * n;
        for (int i = 0; i < 2; i++) {
            ddp_conv_forward(ops, i, n_conv, x[i], w[i], o);
            o += y_len(&sh[i], n_conv);
            ddp_conv_backward_data(ops, i, n_conv, dy[i], w[i], o, 0.0f);
            o += x_len(&sh[i], n_conv);
            ddp_conv_backward_filter(ops, i, n_conv, x[i], dy[i], g, 0.0f);
            g += w_len(&sh[i]);
        }
        CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
        ddp_ops_destroy(ops);
    }
    CU_ASSERT_EQUAL(memcmp(out[0], out[1], floats * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(grads[0], grads[1], doubles * sizeof(DdpGrad)), 0);
    ddp_gemm_cpu_set_wide(was);
    for (int i = 0; i < 2; i++)
        free(x[i]), free(w[i]), free(dy[i]);
    free(a), free(b), free(c0), free(out[0]), free(out[1]), free(grads[0]), free(grads[1]);
}

static void test_deterministic_across_threads(void)
{
    check_deterministic_across_threads((Conv){16, 12, 10, 24, 3, 3, 1, 1, 2}); /* im2col (grouped) */
    check_deterministic_across_threads((Conv){16, 16, 16, 24, 5, 5, 1, 2, 1}); /* Winograd, its weight gradient too */
    check_deterministic_across_threads((Conv){9, 11, 10, 10, 5, 7, 1, 2, 1});  /* the same, short blocks, non-square */
    check_deterministic_across_threads((Conv){16, 12, 10, 24, 3, 3, 1, 1, 1}); /* Winograd 3x3, or oneDNN */
    check_deterministic_across_threads((Conv){8, 13, 11, 16, 3, 3, 2, 1, 1}); /* strided: im2col, or oneDNN */
}

/* On the runtime's own kernels, the convs at FIRST_WINOGRAD on are done by
 * Winograd and the others not, so the shape tests above cover both. */
static void test_winograd_chosen(void)
{
    DdpConvShape sh[NSHAPES];
    DdpOps *ops = plan_all(sh);
    for (int i = 0; i < NSHAPES; i++) {
        char line[160];
        ddp_ops_describe_conv(ops, i, line, sizeof line);
        CU_ASSERT_EQUAL(strstr(line, "Winograd") != NULL, i >= FIRST_WINOGRAD);
    }
    ddp_ops_destroy(ops);
}

/* A Winograd conv of 3 samples, for the tests that run one pass two ways:
 * its shape, plan (one thread), sizes, random x, w and dy, and scratch. */
typedef struct {
    DdpConvShape sh;
    WinogradPlan plan;
    size_t nx, nw, ny;
    float *x, *w, *dy;
    void *scratch;
} WinogradCase;

enum { WINOGRAD_CASE_SAMPLES = 3 };

static void winograd_case(const Conv *cv, WinogradCase *c)
{
    c->sh = shape_of(cv, WINOGRAD_CASE_SAMPLES);
    const DdpConvShape *sh = &c->sh;
    CU_ASSERT_FATAL(ddp_winograd_suits(sh));
    ddp_winograd_plan(&c->plan, sh, 1);
    CU_ASSERT_FATAL(ddp_winograd_filter_suits(&c->plan)); /* the scratch holds the weight gradient's */
    c->nx = (size_t)WINOGRAD_CASE_SAMPLES * sh->c * sh->h * sh->w;
    c->nw = (size_t)sh->k * sh->c * sh->r * sh->s;
    c->ny = (size_t)WINOGRAD_CASE_SAMPLES * sh->k * sh->out_h * sh->out_w;
    c->x = random_floats(c->nx), c->w = random_floats(c->nw), c->dy = random_floats(c->ny);
    c->scratch = aligned_alloc(64, (ddp_winograd_scratch_bytes(&c->plan, sh, 1) + 63) / 64 * 64);
}

static void winograd_case_free(WinogradCase *c)
{
    free(c->x), free(c->w), free(c->dy), free(c->scratch);
}

/* Every square kernel Winograd takes gets the unrolled tile transforms (the
 * plan's matrices are winograd_cpu.c's tables): where the plan's check of
 * them fails, every tile transform falls back to the slower general one,
 * with the same results, which no other test would notice. And the
 * unrolled ones give the general one's bits, in the forward and data
 * passes, and the weight gradient, whose transform back takes neither
 * (test_winograd_paired), is the same either way. */
static void test_winograd_unrolled(void)
{
    const Conv squares[] = {{16, 14, 14, 16, 3, 3, 1, 1, 1}, {8, 12, 12, 8, 5, 5, 1, 0, 1},
                            {9, 14, 14, 9, 6, 6, 1, 2, 1},   {8, 12, 12, 8, 7, 7, 1, 3, 1},
                            {40, 14, 14, 32, 3, 3, 1, 1, 1}};
    const int n = WINOGRAD_CASE_SAMPLES;
    set_test_windows();
    for (size_t i = 0; i < sizeof squares / sizeof squares[0]; i++) {
        WinogradCase c;
        winograd_case(&squares[i], &c);
        CU_ASSERT(c.plan.fixed);
        float *y[2], *dx[2];
        DdpGrad *dw[2];
        for (int unrolled = 1; unrolled >= 0; unrolled--) {
            c.plan.fixed = unrolled;
            y[unrolled] = malloc(c.ny * sizeof(float));
            dx[unrolled] = malloc(c.nx * sizeof(float));
            dw[unrolled] = malloc(c.nw * sizeof(DdpGrad));
            ddp_winograd_forward(&c.plan, &c.sh, 1, c.scratch, n, c.x, c.w, y[unrolled]);
            ddp_winograd_backward_data(&c.plan, &c.sh, 1, c.scratch, n, c.dy, c.w, dx[unrolled], 0.0f);
            ddp_winograd_backward_filter(&c.plan, &c.sh, 1, c.scratch, n, c.x, c.dy, dw[unrolled], 0.0f);
        }
        CU_ASSERT(memcmp(y[0], y[1], c.ny * sizeof(float)) == 0);
        CU_ASSERT(memcmp(dx[0], dx[1], c.nx * sizeof(float)) == 0);
        CU_ASSERT(memcmp(dw[0], dw[1], c.nw * sizeof(DdpGrad)) == 0);
        for (int j = 0; j < 2; j++)
            free(y[j]), free(dx[j]), free(dw[j]);
        winograd_case_free(&c);
    }
}

/* Every kernel Winograd takes, each (alpha, r, s) its own unrolled case
 * (winograd_cpu.c's PAIRED_KERNELS), square or not. */
static const Conv winograd_kernels[] = {{16, 14, 14, 16, 3, 3, 1, 1, 1}, {8, 12, 12, 8, 5, 5, 1, 0, 1},
                                        {9, 14, 14, 9, 6, 6, 1, 2, 1},   {8, 12, 12, 8, 7, 7, 1, 3, 1},
                                        {12, 14, 13, 10, 5, 7, 1, 1, 1}, {8, 13, 14, 9, 7, 6, 1, 2, 1},
                                        {8, 14, 14, 8, 5, 6, 1, 2, 1},   {8, 14, 14, 8, 6, 5, 1, 2, 1},
                                        {8, 14, 14, 8, 6, 7, 1, 3, 1},   {8, 14, 14, 8, 7, 5, 1, 2, 1}};
enum { WINOGRAD_KERNELS = sizeof winograd_kernels / sizeof winograd_kernels[0] };

/* The weight gradient's transform back takes G^T's columns for p and -p in
 * pairs (winograd_lanes.inc's paired_rows), on every kernel Winograd takes
 * (winograd_kernels): the plan finds the symmetry in its G^T, and the paired
 * sums agree with the plain ones (sandwich, which the plan would fall back
 * to), within float rounding of the largest gradient, in every block of
 * channels (the last one short where C is not a multiple of 8). */
static void test_winograd_paired(void)
{
    set_test_windows();
    for (size_t i = 0; i < WINOGRAD_KERNELS; i++) {
        WinogradCase c;
        winograd_case(&winograd_kernels[i], &c);
        CU_ASSERT(c.plan.paired);
        DdpGrad *dw[2];
        for (int paired = 1; paired >= 0; paired--) {
            c.plan.paired = paired;
            dw[paired] = malloc(c.nw * sizeof(DdpGrad));
            ddp_winograd_backward_filter(&c.plan, &c.sh, 1, c.scratch, WINOGRAD_CASE_SAMPLES, c.x, c.dy, dw[paired],
                                         0.0f);
        }
        double *a = grad_values(dw[1], c.nw), *b = grad_values(dw[0], c.nw), largest = 0.0, off = 0.0;
        for (size_t j = 0; j < c.nw; j++) {
            largest = fmax(largest, fabs(b[j]));
            off = fmax(off, fabs(a[j] - b[j]));
        }
        CU_ASSERT(largest > 1.0);
        CU_ASSERT(off <= 1e-5 * largest);
        if (off > 1e-5 * largest)
            printf("\n    %dx%d kernel: paired and plain sums %.3g apart (largest %.3g)", c.sh.r, c.sh.s, off,
                   largest);
        free(a), free(b), free(dw[0]), free(dw[1]);
        winograd_case_free(&c);
    }
}

/* Winograd on 16-float vectors (two blocks of 8 channels a vector, where
 * the CPU has AVX-512) gives the 8-float bits: forward, backward data
 * (fresh and onto dx), and the weight gradient (fresh and accumulating), on
 * every kernel Winograd takes (winograd_kernels: each takes the wide
 * weight gradient sums, the square ones the wide tile transforms too, as
 * ddp_winograd_wide says), with C and K making pairs of whole blocks (16,
 * 32), a pair and a whole block left alone (24), a pair whose second block
 * is short (9, 10, 12) and a pair and a short block left alone (17, 20). */
static void test_winograd_widths(void)
{
    const int was = ddp_gemm_cpu_wide();
    if (!ddp_gemm_cpu_set_wide(1)) {
        fputs("\n    (one width only: this CPU has no AVX-512)", stderr);
        return;
    }
    const uint64_t others = rng; /* the later tests' draws left as they were */
    const int cs[WINOGRAD_KERNELS] = {20, 32, 24, 12, 20, 9, 16, 12, 17, 24};
    const int ks[WINOGRAD_KERNELS] = {24, 9, 16, 12, 17, 8, 10, 20, 16, 9};
    const int n = WINOGRAD_CASE_SAMPLES;
    set_test_windows();
    for (size_t i = 0; i < WINOGRAD_KERNELS; i++) {
        Conv cv = winograd_kernels[i];
        cv.c = cs[i], cv.k = ks[i];
        WinogradCase c;
        winograd_case(&cv, &c);
        const int want = DDP_WINOGRAD_WIDE_FILTER | (cv.r == cv.s ? DDP_WINOGRAD_WIDE_TILES : 0);
        float *dx0 = random_floats(c.nx), *y[2], *dx[2];
        DdpGrad *dw[2];
        for (int wide = 0; wide < 2; wide++) {
            CU_ASSERT_EQUAL(ddp_gemm_cpu_set_wide(wide), wide);
            CU_ASSERT_EQUAL(ddp_winograd_wide(&c.plan, &c.sh), wide ? want : 0); /* the two runs differ */
            y[wide] = malloc(c.ny * sizeof(float));
            dx[wide] = malloc(2 * c.nx * sizeof(float));
            dw[wide] = malloc(2 * c.nw * sizeof(DdpGrad));
            ddp_winograd_forward(&c.plan, &c.sh, 1, c.scratch, n, c.x, c.w, y[wide]);
            ddp_winograd_backward_data(&c.plan, &c.sh, 1, c.scratch, n, c.dy, c.w, dx[wide], 0.0f);
            memcpy(dx[wide] + c.nx, dx0, c.nx * sizeof(float));
            ddp_winograd_backward_data(&c.plan, &c.sh, 1, c.scratch, n, c.dy, c.w, dx[wide] + c.nx, 0.5f);
            ddp_winograd_backward_filter(&c.plan, &c.sh, 1, c.scratch, n, c.x, c.dy, dw[wide], 0.0f);
            memcpy(dw[wide] + c.nw, dw[wide], c.nw * sizeof(DdpGrad));
            ddp_winograd_backward_filter(&c.plan, &c.sh, 1, c.scratch, n, c.x, c.dy, dw[wide] + c.nw, 1.0f);
        }
        const int same_y = memcmp(y[0], y[1], c.ny * sizeof(float)) == 0;
        const int same_dx = memcmp(dx[0], dx[1], 2 * c.nx * sizeof(float)) == 0;
        const int same_dw = memcmp(dw[0], dw[1], 2 * c.nw * sizeof(DdpGrad)) == 0;
        CU_ASSERT(same_y && same_dx && same_dw);
        if (!same_y || !same_dx || !same_dw)
            printf("\n    C %d, K %d, %dx%d kernel: the widths differ in%s%s%s", c.sh.c, c.sh.k, c.sh.r, c.sh.s,
                   same_y ? "" : " y", same_dx ? "" : " dx", same_dw ? "" : " dw");
        for (int j = 0; j < 2; j++)
            free(y[j]), free(dx[j]), free(dw[j]);
        free(dx0);
        winograd_case_free(&c);
    }
    ddp_gemm_cpu_set_wide(was);
    rng = others;
}

/* A conv's forward and data gradient for a sample are the same bits in any
 * batch: its rows sit at other places in the products when the batch is
 * split as among ranks (ops_cpu.c's promise, which tests/distributed/
 * relies on). */
static void test_sample_independent_of_batch(void)
{
    DdpOps *ops = NULL;
    /* On the runtime's own kernels: Winograd: MNIST's second conv (4 tiles a sample), one whose tiles
     * overhang (12 tiles), a wide one (1024 channels in), a 3x3 one (6x6
     * input tiles); im2col: MNIST's first. 160 samples, and parts of them
     * alone. */
    const Conv convs[] = {{32, 12, 12, 64, 5, 5, 1, 0, 1}, {16, 14, 13, 8, 5, 5, 1, 1, 1},
                          {1024, 6, 6, 8, 5, 5, 1, 2, 1},  {16, 14, 13, 8, 3, 3, 1, 1, 1},
                          {1, 28, 28, 32, 5, 5, 1, 0, 1}};
    const int n = 160, starts[] = {0, 64, 133, 159}, counts[] = {64, 96, 1, 1};
    for (size_t ci = 0; ci < sizeof convs / sizeof convs[0]; ci++) {
        DdpConvShape s = shape_of(&convs[ci], n);
        CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
        CU_ASSERT_EQUAL_FATAL(ddp_ops_plan_conv(ops, 0, &s), DDP_OK);
        CU_ASSERT_EQUAL_FATAL(ddp_ops_finalize(ops), DDP_OK);
        size_t nx = x_len(&s, n), nw = w_len(&s), ny = y_len(&s, n);
        float *x = random_floats(nx), *w = random_floats(nw), *g = random_floats(ny);
        float *y = filled(ny, NAN), *dx = filled(nx, NAN), *part_y = filled(ny, NAN), *part_dx = filled(nx, NAN);
        ddp_conv_forward(ops, 0, n, x, w, y);
        ddp_conv_backward_data(ops, 0, n, g, w, dx, 0.0f);
        size_t differ = 0;
        for (size_t pi = 0; pi < sizeof starts / sizeof starts[0]; pi++) {
            const int first = starts[pi], count = counts[pi];
            ddp_conv_forward(ops, 0, count, x + x_len(&s, first), w, part_y);
            ddp_conv_backward_data(ops, 0, count, g + y_len(&s, first), w, part_dx, 0.0f);
            differ += memcmp(part_y, y + y_len(&s, first), y_len(&s, count) * sizeof *y) != 0;
            differ += memcmp(part_dx, dx + x_len(&s, first), x_len(&s, count) * sizeof *dx) != 0;
        }
        if (differ)
            printf("\n    conv %zu: %zu of 8 parts differ from the whole batch ", ci, differ);
        CU_ASSERT_EQUAL(differ, 0);
        CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
        ddp_ops_destroy(ops);
        free(x), free(w), free(g), free(y), free(dx), free(part_y), free(part_dx);
    }
}

/* A wrong call from the generated program is recorded, not acted on, and
 * reported by ddp_ops_status with a message naming it. */
static void test_misuse_is_reported(void)
{
    DdpOps *ops = NULL;
    DdpConvShape s = shape_of(&SHAPES[1], 2);
    float *buf = filled(4096, 7.0f);

    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    CU_ASSERT_EQUAL(ddp_ops_plan_conv(ops, 0, &s), DDP_OK);
    CU_ASSERT_EQUAL(ddp_ops_plan_conv(ops, 0, &s), DDP_FAIL); /* twice */
    CU_ASSERT_EQUAL(ddp_ops_plan_conv(ops, 2, &s), DDP_OK);
    CU_ASSERT_EQUAL(ddp_ops_finalize(ops), DDP_FAIL);          /* 1 is missing */
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "conv 1 was never planned"));
    ddp_conv_forward(ops, 0, 2, buf, buf, buf + 2048);        /* before finalize */
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "ddp_conv_forward before ddp_ops_finalize"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_origin(), "ops_cpu.c:"));
    CU_ASSERT_EQUAL(buf[2048], 7.0f);
    ddp_ops_destroy(ops);

    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    CU_ASSERT_EQUAL(ddp_ops_plan_conv(ops, 0, &s), DDP_OK);
    CU_ASSERT_EQUAL(ddp_ops_finalize(ops), DDP_OK);
    CU_ASSERT_EQUAL(ddp_ops_plan_conv(ops, 1, &s), DDP_FAIL); /* after finalize */
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);             /* set-up errors are returned */
    ddp_conv_backward_data(ops, 0, 3, buf, buf, buf + 2048, 0.0f);   /* batch above the plan */
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "with batch 3, planned for 1..2"));
    ddp_conv_forward(ops, 5, 1, buf, buf, buf + 2048);         /* later: first one kept */
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "with batch 3"));
    CU_ASSERT_EQUAL(buf[2048], 7.0f);
    ddp_ops_destroy(ops);

    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    ddp_gemm(ops, 0, 0, 4, 4, 4, 1.0f, buf, 3, buf, 4, 0.0f, buf + 2048, 4); /* lda < k */
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "lda=3"));
    CU_ASSERT_EQUAL(buf[2048], 7.0f);
    ddp_ops_destroy(ops);
    ddp_ops_destroy(NULL);
    ddp_error_clear();
    free(buf);
}

/* Scratch is sized by the largest im2col matrix, which 1x1 convs do without,
 * plus a sample's block of the weight gradient (3 x 32 floats for this 1x1
 * conv: blocks are at least 32 rows), plus the largest of the three
 * products' packed copies (the weight gradient's, 3 x 28 . 28 x 5, here),
 * plus that block's order-free sums (two doubles per float of it), whole
 * cache lines each, per thread. */
static void test_workspace(void)
{
    DdpOps *ops = NULL;
    char line[120];
    DdpConvShape one = shape_of(&SHAPES[5], 4), big = shape_of(&SHAPES[18], 4);
    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    CU_ASSERT_EQUAL(ddp_ops_plan_conv(ops, 0, &one), DDP_OK);
    CU_ASSERT_EQUAL(ddp_ops_finalize(ops), DDP_OK);
    size_t threads = 1;
#ifdef _OPENMP
    threads = (size_t)omp_get_max_threads();
#endif
    const size_t packs = (ddp_sgemm_fixed_scratch(3, 4 * 7) + 15) / 16 * 16;
    CU_ASSERT_EQUAL(ddp_ops_workspace_bytes(ops), threads * (96 + packs + 4 * 96) * sizeof(float));
    ddp_ops_describe_conv(ops, 0, line, sizeof line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "1x1"));
    ddp_ops_destroy(ops);

    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    CU_ASSERT_EQUAL(ddp_ops_plan_conv(ops, 0, &one), DDP_OK);
    CU_ASSERT_EQUAL(ddp_ops_plan_conv(ops, 1, &big), DDP_OK);
    CU_ASSERT_EQUAL(ddp_ops_finalize(ops), DDP_OK);
    CU_ASSERT(ddp_ops_workspace_bytes(ops) >= 25 * 24 * 24 * sizeof(float));
    ddp_ops_describe_conv(ops, 1, line, sizeof line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "im2col"));
    ddp_ops_describe_conv(ops, 7, line, sizeof line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "not planned"));
    ddp_ops_destroy(ops);
}

#ifndef DDP_TEST_ASAN /* whose allocator glibc's mallinfo2 does not see */
/* The heap's bytes in use: every arena's chunks and the mmapped ones
 * (every big aligned_alloc). */
static size_t heap_in_use(void)
{
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

/* What ddp_ops_finalize(OPS) adds to the heap, measured in a child process,
 * whose only thread is the one that forked. In the runner, other threads
 * (OpenMP's workers, threads of earlier tests as they end) may return memory
 * between the two readings: once in 30 runs of make check, the growth fell
 * 448 bytes short of its usual. OPS is left as it was. The child may
 * allocate, not run OpenMP, which a forked child of a process that has
 * used it cannot: finalize only allocates. */
static size_t finalize_heap_growth(DdpOps *ops)
{
    int fd;
    pid_t pid = test_fork_capturing(&fd);
    if (pid == 0) {
        size_t before = heap_in_use();
        int ok = ddp_ops_finalize(ops) == DDP_OK;
        size_t grown = heap_in_use() - before;
        printf("%zu\n", grown);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    char *out = NULL;
    CU_ASSERT_EQUAL(test_child_output(pid, fd, &out), 0);
    size_t grown = out ? strtoull(out, NULL, 10) : 0;
    free(out);
    return grown;
}
#endif

/* ddp_ops_planned_bytes, asked before finalize for the trainer's memory
 * check, is what finalize then allocates: measured on glibc's heap, which
 * each of the four buffers (im2col, Winograd, oneDNN, NCHW copies) adds to
 * by its size plus at most a chunk's header and alignment, or a page when it
 * is mmapped. Every path (im2col, 1x1, Winograd, oneDNN when planned), and
 * every third shape channels-last, whose NCHW copies grow with the batch.
 * Not under AddressSanitizer, whose allocator glibc's mallinfo2 does not see. */
static void test_planned_bytes(void)
{
    DdpOps *ops = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    CU_ASSERT_EQUAL(ddp_ops_planned_bytes(ops), 0);
    size_t nchw_floats = 0;
    for (int i = 0; i < NSHAPES; i++) {
        DdpConvShape sh = shape_of(&SHAPES[i], 64);
        sh.channels_last = i % 3 == 0 ? 1 : 0;
        if (sh.channels_last && ddp_conv_input_floats(&sh, 64) + ddp_conv_output_floats(&sh, 64) > nchw_floats)
            nchw_floats = ddp_conv_input_floats(&sh, 64) + ddp_conv_output_floats(&sh, 64);
        CU_ASSERT_EQUAL_FATAL(ddp_ops_plan_conv(ops, i, &sh), DDP_OK);
    }
    size_t planned = ddp_ops_planned_bytes(ops);
    CU_ASSERT(planned >= nchw_floats * sizeof(float));
#ifndef DDP_TEST_ASAN
    size_t grown = finalize_heap_growth(ops), slack = 4 * (4096 + 128);
    if (!(grown >= planned && grown <= planned + slack))
        printf("\n    planned %zu bytes, finalize allocated %zu ", planned, grown);
    CU_ASSERT(grown >= planned && grown <= planned + slack);
#endif
    CU_ASSERT_EQUAL_FATAL(ddp_ops_finalize(ops), DDP_OK);
    CU_ASSERT_EQUAL(ddp_ops_workspace_bytes(ops), planned);
    ddp_ops_destroy(ops);
}

/* dx = beta*dx + grad, for the direct (1x1) path and the col2im path alike:
 * a residual's input adds the gradient of its second consumer. */
static void test_backward_data_beta(void)
{
    DdpConvShape sh[NSHAPES];
    DdpOps *ops = plan_all(sh);
    const int picks[] = {2, 4, 6, 16, FIRST_WINOGRAD, FIRST_WINOGRAD + 2};
    int direct_seen = 0;
    for (int i = 0; i < NSHAPES; i++)
        direct_seen += sh[i].r == 1 && sh[i].s == 1 && sh[i].stride == 1 && sh[i].pad == 0;
    CU_ASSERT(direct_seen > 0);
    for (int i = 0; i < NSHAPES; i++) {
        bool picked = sh[i].r == 1 && sh[i].s == 1 && sh[i].stride == 1 && sh[i].pad == 0;
        for (size_t pi = 0; pi < sizeof picks / sizeof picks[0]; pi++)
            picked = picked || picks[pi] == i;
        if (!picked)
            continue;
        const DdpConvShape *s = &sh[i];
        size_t nx = x_len(s, 3), nw = w_len(s), ny = y_len(s, 3);
        float *w = random_floats(nw), *g = random_floats(ny), *old = random_floats(nx);
        float *grad = malloc(nx * sizeof *grad), *dx = malloc(nx * sizeof *dx);
        double *want = malloc(nx * sizeof *want);
        ddp_conv_backward_data(ops, i, 3, g, w, grad, 0.0f);
        const float betas[] = {1.0f, 0.5f};
        for (int bi = 0; bi < 2; bi++) {
            memcpy(dx, old, nx * sizeof *dx);
            ddp_conv_backward_data(ops, i, 3, g, w, dx, betas[bi]);
            for (size_t j = 0; j < nx; j++)
                want[j] = (double)betas[bi] * old[j] + grad[j];
            CU_ASSERT_EQUAL(count_mismatches("backward data beta", dx, want, nx), 0);
        }
        free(w), free(g), free(old), free(grad), free(dx), free(want);
    }
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_ops_destroy(ops);
}

/* ---- channels last (NHWC) ------------------------------------------------------------
 * An NHWC conv's every call gives the very bits of the NCHW conv of the same
 * shape on the same values transposed, whichever path (im2col, 1x1,
 * Winograd, oneDNN) the shape takes: ops_cpu.c makes the NCHW call between
 * copies, and the CPU build is the GPU's NHWC layout's twin for checks. */

/* N samples of CHANNELS x PIXELS (NCHW) as N samples of PIXELS x CHANNELS (NHWC). */
static float *nhwc_of(const float *nchw, int n, int channels, size_t pixels)
{
    float *out = malloc((size_t)n * channels * pixels * sizeof *out + 1);
    for (int b = 0; b < n; b++)
        for (int c = 0; c < channels; c++)
            for (size_t p = 0; p < pixels; p++)
                out[((size_t)b * pixels + p) * channels + c] = nchw[((size_t)b * channels + c) * pixels + p];
    return out;
}

/* GOT (NHWC) is WANT (NCHW, N samples of CHANNELS x PIXELS) transposed, bit
 * for bit; else prints the first element that differs, naming WHAT. */
static int same_bits_nhwc(const char *what, const float *got, const float *want, int n, int channels, size_t pixels)
{
    float *want_nhwc = nhwc_of(want, n, channels, pixels);
    const size_t count = (size_t)n * channels * pixels;
    size_t bad = 0;
    for (size_t i = 0; i < count; i++)
        if (memcmp(&got[i], &want_nhwc[i], sizeof *got) != 0 && !bad++)
            printf("\n    %s: NHWC element %zu is %.9g, NCHW's is %.9g ", what, i, got[i], want_nhwc[i]);
    if (bad)
        printf("(%zu of %zu differ) ", bad, count);
    free(want_nhwc);
    return bad == 0;
}

/* The weight gradients GOT and WANT, the same bits (their order-free sums,
 * not only the values the optimizer reads). */
static int same_grads(const char *what, const DdpGrad *got, const DdpGrad *want, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (memcmp(&got[i], &want[i], sizeof *got) != 0) {
            printf("\n    %s: gradient %zu is %.17g, NCHW's is %.17g ", what, i, ddp_exact_value(got[i]),
                   ddp_exact_value(want[i]));
            return 0;
        }
    return 1;
}

/* SHAPES' picks, each planned twice in one context in PRECISION (NCHW as
 * conv 2j, NHWC as 2j + 1), every call at the planned batch and a smaller
 * one: forward, forward with bias and with bias and relu, backward data
 * with beta 0 (dx full of NaN) and 1 (dx random), backward filter with
 * beta 0 (NaN) and 1. */
static void check_channels_last(DdpPrecision precision)
{
    const int picks[] = {
        0,                  /* 1 channel in, 3x3 */
        18,                 /* 1 channel in, MNIST's first conv (oneDNN's weight gradient, where AVX-512) */
        2,                  /* groups 2, kernel 5, stride 2, pad 2 */
        3,                  /* depthwise, stride 2, pad 1 */
        11,                 /* stride 2, pad 2 */
        5,                  /* 1x1: no im2col */
        6,                  /* 1x1 with groups */
        7,                  /* 1x1 stride 2 */
        17,                 /* weight-gradient blocks that split a group */
        FIRST_WINOGRAD,     /* Winograd 5x5 */
        FIRST_WINOGRAD + 5, /* Winograd 3x3 on the own kernels */
    };
    enum { NPICKS = sizeof picks / sizeof picks[0] };
    const uint64_t others = rng; /* the later tests' draws left as they were */
    DdpConvShape sh[2 * NPICKS];
    DdpOps *ops = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    CU_ASSERT_EQUAL_FATAL(ddp_ops_set_precision(ops, precision), DDP_OK);
    for (int j = 0; j < NPICKS; j++) {
        sh[2 * j] = shape_of(&SHAPES[picks[j]], PLAN_N);
        sh[2 * j + 1] = sh[2 * j];
        sh[2 * j + 1].channels_last = 1;
        CU_ASSERT_EQUAL_FATAL(ddp_ops_plan_conv(ops, 2 * j, &sh[2 * j]), DDP_OK);
        CU_ASSERT_EQUAL_FATAL(ddp_ops_plan_conv(ops, 2 * j + 1, &sh[2 * j + 1]), DDP_OK);
    }
    CU_ASSERT_EQUAL_FATAL(ddp_ops_finalize(ops), DDP_OK);
    int winograd_3x3 = 0;
    for (int j = 0; j < NPICKS; j++) { /* the same path: the NCHW line, after the layout */
        char nchw[256], nhwc[320];
        ddp_ops_describe_conv(ops, 2 * j, nchw, sizeof nchw);
        ddp_ops_describe_conv(ops, 2 * j + 1, nhwc, sizeof nhwc);
        CU_ASSERT_PTR_NULL(strstr(nchw, "NHWC"));
        CU_ASSERT(strncmp(nhwc, "NHWC", 4) == 0 && strstr(nhwc, nchw) != NULL);
        winograd_3x3 += sh[2 * j].r == 3 && strstr(nchw, "Winograd F(4x4,3x3)") != NULL;
    }
    if (ddp_onednn_choice() == DDP_CONV_OWN)
        CU_ASSERT(winograd_3x3 == 1);
    for (int j = 0; j < NPICKS; j++)
        for (int bi = 0; bi < 2; bi++) {
            const int n = BATCHES[bi], id = 2 * j;
            const DdpConvShape *s = &sh[id];
            const size_t nx = x_len(s, n), nw = w_len(s), ny = y_len(s, n);
            const size_t in_pixels = (size_t)s->h * s->w, out_pixels = (size_t)s->out_h * s->out_w;
            float *x = random_floats(nx), *w = random_floats(nw), *dy = random_floats(ny);
            float *bias = random_floats((size_t)s->k), *old_dx = random_floats(nx), *old_dw = random_floats(nw);
            float *x_nhwc = nhwc_of(x, n, s->c, in_pixels), *dy_nhwc = nhwc_of(dy, n, s->k, out_pixels);
            float *want = malloc(nx * sizeof *want + ny * sizeof *want), *got = malloc(nx * sizeof *got + ny * sizeof *got);
            DdpGrad *want_dw = grads_filled(nw, NAN), *got_dw = grads_filled(nw, NAN);
            char base[160], what[220];
            describe(base, sizeof base, s, n);
            snprintf(base + strlen(base), sizeof base - strlen(base), ", %s", ddp_precision_name(precision));

            for (int e = -1; e < 2; e++) { /* plain, then DDP_EPILOGUE_BIAS, DDP_EPILOGUE_BIAS_RELU */
                for (size_t i = 0; i < ny; i++)
                    want[i] = got[i] = NAN;
                if (e < 0) {
                    ddp_conv_forward(ops, id, n, x, w, want);
                    ddp_conv_forward(ops, id + 1, n, x_nhwc, w, got);
                } else {
                    const DdpEpilogue epilogue = e ? DDP_EPILOGUE_BIAS_RELU : DDP_EPILOGUE_BIAS;
                    ddp_conv_forward_bias(ops, id, n, x, w, bias, epilogue, want);
                    ddp_conv_forward_bias(ops, id + 1, n, x_nhwc, w, bias, epilogue, got);
                }
                snprintf(what, sizeof what, "y%s, %s", e < 0 ? "" : e ? " with bias and relu" : " with bias", base);
                CU_ASSERT(same_bits_nhwc(what, got, want, n, s->k, out_pixels));
            }

            for (int beta = 0; beta < 2; beta++) {
                float *old_dx_nhwc = nhwc_of(old_dx, n, s->c, in_pixels);
                for (size_t i = 0; i < nx; i++) {
                    want[i] = beta ? old_dx[i] : NAN;
                    got[i] = beta ? old_dx_nhwc[i] : NAN;
                }
                ddp_conv_backward_data(ops, id, n, dy, w, want, (float)beta);
                ddp_conv_backward_data(ops, id + 1, n, dy_nhwc, w, got, (float)beta);
                snprintf(what, sizeof what, "dx, beta %d, %s", beta, base);
                CU_ASSERT(same_bits_nhwc(what, got, want, n, s->c, in_pixels));
                free(old_dx_nhwc);
            }

            for (int beta = 0; beta < 2; beta++) {
                if (beta) {
                    free(want_dw), free(got_dw);
                    want_dw = grads_of(old_dw, nw), got_dw = grads_of(old_dw, nw);
                }
                ddp_conv_backward_filter(ops, id, n, x, dy, want_dw, (float)beta);
                ddp_conv_backward_filter(ops, id + 1, n, x_nhwc, dy_nhwc, got_dw, (float)beta);
                snprintf(what, sizeof what, "dw, beta %d, %s", beta, base);
                CU_ASSERT(same_grads(what, got_dw, want_dw, nw));
            }
            free(x), free(w), free(dy), free(bias), free(old_dx), free(old_dw), free(x_nhwc), free(dy_nhwc);
            free(want), free(got), free(want_dw), free(got_dw);
        }
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_ops_destroy(ops);
    rng = others;
}

/* In fp32, and in bf16, whose rounded copies (ops_cpu.c's round_operands)
 * are made of the NCHW copies. */
static void test_channels_last(void)
{
    check_channels_last(DDP_PRECISION_FP32);
    check_channels_last(DDP_PRECISION_BF16);
}

/* ---- oneDNN -------------------------------------------------------------------------
 * The conv tests above run on the runtime's own kernels (their shapes were
 * chosen to cover im2col's and Winograd's paths), and again as planned
 * (onednn_cpu.h), where oneDNN, if built in, takes most of the
 * shapes; the same references, the same bit promises. */
#define OWN_AND_ONEDNN(test)                                                                 \
    static void test##_own(void)                                                             \
    {                                                                                        \
        ddp_onednn_choose(DDP_CONV_OWN);                                                     \
        test();                                                                              \
        ddp_onednn_choose(-1);                                                               \
    }                                                                                        \
    static void test##_onednn(void)                                                          \
    {                                                                                        \
        ddp_onednn_choose(DDP_CONV_PLANNED);                                                 \
        test();                                                                              \
        ddp_onednn_choose(-1);                                                               \
    }
OWN_AND_ONEDNN(test_conv_forward)
OWN_AND_ONEDNN(test_conv_forward_bias)
OWN_AND_ONEDNN(test_conv_backward)
OWN_AND_ONEDNN(test_backward_filter_beta)
OWN_AND_ONEDNN(test_backward_data_beta)
OWN_AND_ONEDNN(test_channels_last)
OWN_AND_ONEDNN(test_sample_independent_of_batch)
OWN_AND_ONEDNN(test_deterministic_across_threads)
OWN_AND_ONEDNN(test_planned_bytes)
#define OWN_ONLY(test)                                                                       \
    static void test##_own(void)                                                             \
    {                                                                                        \
        ddp_onednn_choose(DDP_CONV_OWN);                                                     \
        test();                                                                              \
        ddp_onednn_choose(-1);                                                               \
    }
OWN_ONLY(test_winograd_chosen)
OWN_ONLY(test_gradient_split_invariant)
OWN_ONLY(test_vector_widths_same_bits)
OWN_ONLY(test_misuse_is_reported)
OWN_ONLY(test_workspace)

/* The shape's description as planned for batch 4. */
static void describe_planned(const Conv cv, char *line, size_t len)
{
    DdpOps *ops = NULL;
    DdpConvShape s = shape_of(&cv, 4);
    CU_ASSERT_EQUAL_FATAL(ddp_ops_create(&ops, NULL), DDP_OK);
    CU_ASSERT_EQUAL_FATAL(ddp_ops_plan_conv(ops, 0, &s), DDP_OK);
    CU_ASSERT_EQUAL_FATAL(ddp_ops_finalize(ops), DDP_OK);
    ddp_ops_describe_conv(ops, 0, line, len);
    ddp_ops_destroy(ops);
}

/* Which passes oneDNN takes (ops_cpu.c's plan_onednn: by the shape, where
 * oneDNN has direct kernels that pass the bits check, as on x86-64),
 * and DDP_CPU_CONV=own keeping every conv on the runtime's own kernels. */
static void test_onednn_chosen(void)
{
    char line[200];
    const Conv resnet = {16, 28, 28, 16, 3, 3, 1, 1, 1}, strided = {16, 28, 28, 32, 3, 3, 2, 1, 1};
    const Conv first = {1, 28, 28, 32, 5, 5, 1, 0, 1}, mnist2 = {32, 12, 12, 64, 5, 5, 1, 0, 1};
    const Conv wide = {64, 28, 28, 64, 3, 3, 1, 1, 1}, grouped = {16, 12, 10, 24, 3, 3, 1, 1, 2};
    const Conv one_tile = {64, 4, 4, 64, 3, 3, 1, 1, 1}; /* C x K 4096, 1 tile a sample */
    const char *user = getenv("DDP_CPU_CONV");
    char *was = user ? strdup(user) : NULL;
    ddp_onednn_choose(-1); /* the environment's */
    setenv("DDP_CPU_CONV", "own", 1);
    CU_ASSERT_EQUAL(ddp_onednn_choice(), DDP_CONV_OWN);
    describe_planned(resnet, line, sizeof line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "not oneDNN: "));
    setenv("DDP_CPU_CONV", "onednn", 1);
    CU_ASSERT_EQUAL(ddp_onednn_choice(), DDP_CONV_ONEDNN);
    if (ddp_onednn_built_in()) { /* every pass oneDNN can do, MNIST's conv2 too */
        describe_planned(mnist2, line, sizeof line);
        CU_ASSERT_PTR_NOT_NULL(strstr(line, "per call"));
    }
    setenv("DDP_CPU_CONV", "fast", 1);
    DdpOps *ops = NULL;
    CU_ASSERT_EQUAL(ddp_ops_create(&ops, NULL), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "DDP_CPU_CONV=fast: say own"));
    ddp_error_clear();
    if (was)
        setenv("DDP_CPU_CONV", was, 1);
    else
        unsetenv("DDP_CPU_CONV");
    free(was);
    const int built_in = ddp_onednn_built_in();
    ddp_onednn_choose(DDP_CONV_PLANNED);
    if (!built_in) {
        fputs("\n    (oneDNN not built in: libdnnl-dev 2.x was missing)", stderr);
        ddp_onednn_choose(-1);
        return;
    }
    /* oneDNN's passes are described as "oneDNN <kernel>, one sample per call";
     * resnet.net's 16 -> 16 gives oneDNN forward and backward data, and
     * keeps its weight gradient on Winograd; a first conv (1 channel in)
     * gives its AVX-512 kernels the weight
     * gradient alone, its AVX2 ones nothing; wide.net's 64 -> 64 stays with
     * Winograd, all three passes, on either; a 64 -> 64 with one tile a
     * sample keeps forward and backward data */
    const int avx512 = ddp_onednn_avx512();
    /* oneDNN's avx512_core: AVX-512 F, BW, VL and DQ, unless its environment caps the ISA */
    if (!getenv("ONEDNN_MAX_CPU_ISA") && !getenv("DNNL_MAX_CPU_ISA"))
        CU_ASSERT_EQUAL(avx512, __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"));
    const struct {
        const Conv *cv;
        const char *has, *lacks;
    } cases[] = {
        {&resnet, "one sample per call; weight gradient by Winograd", "by oneDNN"},
        {&strided, "per call", "im2col"},
        {&first, avx512 ? "im2col + product, col2im; weight gradient by oneDNN" : "im2col is faster than oneDNN's kernels without AVX-512",
         avx512 ? "Winograd" : "per call"},
        {&mnist2, "Winograd F(4x4,5x5)", "per call"},
        {&wide, "weight gradient by Winograd", "per call"},
        /* too few tiles for Winograd's weight gradient: oneDNN's AVX-512 kernels, or im2col */
        {&one_tile, avx512 ? "weight gradient by oneDNN" : "weight gradient by im2col", "weight gradient by Winograd"},
        {&grouped, "im2col", "per call"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        describe_planned(*cases[i].cv, line, sizeof line);
        if (!strstr(line, cases[i].has) || strstr(line, cases[i].lacks))
            printf("\n    case %zu: \"%s\" ", i, line);
        CU_ASSERT_PTR_NOT_NULL(strstr(line, cases[i].has));
        CU_ASSERT_PTR_NULL(strstr(line, cases[i].lacks));
    }
    describe_planned(wide, line, sizeof line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "Winograd F(4x4,3x3)"));
    ddp_onednn_choose(-1);
}

/* A batch's weight gradient and its two halves', with oneDNN's per-sample
 * parts: the same bits. */
static void test_gradient_split_invariant_onednn(void)
{
    ddp_onednn_choose(DDP_CONV_PLANNED);
    if (ddp_onednn_built_in()) {
        /* 1 tile a sample: too few for Winograd's weight gradient */
        check_gradient_split_invariant((Conv){16, 4, 4, 24, 3, 3, 1, 1, 1}, "weight gradient by oneDNN");
        check_gradient_split_invariant((Conv){8, 13, 11, 16, 3, 3, 2, 1, 1}, "weight gradient by oneDNN"); /* strided */
    }
    ddp_onednn_choose(-1);
}

void suite_ops(void)
{
    static const TestCase cases[] = {
        {"conv shape checks and output size", test_shape_init},
        {"conv forward vs direct convolution", test_conv_forward_own},
        {"conv forward with bias and relu = the conv, then the epilogue, bit for bit", test_conv_forward_bias_own},
        {"linear forward with bias and relu = gemm, then the epilogue, bit for bit", test_linear_forward_bias},
        {"conv backward vs direct adjoints and finite differences", test_conv_backward_own},
        {"conv backward filter beta and micro-batches", test_backward_filter_beta_own},
        {"conv backward data beta", test_backward_data_beta_own},
        {"channels last (NHWC): every conv call the NCHW call's bits, transposed", test_channels_last_own},
        {"Winograd chosen for its shapes", test_winograd_chosen_own},
        {"Winograd: square kernels take the unrolled tile transforms, which give the general ones' bits",
         test_winograd_unrolled},
        {"Winograd: the weight gradient's transform back, in pairs of points, agrees with the plain sums",
         test_winograd_paired},
        {"Winograd on 16-float vectors (two blocks of channels): the 8-float bits in every pass",
         test_winograd_widths},
        {"a conv's bits for a sample independent of the batch", test_sample_independent_of_batch_own},
        {"the optimizers' momentum: subnormal stored as zero, all else kept", test_flush_subnormal},
        {"gemm, all transposes, vs naive", test_gemm},
        {"gemm: a row's result independent of the row count", test_gemm_rows_independent_of_m},
        {"gemm_grad (a linear weight gradient) vs naive", test_gemm_grad},
        {"gradients of a batch and of its halves: the same bits", test_gradient_split_invariant_own},
        {"gemm_grad, samples with and without HI shares: ddp_exact_add's bits, both widths",
         test_gemm_grad_small_and_large_parts},
        {"gemm_grad over a gradient 3 in 4 zero (its lists of nonzeros): ddp_exact_add's bits, both widths",
         test_gemm_grad_sparse_small_and_large_parts},
        {"gemm_grad with a part beyond the window, or a NaN: its row NaN, the rest the fast bits",
         test_gemm_grad_outside_the_window},
        {"same results for 1..4 threads", test_deterministic_across_threads_own},
        {"the products' 8- and 16-float vectors give the same bits", test_vector_widths_same_bits_own},
        {"misuse recorded and reported", test_misuse_is_reported_own},
        {"scratch size and descriptions", test_workspace_own},
        {"the scratch planned is the scratch finalize allocates", test_planned_bytes_own},
        {"oneDNN: the passes it takes by shape; DDP_CPU_CONV=own, onednn and a bad value", test_onednn_chosen},
        {"oneDNN: conv forward vs direct convolution", test_conv_forward_onednn},
        {"oneDNN: the scratch planned is the scratch finalize allocates", test_planned_bytes_onednn},
        {"oneDNN: conv forward with bias and relu = the conv, then the epilogue, bit for bit",
         test_conv_forward_bias_onednn},
        {"oneDNN: conv backward vs direct adjoints and finite differences", test_conv_backward_onednn},
        {"oneDNN: conv backward filter beta and micro-batches", test_backward_filter_beta_onednn},
        {"oneDNN: conv backward data beta", test_backward_data_beta_onednn},
        {"oneDNN: channels last (NHWC): every conv call the NCHW call's bits, transposed",
         test_channels_last_onednn},
        {"oneDNN: a conv's bits for a sample independent of the batch", test_sample_independent_of_batch_onednn},
        {"oneDNN: gradients of a batch and of its halves: the same bits", test_gradient_split_invariant_onednn},
        {"oneDNN: same results for 1..4 threads", test_deterministic_across_threads_onednn},
        {NULL, NULL},
    };
    test_add_suite("ops", cases);
}
