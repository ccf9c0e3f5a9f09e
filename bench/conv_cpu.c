/*
 * conv_cpu.c: the time of each CPU library conv call (runtime/ops_cpu.c) for
 * one shape, batch 64: the fastest of REPS (40) calls each of forward, backward
 * data and backward filter, and the algorithm ops_cpu.c chose. For comparing
 * conv algorithms on one machine without the rest of a training step.
 *   bash bench/conv_cpu.sh                 the examples' convs, on 1 thread
 * or by hand, C,H,W,K,KERNEL,PAD (stride 1, one group):
 *   OMP_NUM_THREADS=1 build/conv_cpu 32,12,12,64,5,0
 */
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
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
    printf("conv_cpu: %d->%d k%d p%d on %dx%d, batch %d: forward %.3f ms, backward data %.3f ms, "
           "backward filter %.3f ms (%s)\n",
           c, k, r, pad, h, w, n, best[0] * 1e3, best[1] * 1e3, best[2] * 1e3, line);
    int failed = ddp_ops_status(ops) != DDP_OK;
    ddp_ops_destroy(ops);
    free(x), free(wt), free(y), free(dx), free(dw);
    return failed;
}
