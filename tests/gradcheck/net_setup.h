/*
 * net_setup.h: a generated net set up on the CPU with seeded random weights
 * and batches, for the test programs that include a generated source
 * (gradcheck.cpp, tests/layout/steps_digest.cpp). Include it after the
 * generated source, whose `net` it sets up.
 *
 * The draws come from one splitmix64 stream in a fixed order (batch, then
 * weights), so that two builds of one net (another layout, say) start from
 * the same bits.
 */
#ifndef DDP_TEST_NET_SETUP_H
#define DDP_TEST_NET_SETUP_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static double uniform(void)  // splitmix64 -> [0, 1)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

/* A batch of N samples drawn at random: pixels in [0, 1), labels, and
 * sample ids from FIRST_ID (dropout's masks hash them). */
typedef struct {
    float *x;
    int32_t *labels;
    int64_t *ids;
} RandomBatch;

static RandomBatch random_batch(int n, int64_t first_id)
{
    RandomBatch b;
    b.x = (float *)malloc(sizeof(float) * (size_t)(n * net.sample_numel));
    b.labels = (int32_t *)malloc(sizeof(int32_t) * (size_t)n);
    b.ids = (int64_t *)malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n * net.sample_numel; i++)
        b.x[i] = (float)uniform();
    for (int s = 0; s < n; s++) {
        b.labels[s] = (int32_t)(uniform() * net.num_classes);
        b.ids[s] = first_id + s;
    }
    return b;
}

static void use_batch(DdpCtx *ctx, const RandomBatch *b)
{
    ctx->x = b->x;
    ctx->labels = b->labels;
    ctx->sample_ids = b->ids;
}

/* CTX for batches of up to N on the CPU: ops planned and finalized,
 * memory for every region, weights drawn at random (away from the values
 * a layer starts at, so that batchnorm's weight is not 1). Exits with 2 if
 * the ops cannot be set up. */
static void net_setup(DdpCtx *ctx, int n)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->max_batch = n;
    ctx->world_size = 1;
    if (ddp_ops_create(&ctx->ops, NULL) != DDP_OK || net.plan_ops(ctx) != DDP_OK || ddp_ops_finalize(ctx->ops) != DDP_OK) {
        fprintf(stderr, "setup failed: %s\n", ddp_error_message());
        exit(2);
    }
    size_t arena = (size_t)(n * net.arena_per_sample + net.arena_fixed);
    ctx->params = (float *)calloc((size_t)net.n_param_floats + 1, sizeof(float));
    ctx->grads = calloc((size_t)net.n_param_floats + 1, sizeof(DdpGrad));
    ctx->opt_state = (float *)calloc((size_t)net.n_param_floats * net.opt_slots + 1, sizeof(float));
    ctx->buffers = (float *)calloc((size_t)net.n_buffer_floats + 1, sizeof(float));
    ctx->arena = (float *)calloc(arena + 1, sizeof(float));
    ctx->stats = (double *)calloc(3, sizeof(double));
    ctx->seed = 7;
}

static void random_weights(DdpCtx *ctx)
{
    for (int i = 0; i < net.n_params; i++) {
        const DdpParamInfo *p = &net.params[i];
        if (p->is_step_count)
            continue;
        float *dst = (p->trainable ? ctx->params : ctx->buffers) + p->offset;
        for (int64_t j = 0; j < p->numel; j++) {
            if (p->init == DDP_INIT_KAIMING_UNIFORM)
                dst[j] = (float)((2 * uniform() - 1) * 1.5 / sqrt((double)p->fan_in));
            else if (p->init == DDP_INIT_ONES)
                dst[j] = (float)(0.5 + uniform());  // batchnorm weight and running_var, away from 1
            else
                dst[j] = (float)(0.2 * (uniform() - 0.5));
        }
    }
}

#endif
