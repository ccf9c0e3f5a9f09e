/*
 * conv_cpu.c: the time of each CPU library conv call (runtime/ops_cpu.c) for
 * one shape, batch 64: the fastest of REPS (40) calls each of forward, backward
 * data and backward filter, and the algorithm ops_cpu.c chose. For comparing
 * conv algorithms on one machine without the rest of a training step.
 * A time is worth nothing if the call computed the wrong thing, so the last
 * call of each pass is checked against a direct conv in double (check()):
 * forward and backward data on the batch's first and last samples, backward
 * filter on the first and last output channels (every sample: it sums over
 * the batch). An output passes within 1e-4 of the sum of the absolute values
 * of its terms (plus 1e-6), a float sum's error allowing for Winograd's
 * transforms; the line ends OK or FAILED with the worst error over its bound,
 * and the exit status is 1 on FAILED.
 *   bash bench/conv_cpu.sh                 the examples' convs, on 1 thread
 * or by hand, C,H,W,K,KERNEL,PAD (stride 1, one group):
 *   OMP_NUM_THREADS=1 build/conv_cpu 32,12,12,64,5,0
 */
#include "exact_sum.h"  // ddp_exact_value: backward filter's sums, read
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The worst |got - want| / (1e-4 * sum|terms| + 1e-6) so far: over 1, a failure. */
static void check_one(double *worst, double got, double want, double magnitude)
{
    double e = fabs(got - want) / (1e-4 * magnitude + 1e-6);
    if (!(e <= *worst)) /* a NaN got makes it NaN, and fails */
        *worst = e;
}

/* The three passes' results against a direct conv (stride 1, one group, NCHW):
 * y = x * w, dx = dy *T w, dw = x *T dy, with dy = y as the timed calls had it.
 * Returns the worst error over its bound. */
static double check(const DdpConvShape *sh, const float *x, const float *wt, const float *y, const float *dx,
                    const DdpGrad *dw)
{
    const int n = sh->n, c = sh->c, h = sh->h, w = sh->w, k = sh->k, r = sh->r, pad = sh->pad;
    const int oh = sh->out_h, ow = sh->out_w;
    const int samples[2] = {0, n - 1}, channels[2] = {0, k - 1};
#define X(b, ci, i, j) x[(((size_t)(b) * c + (ci)) * h + (i)) * w + (j)]
#define W(ko, ci, p, q) wt[(((size_t)(ko) * c + (ci)) * r + (p)) * r + (q)]
#define Y(b, ko, i, j) y[(((size_t)(b) * k + (ko)) * oh + (i)) * ow + (j)]
    double worst = 0;
    for (int t = 0; t < 2; t++) {
        int b = samples[t];
        for (int ko = 0; ko < k; ko++) /* forward */
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    double sum = 0, mag = 0;
                    for (int ci = 0; ci < c; ci++)
                        for (int p = 0; p < r; p++)
                            for (int q = 0; q < r; q++) {
                                int ii = i + p - pad, jj = j + q - pad;
                                if (ii < 0 || ii >= h || jj < 0 || jj >= w)
                                    continue;
                                double term = (double)X(b, ci, ii, jj) * W(ko, ci, p, q);
                                sum += term, mag += fabs(term);
                            }
                    check_one(&worst, Y(b, ko, i, j), sum, mag);
                }
        for (int ci = 0; ci < c; ci++) /* backward data */
            for (int ii = 0; ii < h; ii++)
                for (int jj = 0; jj < w; jj++) {
                    double sum = 0, mag = 0;
                    for (int ko = 0; ko < k; ko++)
                        for (int p = 0; p < r; p++)
                            for (int q = 0; q < r; q++) {
                                int i = ii - p + pad, j = jj - q + pad;
                                if (i < 0 || i >= oh || j < 0 || j >= ow)
                                    continue;
                                double term = (double)Y(b, ko, i, j) * W(ko, ci, p, q);
                                sum += term, mag += fabs(term);
                            }
                    check_one(&worst, dx[(((size_t)b * c + ci) * h + ii) * w + jj], sum, mag);
                }
    }
    for (int t = 0; t < 2; t++) { /* backward filter */
        int ko = channels[t];
        for (int ci = 0; ci < c; ci++)
            for (int p = 0; p < r; p++)
                for (int q = 0; q < r; q++) {
                    double sum = 0, mag = 0;
                    for (int b = 0; b < n; b++)
                        for (int i = 0; i < oh; i++)
                            for (int j = 0; j < ow; j++) {
                                int ii = i + p - pad, jj = j + q - pad;
                                if (ii < 0 || ii >= h || jj < 0 || jj >= w)
                                    continue;
                                double term = (double)X(b, ci, ii, jj) * Y(b, ko, i, j);
                                sum += term, mag += fabs(term);
                            }
                    check_one(&worst, ddp_exact_value(dw[(((size_t)ko * c + ci) * r + p) * r + q]), sum, mag);
                }
    }
#undef X
#undef W
#undef Y
    return worst;
}

int main(int argc, char **argv)
{
    int c = 32, h = 12, w = 12, k = 64, r = 5, pad = 0;
    const int n = 64, reps = getenv("REPS") ? atoi(getenv("REPS")) : 40;
    if (argc > 1 && sscanf(argv[1], "%d,%d,%d,%d,%d,%d", &c, &h, &w, &k, &r, &pad) != 6) {
        fprintf(stderr, "usage: conv_cpu C,H,W,K,KERNEL,PAD\n");
        return 2;
    }
    DdpConvShape sh = {.n = n, .c = c, .h = h, .w = w, .k = k, .r = r, .s = r, .stride = 1, .pad = pad, .groups = 1};
    DdpOps *ops = NULL;
    ddp_exact_windows_set(n, n); /* the order-free sums' windows, as a step of one batch of n sets them */
    if (ddp_conv_shape_init(&sh) != DDP_OK || ddp_ops_create(&ops, NULL) != DDP_OK ||
        ddp_ops_plan_conv(ops, 0, &sh) != DDP_OK || ddp_ops_finalize(ops) != DDP_OK) {
        fprintf(stderr, "conv_cpu: %s\n", ddp_error_message());
        return 2;
    }
    size_t nx = (size_t)n * c * h * w, nw = (size_t)k * c * r * r, ny = (size_t)n * k * sh.out_h * sh.out_w;
    float *x = malloc(nx * sizeof *x), *wt = malloc(nw * sizeof *wt), *y = malloc(ny * sizeof *y);
    float *dx = malloc(nx * sizeof *dx);
    DdpGrad *dw = malloc(nw * sizeof *dw);
    if (!x || !wt || !y || !dx || !dw)
        return 2;
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)(i % 13) * 0.1f - 0.6f;
    for (size_t i = 0; i < nw; i++)
        wt[i] = (float)(i % 7) * 0.01f - 0.03f;
    for (size_t i = 0; i < ny; i++)
        y[i] = (float)(i % 11) * 0.1f - 0.5f;
    double best[3] = {1e9, 1e9, 1e9};
    for (int rep = 0; rep < reps; rep++) {
        double t[4];
        t[0] = now();
        ddp_conv_forward(ops, 0, n, x, wt, y);
        t[1] = now();
        ddp_conv_backward_data(ops, 0, n, y, wt, dx, 0.0f);
        t[2] = now();
        ddp_conv_backward_filter(ops, 0, n, x, y, dw, 0.0f);
        t[3] = now();
        for (int i = 0; i < 3; i++)
            best[i] = t[i + 1] - t[i] < best[i] ? t[i + 1] - t[i] : best[i];
    }
    char line[200];
    ddp_ops_describe_conv(ops, 0, line, sizeof line);
    int failed = ddp_ops_status(ops) != DDP_OK;
    double worst = reps > 0 && !failed ? check(&sh, x, wt, y, dx, dw) : NAN;
    failed = failed || !(worst <= 1);
    printf("conv_cpu: %d->%d k%d p%d on %dx%d, batch %d: forward %.3f ms, backward data %.3f ms, "
           "backward filter %.3f ms (%s); against a direct conv, error %.3g of the bound  %s\n",
           c, k, r, pad, h, w, n, best[0] * 1e3, best[1] * 1e3, best[2] * 1e3, line, worst,
           failed ? "FAILED" : "OK");
    if (ddp_ops_status(ops) != DDP_OK)
        fprintf(stderr, "conv_cpu: %s\n", ddp_error_message());
    ddp_ops_destroy(ops);
    free(x), free(wt), free(y), free(dx), free(dw);
    return failed;
}
