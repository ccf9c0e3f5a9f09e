/*
 * steps_digest.cpp: a few training steps of a generated program, summed up
 * in one line of hashes, so that two builds of a net (NCHW and
 * channels-last: ddpc --layout) can be compared bit for bit on any data
 * shape, without data files.
 *
 * It includes the generated source (DDP_NET_SOURCE, its main renamed away)
 * as gradcheck.cpp does, and sets the net up on the CPU with the same
 * seeded weights and batches (net_setup.h). Each of STEPS steps takes two
 * micro-batches, the second one sample short and adding to the gradients
 * (cuBLAS's and the convs' beta 1, a smaller batch than planned), then the
 * optimizer; one evaluation step follows. It prints:
 *
 *   digest params=H buffers=H scores=H train_loss=BITS eval_loss=BITS
 *
 * with H the FNV-1a hash of the trainable parameters, of the buffers
 * (batchnorm's running statistics), of the scores the evaluation's loss
 * read; exit 0, or 2 if the ops failed.
 */
#define main ddp_generated_main
#include DDP_NET_SOURCE
#undef main

#include "fnv1a.h"      // ddp_fnv1a
#include "../gradcheck/net_setup.h"  // net_setup, random_batch, random_weights

int main(int argc, char **argv)
{
    const int steps = argc > 1 ? atoi(argv[1]) : 2, n = 4;
    DdpCtx ctx;
    net_setup(&ctx, n);
    RandomBatch first = random_batch(n, 1000), second = random_batch(n - 1, 2000);
    random_weights(&ctx);
    DdpStepScalars scalars = {0, 0, 0.05f};
    ctx.step_scalars = &scalars;

    double train_loss = 0;
    for (int t = 0; t < steps; t++) {
        scalars.step = t;
        scalars.epoch = t; /* dropout's masks change with the epoch */
        ddp_exact_windows_set(n - 1, 2 * n - 1); /* as the trainer sets them: the batches' parts, the smallest */
        memset(ctx.stats, 0, 3 * sizeof(double));
        use_batch(&ctx, &first);
        ctx.accumulate = 0;
        net.train_step(&ctx, n);
        use_batch(&ctx, &second);
        ctx.accumulate = 1;
        net.train_step(&ctx, n - 1);
        net.optimizer_step(&ctx);
        train_loss += ctx.stats[0];
    }
    memset(ctx.stats, 0, 3 * sizeof(double));
    use_batch(&ctx, &first);
    net.eval_step(&ctx, n);
    double eval_loss = ctx.stats[0];
    if (ddp_ops_status(ctx.ops) != DDP_OK) {
        fprintf(stderr, "steps_digest: %s\n", ddp_error_message());
        return 2;
    }

    const float *scores = net.logits_at >= 0 ? ctx.arena + net.logits_at * ctx.max_batch : ctx.x;
    uint64_t bits[2];
    memcpy(&bits[0], &train_loss, sizeof train_loss);
    memcpy(&bits[1], &eval_loss, sizeof eval_loss);
    printf("digest params=%016llx buffers=%016llx scores=%016llx train_loss=%016llx eval_loss=%016llx\n",
           (unsigned long long)ddp_fnv1a(DDP_FNV1A_START, ctx.params, sizeof(float) * (size_t)net.n_param_floats),
           (unsigned long long)ddp_fnv1a(DDP_FNV1A_START, ctx.buffers, sizeof(float) * (size_t)net.n_buffer_floats),
           (unsigned long long)ddp_fnv1a(DDP_FNV1A_START, scores, sizeof(float) * (size_t)(n * net.num_classes)),
           (unsigned long long)bits[0], (unsigned long long)bits[1]);
    return 0;
}
