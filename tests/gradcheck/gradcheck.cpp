/*
 * gradcheck.cpp: checks a generated program's backward pass against finite
 * differences of its own forward pass.
 *
 * It includes the generated source (DDP_NET_SOURCE, with the program's main
 * renamed away), sets the net up on the CPU with random weights and a random
 * batch, takes one train_step for the analytic gradients, then for a sample of
 * coordinates of every trainable tensor measures (L(p + h) - L(p - h)) / 2h,
 * with L the mean loss the same train_step reports. Dropout masks are a pure
 * function of (seed, epoch, sample), so every evaluation sees the same net.
 *
 *   gradcheck [coordinates per tensor]   prints one line per tensor, then
 *   "gradcheck: OK worst=..." or "gradcheck: FAILED ..."; exit 0 only if OK.
 *
 * Float32 finite differences are noisy, so the tolerance is loose (|g - fd| <=
 * 2e-3 + 3e-2 |fd|); the tight comparison is the PyTorch parity test. Where a
 * step of h crosses a kink (a relu turning on, a max changing hands) the
 * difference quotient means nothing: a coordinate whose quotients for h and
 * h/4 disagree is skipped, and more than a quarter skipped is a failure.
 */
#define main ddp_generated_main
#include DDP_NET_SOURCE
#undef main

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"  // ddp_device_alloc

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static double uniform(void)  // splitmix64 -> [0, 1)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

static double mean_loss(DdpCtx *ctx, int n)
{
    memset(ctx->stats, 0, 3 * sizeof(double));
    net.train_step(ctx, n);
    return ctx->stats[0] / ctx->stats[2];
}

int main(int argc, char **argv)
{
    int per_tensor = argc > 1 ? atoi(argv[1]) : 12;
    const int n = 3;
    DdpCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.max_batch = n;
    ctx.world_size = 1;
    if (ddp_ops_create(&ctx.ops, NULL) != DDP_OK || net.plan_ops(&ctx) != DDP_OK || ddp_ops_finalize(ctx.ops) != DDP_OK) {
        fprintf(stderr, "gradcheck: setup failed: %s\n", ddp_error_message());
        return 2;
    }
    size_t arena = (size_t)(n * net.arena_per_sample + net.arena_fixed);
    ctx.params = (float *)calloc((size_t)net.n_param_floats + 1, sizeof(float));
    ctx.grads = calloc((size_t)net.n_param_floats + 1, sizeof(DdpGrad));
    ctx.opt_state = (float *)calloc((size_t)net.n_param_floats * net.opt_slots + 1, sizeof(float));
    ctx.buffers = (float *)calloc((size_t)net.n_buffer_floats + 1, sizeof(float));
    ctx.arena = (float *)calloc(arena + 1, sizeof(float));
    ctx.stats = (double *)calloc(3, sizeof(double));
    float *x = (float *)malloc(sizeof(float) * (size_t)(n * net.sample_numel));
    int32_t labels[n];
    int64_t ids[n];
    for (int64_t i = 0; i < n * net.sample_numel; i++)
        x[i] = (float)uniform();
    for (int s = 0; s < n; s++) {
        labels[s] = (int32_t)(uniform() * net.num_classes);
        ids[s] = 1000 + s;
    }
    ctx.x = x;
    ctx.labels = labels;
    ctx.sample_ids = ids;
    ctx.seed = 7;
    static const DdpStepScalars step = {.step = 0, .epoch = 0, .lr = 0.0f}; /* dropout's epoch */
    ctx.step_scalars = &step;
    for (int i = 0; i < net.n_params; i++) {
        const DdpParamInfo *p = &net.params[i];
        if (p->is_step_count)
            continue;
        float *dst = (p->trainable ? ctx.params : ctx.buffers) + p->offset;
        for (int64_t j = 0; j < p->numel; j++) {
            if (p->init == DDP_INIT_KAIMING_UNIFORM)
                dst[j] = (float)((2 * uniform() - 1) * 1.5 / sqrt((double)p->fan_in));
            else if (p->init == DDP_INIT_ONES)
                dst[j] = (float)(0.5 + uniform());  // batchnorm weight and running_var, away from 1
            else
                dst[j] = (float)(0.2 * (uniform() - 0.5));
        }
    }

    ddp_exact_windows_set(n, n); /* as the trainer sets them for a step of one batch of n */
    mean_loss(&ctx, n);
    double *analytic = (double *)malloc(sizeof(double) * (size_t)net.n_param_floats + 1);
    for (int64_t i = 0; i < net.n_param_floats; i++)
        analytic[i] = ddp_grad_value(((const DdpGrad *)ctx.grads)[i]);

    const double h = argc > 2 ? atof(argv[2]) : 1e-3, atol = 2e-3, rtol = 3e-2;
    double worst = 0;
    int bad = 0, checked = 0, skipped = 0;
    for (int i = 0; i < net.n_params; i++) {
        const DdpParamInfo *p = &net.params[i];
        if (!p->trainable)
            continue;
        double tensor_worst = 0;
        for (int k = 0; k < per_tensor && k < p->numel; k++) {
            int64_t j = p->numel <= per_tensor ? k : (int64_t)(uniform() * p->numel);
            float *w = ctx.params + p->offset + j;
            double quotient[2];
            for (int q = 0; q < 2; q++) {
                double step = q ? h / 4 : h;
                float saved = *w;
                *w = (float)(saved + step);
                double plus = mean_loss(&ctx, n);
                *w = (float)(saved - step);
                double minus = mean_loss(&ctx, n);
                *w = saved;
                quotient[q] = (plus - minus) / (2 * step);
            }
            if (fabs(quotient[0] - quotient[1]) > atol + rtol * fabs(quotient[0])) {
                skipped++;
                continue;
            }
            double fd = quotient[0], g = analytic[p->offset + j];
            double excess = fabs(g - fd) / (atol + rtol * fabs(fd));
            tensor_worst = excess > tensor_worst ? excess : tensor_worst;
            if (excess > 1) {
                bad++;
                printf("  %s[%lld]: analytic %.6g, finite difference %.6g\n", p->name, (long long)j, g, fd);
            }
            checked++;
        }
        printf("%-24s worst %.3f of tolerance\n", p->name, tensor_worst);
        worst = tensor_worst > worst ? tensor_worst : worst;
    }
    if (ddp_ops_status(ctx.ops) != DDP_OK) {
        printf("gradcheck: FAILED: %s\n", ddp_error_message());
        return 1;
    }
    bool ok = bad == 0 && skipped * 4 <= checked + skipped;
    printf("gradcheck: %s worst=%.3f of tolerance, %d coordinates, %d outside, %d skipped at kinks\n",
           ok ? "OK" : "FAILED", worst, checked, bad, skipped);
    return ok ? 0 : 1;
}
