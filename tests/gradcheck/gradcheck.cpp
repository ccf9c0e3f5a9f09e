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
 *
 * Last, a NaN put in the batch must make the loss NaN, as in PyTorch.
 */
#define main ddp_generated_main
#include DDP_NET_SOURCE
#undef main

#include <cmath>     // std::isnan

#include "device.h"  // ddp_device_alloc
#include "net_setup.h"  // net_setup, random_batch, random_weights: the seeded set-up

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
    net_setup(&ctx, n);
    RandomBatch batch = random_batch(n, 1000);
    use_batch(&ctx, &batch);
    static const DdpStepScalars step = {.step = 0, .epoch = 0, .lr = 0.0f}; /* dropout's epoch */
    ctx.step_scalars = &step;
    random_weights(&ctx);

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
    /* A NaN in one input value, sample 1's last (a corner: a pool's window
     * holds it at a tap other than its first), reaches the loss, as in
     * PyTorch: no relu, maxpool or dropout turns it into a number, which
     * would hide a diverged run behind a finite loss. */
    batch.x[2 * net.sample_numel - 1] = NAN;
    bool nan_reaches_loss = std::isnan(mean_loss(&ctx, n));
    printf("a NaN in the input %s\n", nan_reaches_loss ? "reaches the loss" : "DOES NOT reach the loss");
    bool ok = bad == 0 && skipped * 4 <= checked + skipped && nan_reaches_loss;
    printf("gradcheck: %s worst=%.3f of tolerance, %d coordinates, %d outside, %d skipped at kinks\n",
           ok ? "OK" : "FAILED", worst, checked, bad, skipped);
    return ok ? 0 : 1;
}
