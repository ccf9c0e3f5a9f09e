/*
 * op_facts.c: what each op kind is to the passes after sema, one row per
 * kind, so that a fact about an op is written once and every pass reads it:
 *
 *   plan.c      where its output lives, what its backward reads, its
 *               scratch, which activation fuses into which product, which
 *               gradient may share its storage;
 *   emit_cu.c   its scratch's names and types, its parameters' start,
 *               which forward depends on TRAIN;
 *   gen_names.c the names the generated code derives from a layer's (its
 *               scratch's, its kernels' beyond NAME_forward), which
 *               emit_cu.c writes and sema.c checks labels against, so that
 *               no two layers name one thing;
 *   summary.c   which outputs are activations;
 *   scaling.c   which backward is two products.
 *
 * Its words and options, shape rule, parameters' shapes and FLOPs are its
 * check function's (layers.c). What stays a switch over OpKind is the text
 * each op is spelled in: its kernels and launches (emit_cu.c), its nn module
 * (emit_torch.c), its summary line (summary.c). Those switches have no
 * default, so -Wswitch under -Werror names every one a new kind must fill.
 * The rows are in OpKind's order: a kind without a row fails the static
 * assertion below (the build stops), and a row out of its place aborts its
 * first lookup (op_facts), which `build/unit_tests front` makes for every
 * kind (everything.net holds them all).
 */
#include "ddpc.h"

#include <stdio.h>
#include <stdlib.h>

/* Parameters of a conv or linear layer: weight and bias, as PyTorch's. */
#define PRODUCT_INIT {[PARAM_WEIGHT] = INIT_KAIMING_UNIFORM, [PARAM_BIAS] = INIT_KAIMING_UNIFORM}

static const OpFacts rows[] = {
    {.op = OP_INPUT, .output = OUT_DATA},
    {.op = OP_CONV, .output = OUT_NEW, .library_product = true, .backward_reads = READS_INPUT,
     .init = PRODUCT_INIT},
    {.op = OP_MAXPOOL, .output = OUT_NEW,
     .scratch = {{"argmax", "int32_t", SCRATCH_PER_OUTPUT_ELEMENT}}}, /* each window's winner, for backward */
    {.op = OP_AVGPOOL, .output = OUT_NEW},
    {.op = OP_GLOBAL_AVGPOOL, .output = OUT_NEW},
    {.op = OP_LINEAR, .output = OUT_NEW, .library_product = true, .backward_reads = READS_INPUT,
     .init = PRODUCT_INIT},
    {.op = OP_FLATTEN, .output = OUT_VIEW, .gradient_passes = true},
    /* relu, sigmoid and tanh compute their derivative from y, which lets them
     * overwrite x (and fuse into the product before them); gelu needs x */
    {.op = OP_RELU, .output = OUT_NEW, .activation = true, .backward_reads = READS_OUTPUT},
    {.op = OP_LEAKY_RELU, .output = OUT_NEW, .activation = true,
     .backward_reads = READS_OUTPUT_IF_SLOPE_POSITIVE},
    {.op = OP_SIGMOID, .output = OUT_NEW, .activation = true, .backward_reads = READS_OUTPUT},
    {.op = OP_TANH, .output = OUT_NEW, .activation = true, .backward_reads = READS_OUTPUT},
    {.op = OP_GELU, .output = OUT_NEW, .activation = true, .backward_reads = READS_INPUT},
    /* the masks are hashed again in backward: nothing saved */
    {.op = OP_DROPOUT, .output = OUT_NEW, .differs_in_training = true},
    {.op = OP_BATCHNORM, .output = OUT_NEW, .differs_in_training = true,
     .backward_reads = READS_INPUT,
     .scratch = {{"sums", "DdpSum", SCRATCH_CHANNEL_SUMS}, {"stats", "float", SCRATCH_CHANNEL_STATS}},
     .kernels = {"sums", "stats", "normalize", "eval"},
     .init = {[PARAM_WEIGHT] = INIT_ONES, [PARAM_BIAS] = INIT_ZEROS, [PARAM_RUNNING_MEAN] = INIT_ZEROS,
              [PARAM_RUNNING_VAR] = INIT_ONES, [PARAM_NUM_BATCHES_TRACKED] = INIT_ZEROS}},
    {.op = OP_RESIDUAL_ADD, .output = OUT_NEW, .gradient_passes = true},
    {.op = OP_LOG_SOFTMAX, .output = OUT_NEW, .backward_reads = READS_OUTPUT},
    /* the loss kernel writes d logits at once, in forward; its input lives
     * on to its backward's place, where its gradient is ready */
    {.op = OP_LOSS, .output = OUT_LOSS, .backward_reads = READS_INPUT,
     .scratch = {{"rows", "float", SCRATCH_TWO_PER_SAMPLE}}},
};

_Static_assert(DDPC_COUNT(rows) == OP_COUNT, "op_facts.c: one row per OpKind, in its order");

const OpFacts *op_facts(OpKind k)
{
    if ((unsigned)k >= OP_COUNT || rows[k].op != k) {
        fprintf(stderr, "ddpc: internal error: op_facts.c: no row for op kind %d in its place\n", (int)k);
        abort();
    }
    return &rows[k];
}

BackwardReads op_backward_reads(const Node *n)
{
    BackwardReads r = op_facts(n->op)->backward_reads;
    if (r == READS_OUTPUT_IF_SLOPE_POSITIVE)
        return n->slope > 0 ? READS_OUTPUT : READS_INPUT;
    return r;
}

void op_scratch_floats(const Node *n, int k, int64_t *per_sample, int64_t *fixed)
{
    *per_sample = *fixed = 0;
    switch (op_facts(n->op)->scratch[k].size) {
    case SCRATCH_NONE: break;
    case SCRATCH_PER_OUTPUT_ELEMENT: *per_sample = shape_numel(n->out_shape); break;
    case SCRATCH_TWO_PER_SAMPLE: *per_sample = 2; break;
    case SCRATCH_CHANNEL_SUMS: *fixed = 4 * (2 * n->out_ch + 1); break;
    case SCRATCH_CHANNEL_STATS: *fixed = 2 * n->out_ch; break;
    }
}

int64_t op_fan_in(const Net *net, const Node *n)
{
    for (int k = 0; k < n->n_params; k++) {
        const Param *q = &net->params[n->first_param + k];
        if (q->role != PARAM_WEIGHT || q->ndim < 2)
            continue;
        int64_t fan_in = 1;
        for (int d = 1; d < q->ndim; d++)
            fan_in *= q->shape[d];
        return fan_in;
    }
    return n->in_ch;
}
