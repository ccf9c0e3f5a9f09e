/*
 * compare.c: the weights of a GPU run against the CPU build's, for
 * tests/gpu/run.sh. A C program (not tools/compare_weights.py) because the GPU
 * machine need not have Python with numpy.
 *
 *   compare INITIAL CPU GPU TOLERANCE
 *
 * With u = CPU - INITIAL (the CPU build's update), e = GPU - CPU (the error)
 * and w = CPU, Euclidean norms, T = TOLERANCE:
 *
 *   all float tensors together:  ||e|| <= T * ||u|| + 2^-23 * ||w||
 *   each float tensor:           ||e|| <= 10 T * ||u|| + 2^-23 * ||w||
 *
 * and every other tensor (num_batches_tracked, ...) byte for byte the same.
 *
 * Why norms, not the largest element: a legitimate float32 event between
 * two machines is an activation within rounding of 0 that one takes as
 * positive and the other not (a ReLU mask flip; likewise a max-pool tie).
 * It changes one term of a sum of batch x positions terms (64 x 14 x 14 =
 * 12,544 in fashion_resnet) in one output channel of the weight gradient
 * before it and one element of a batchnorm's bias gradient. Element by
 * element against the tensor's largest update that is ~1e-2 (the first
 * H200 run: conv5.weight 1.6e-2, bn5.bias 6.7e-3), over a 1e-3 tolerance;
 * norm-wise it is one channel's worth among the tensor's elements, and
 * among every tensor's, so far smaller. (For an error in a single element
 * the norm ratio is at most the max-norm ratio: ||e|| = max |e|, and
 * ||u|| >= max |u|.) The CPU build with its own convolution kernels
 * (DDP_CPU_CONV=own) shows the same 1.6e-2 and 6.7e-3 against its default
 * (likely the same flip): norm-wise 3.0e-3 and 3.2e-3, 1.6e-6 over all
 * tensors. What the check is for, a broken kernel (a wrong index, a term
 * left out, a race), is wrong across a tensor by the order of the update
 * itself: a norm ratio near 1.
 *
 * Why 10 T for one tensor: the global rule, at T, bounds the error the run
 * may carry; a small tensor (a bias, a batchnorm's parameters) hardly moves
 * the global norms, so each tensor also gets its own limit, loose enough
 * for one flip's term in a small tensor (bn5.bias above: 3.2e-3, under 10 x
 * 1e-3) and still ~100 times under a broken kernel's error at FP32 (T =
 * 1e-3), 3 times at TF32 (T = 3e-2). In a net with batchnorm, the running
 * means and variances, which move by ~0.1 in a step against the weights'
 * ~1e-5 an element, make most of the global norms: there the per-tensor
 * rule is the one that watches the weights.
 *
 * Why 2^-23 ||w||: an update can be only a few ulps of its weight (mnist's
 * first step, early in its warm-up: a median of 23 in linear1, under 10 for
 * 40% of its elements), so two builds whose updates differ by far less than
 * the tolerance may still round to adjacent floats, a tenth of such an
 * element's update; one ulp of each weight, at most 2^-23 |w_i|, adds up to
 * 2^-23 ||w||.
 *
 * Prints a line per tensor: the update's and the error's norms, their
 * ratio, the limit as a ratio to the update (10 T, more where the ulp term
 * counts), the max-norm ratio max |e| / max |u| (for information only) and
 * "<-- over" where the tensor is over its limit; the same for all float
 * tensors together; then
 *   compare: OK|FAILED worst-tensor X, all tensors Y of the update (tolerance T)
 * X the largest per-tensor norm ratio (of the tensors the step moved, and
 * any over its limit), Y the global one. Exit 0 (OK),
 * 1 (FAILED) or 2 (usage, unreadable files).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

#define PER_TENSOR 10.0 /* each tensor's limit, in tolerances */

/* A / B as a ratio of norms: 0 when both are 0, infinity for A > 0 = B, a NaN for a NaN. */
static double ratio(double a, double b) { return isnan(a) || b > 0 ? a / b : a > 0 ? INFINITY : 0; }

/* *WORST becomes R where R is larger, or a NaN; a NaN, once there, stays. */
static void worsen(double *worst, double r)
{
    if (!isnan(*worst) && (isnan(r) || r > *worst))
        *worst = r;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: compare INITIAL CPU GPU TOLERANCE\n");
        return 2;
    }
    char *end;
    double tol = strtod(argv[4], &end);
    if (end == argv[4] || *end || !(tol >= 0)) {
        fprintf(stderr, "compare: TOLERANCE '%s' is not a number >= 0\n", argv[4]);
        return 2;
    }
    DdpSafetensors *f[3];
    for (int i = 0; i < 3; i++)
        if (ddp_safetensors_open(argv[i + 1], &f[i]) != DDP_OK) {
            fprintf(stderr, "compare: %s\n", ddp_error_message());
            while (i-- > 0)
                ddp_safetensors_close(f[i]);
            return 2;
        }
    double worst = 0;
    double all_update = 0, all_error = 0, all_scale = 0; /* sums of squares over every float tensor */
    int failed = 0;
    if (ddp_safetensors_count(f[2]) != ddp_safetensors_count(f[1])) {
        printf("the GPU's file has %d tensors, the CPU's %d\n", ddp_safetensors_count(f[2]),
               ddp_safetensors_count(f[1]));
        failed++;
    }
    for (int k = 0; k < ddp_safetensors_count(f[1]); k++) {
        const DdpTensor *cpu = ddp_safetensors_tensor(f[1], k);
        const DdpTensor *w0 = ddp_safetensors_find(f[0], cpu->name), *gpu = ddp_safetensors_find(f[2], cpu->name);
        if (!w0 || !gpu || gpu->nbytes != cpu->nbytes || w0->nbytes != cpu->nbytes || gpu->dtype != cpu->dtype ||
            w0->dtype != cpu->dtype) {
            printf("%-28s missing, or of another type or size, in a file\n", cpu->name);
            failed++;
            continue;
        }
        if (cpu->dtype != DDP_DTYPE_F32) {
            int same = memcmp(cpu->data, gpu->data, cpu->nbytes) == 0;
            printf("%-28s %s\n", cpu->name, same ? "equal" : "DIFFERENT");
            failed += !same;
            continue;
        }
        const float *a = cpu->data, *b = gpu->data, *i0 = w0->data;
        size_t n = cpu->nbytes / sizeof(float);
        double update = 0, error = 0, scale = 0, max_update = 0, max_error = 0;
        for (size_t j = 0; j < n; j++) {
            double u = (double)a[j] - i0[j], e = (double)b[j] - a[j];
            update += u * u;
            error += e * e;
            scale += (double)a[j] * a[j];
            max_update = fmax(max_update, fabs(u));
            max_error = fmax(max_error, fabs(e)); /* a NaN shows in error, below */
        }
        all_update += update;
        all_error += error;
        all_scale += scale;
        update = sqrt(update), error = sqrt(error), scale = sqrt(scale);
        double r = ratio(error, update), limit = PER_TENSOR * tol * update + 0x1p-23 * scale;
        int ok = error <= limit; /* false for a NaN */
        if (update > 0 || !ok) /* a tensor the step left alone has no ratio to speak of, unless over */
            worsen(&worst, r);
        printf("%-28s update %.3e error %.3e ratio %.2e (limit %.2e) max-norm ratio %.2e%s\n", cpu->name, update,
               error, r, ratio(limit, update), isnan(error) ? NAN : ratio(max_error, max_update), ok ? "" : "  <-- over");
        failed += !ok;
    }
    all_update = sqrt(all_update), all_error = sqrt(all_error), all_scale = sqrt(all_scale);
    double all = ratio(all_error, all_update), all_limit = tol * all_update + 0x1p-23 * all_scale;
    int all_ok = all_error <= all_limit;
    printf("%-28s update %.3e error %.3e ratio %.2e (limit %.2e)%s\n", "all float tensors", all_update, all_error, all,
           ratio(all_limit, all_update), all_ok ? "" : "  <-- over");
    failed += !all_ok;
    printf("compare: %s worst-tensor %.2e, all tensors %.2e of the update (tolerance %g)\n", failed ? "FAILED" : "OK",
           worst, all, tol);
    for (int i = 0; i < 3; i++)
        ddp_safetensors_close(f[i]);
    return failed ? 1 : 0;
}
