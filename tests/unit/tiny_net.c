/*
 * tiny_net.c: a hand-written DdpNet (see tiny_net.h) that follows model.h to
 * the letter, so the trainer's tests exercise the same contract generated
 * code will: gradients (order-free sums) of the mean over the n * world_size samples
 * of the global batch, overwritten or, with ctx->accumulate, added to; stats gaining summed loss,
 * correct count and n; parameters, buffers and optimizer state only where
 * the DdpParamInfo offsets put them; no memory of its own beyond the arena.
 *
 * Layout: params = fc.weight [C,784] then fc.bias [C]; buffers =
 * norm.running_mean [C] then norm.running_var [C]; arena = C floats per
 * sample (the logits, then in training the loss gradient in place; after
 * eval_step still the logits, which --eval-only reads: logits_at 0).
 */
#include "tiny_net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { FEATURES = 784 };

static DdpParamInfo params[5];
static DdpNet net;
static int classes;
enum { MOST_CLASSES = 256 }; /* eval_step's scratch */

DdpTrainConfig tiny_net_train(void)
{
    return (DdpTrainConfig){
        .batch = 20,
        .epochs = 3,
        .optimizer = DDP_OPT_SGD,
        .lr = 0.1,
        .momentum = 0.9,
        .weight_decay = 1e-4,
        .schedule = DDP_SCHED_CONSTANT,
        .step_every = 1,
        .gamma = 1,
        .bucket_cap_bytes = 25 << 20,
        .first_bucket_bytes = 1 << 20,
        .seed = 7,
    };
}

/* logits[k] = b[k] + w[k] . x for one sample. */
static void forward_one(const DdpCtx *ctx, const float *x, float *logits)
{
    const float *w = ctx->params, *b = ctx->params + classes * FEATURES;
    for (int k = 0; k < classes; k++) {
        float acc = b[k];
        for (int j = 0; j < FEATURES; j++)
            acc += w[k * FEATURES + j] * x[j];
        logits[k] = acc;
    }
}

/* Turns LOGITS into d loss_i / d logits (softmax - onehot, unscaled), adds the
 * sample's loss and correctness to STATS. */
static void loss_one(float *logits, int label, double *stats)
{
    float max = logits[0];
    int pred = 0;
    for (int k = 1; k < classes; k++)
        if (logits[k] > max) {
            max = logits[k];
            pred = k;
        }
    float sum = 0;
    for (int k = 0; k < classes; k++)
        sum += expf(logits[k] - max);
    float lse = max + logf(sum);
    stats[0] += (double)(lse - logits[label]);
    stats[1] += pred == label;
    stats[2] += 1;
    for (int k = 0; k < classes; k++)
        logits[k] = expf(logits[k] - lse) - (k == label);
}

static void train_step(DdpCtx *ctx, int n)
{
    DdpGrad *grad_w = ctx->grads, *grad_b = grad_w + classes * FEATURES;
    for (int i = 0; i < n; i++) {
        float *z = ctx->arena + (size_t)i * classes;
        forward_one(ctx, ctx->x + (size_t)i * FEATURES, z);
    }
    /* The running statistics of the logits, as a batchnorm keeps them
     * (momentum 0.1, unbiased variance). */
    float *mean = ctx->buffers, *var = ctx->buffers + classes;
    for (int k = 0; k < classes; k++) {
        double s = 0, ss = 0;
        for (int i = 0; i < n; i++)
            s += ctx->arena[i * classes + k];
        double m = s / n;
        for (int i = 0; i < n; i++)
            ss += (ctx->arena[i * classes + k] - m) * (ctx->arena[i * classes + k] - m);
        mean[k] = 0.9f * mean[k] + 0.1f * (float)m;
        var[k] = 0.9f * var[k] + 0.1f * (float)(n > 1 ? ss / (n - 1) : ss);
    }
    for (int i = 0; i < n; i++)
        loss_one(ctx->arena + (size_t)i * classes, ctx->labels[i], ctx->stats);
    /* The mean over the global batch (the all-reduce sums the ranks' gradients):
     * each sample's gradient scaled by 1/(n * world_size). */
    if (!ctx->accumulate)
        memset(ctx->grads, 0, sizeof(DdpGrad) * (size_t)(classes * FEATURES + classes));
    /* Each sample's part added to the order-free sums (exact_sum.h). */
    for (int k = 0; k < classes; k++)
        for (int i = 0; i < n; i++) {
            float d = ctx->arena[i * classes + k] / ((float)n * (float)ctx->world_size);
            const float *x = ctx->x + (size_t)i * FEATURES;
            for (int j = 0; j < FEATURES; j++)
                ddp_exact_add(&grad_w[k * FEATURES + j], d * x[j], &ddp_grad_window);
            ddp_exact_add(&grad_b[k], d, &ddp_grad_window);
        }
}

static void eval_step(DdpCtx *ctx, int n)
{
    float scratch[MOST_CLASSES];
    for (int i = 0; i < n; i++) {
        float *z = ctx->arena + (size_t)i * classes;
        forward_one(ctx, ctx->x + (size_t)i * FEATURES, z);
        memcpy(scratch, z, sizeof(float) * (size_t)classes); /* the logits stay for --eval-only */
        loss_one(scratch, ctx->labels[i], ctx->stats);
    }
}

/* torch.optim.SGD.step for one flat parameter vector. */
static void optimizer_step(DdpCtx *ctx)
{
    const DdpTrainConfig *c = &net.train;
    const float lr = ctx->step_scalars->lr, wd = (float)c->weight_decay, momentum = (float)c->momentum;
    const float dampening = (float)c->dampening;
    int64_t count = net.n_param_floats;
    for (int64_t i = 0; i < count; i++) {
        float d = (float)ddp_exact_value(((const DdpGrad *)ctx->grads)[i]);
        if (wd != 0)
            d += wd * ctx->params[i];
        if (momentum != 0) {
            float *buf = &ctx->opt_state[i];
            *buf = ctx->step_scalars->step == 0 ? d : momentum * *buf + (1 - dampening) * d;
            d = c->nesterov ? d + momentum * *buf : *buf;
        }
        ctx->params[i] += -lr * d;
    }
}

static DdpStatus plan_ops(DdpCtx *ctx)
{
    (void)ctx;
    return DDP_OK;
}

const DdpNet *tiny_net(const DdpTrainConfig *train, int sample_rank, int num_classes)
{
    if (num_classes < 1 || num_classes > MOST_CLASSES)
        abort(); /* a test's mistake */
    classes = num_classes;
    int64_t c = num_classes;
    params[0] = (DdpParamInfo){.name = "fc.weight", .ndim = 2, .shape = {c, FEATURES}, .numel = c * FEATURES,
                               .trainable = 1, .offset = 0, .init = DDP_INIT_KAIMING_UNIFORM, .fan_in = FEATURES};
    params[1] = (DdpParamInfo){.name = "fc.bias", .ndim = 1, .shape = {c}, .numel = c, .trainable = 1,
                               .offset = c * FEATURES, .init = DDP_INIT_KAIMING_UNIFORM, .fan_in = FEATURES};
    params[2] = (DdpParamInfo){.name = "norm.running_mean", .ndim = 1, .shape = {c}, .numel = c,
                               .offset = 0, .init = DDP_INIT_ZEROS};
    params[3] = (DdpParamInfo){.name = "norm.running_var", .ndim = 1, .shape = {c}, .numel = c,
                               .offset = c, .init = DDP_INIT_ONES};
    params[4] = (DdpParamInfo){.name = "norm.num_batches_tracked", .ndim = 0, .numel = 1,
                               .is_step_count = 1, .init = DDP_INIT_ZEROS};
    net = (DdpNet){
        .name = "tiny",
        .hash = "0123456789abcdef",
        .sample_rank = sample_rank,
        .sample_shape = {sample_rank == 3 ? 1 : FEATURES, sample_rank == 3 ? 28 : 0, sample_rank == 3 ? 28 : 0},
        .sample_numel = FEATURES,
        .num_classes = num_classes,
        .params = params,
        .n_params = 5,
        .n_param_floats = c * FEATURES + c,
        .n_buffer_floats = 2 * c,
        .opt_slots = 1,
        .grad_bytes = sizeof(DdpGrad),
        .train = *train,
        .arena_per_sample = c,
        .arena_fixed = 0,
        .logits_at = 0,
        .plan_ops = plan_ops,
        .train_step = train_step,
        .eval_step = eval_step,
        .optimizer_step = optimizer_step,
    };
    return &net;
}
