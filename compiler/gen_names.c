/*
 * gen_names.c: the names the generated code derives from a layer's, spelt
 * here and nowhere else.
 *
 * emit_cu.c names what belongs to a layer after it: its kernels
 * (relu1_forward, bn1_sums_backward, conv1_bias_relu_forward), its output
 * and scratch (conv1_out, maxpool1_argmax) and their offsets in the arena
 * table (conv1_out_at), its parameters (conv1_weight), a conv's shape
 * (conv1_shape), gradients after GEN_GRADIENT_PREFIX (d_conv1_out). sema.c
 * refuses a label two of whose names would meet another layer's, and reads
 * what a kind may add to a name from gen_name_suffixes, which spells each
 * suffix by calling the functions the emitter calls, with an empty name: a
 * suffix the emitter spells is one sema checks, with no second list to
 * keep. A kernel's word beyond its direction (bn1_sums_forward) must be one
 * of its op row's kernels, or the emitter stops with an internal error.
 * test_golden holds every pinned program's names to these (an emitter that
 * spells a name by hand fails it).
 */
#include "ddpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const pass_word[] = {[GEN_FORWARD] = "forward", [GEN_BACKWARD] = "backward"};

static const char *const loss_kernel[] = {
    [GEN_LOSS_FORWARD_BACKWARD] = "loss_forward_backward",
    [GEN_LOSS_REDUCE] = "loss_reduce",
};
_Static_assert(DDPC_COUNT(loss_kernel) == GEN_LOSS_KERNEL_COUNT, "a loss kernel without its name");

/* PyTorch's names of a layer's tensors: conv1.weight, bn1.running_mean */
static const char *const param_word[] = {
    [PARAM_WEIGHT] = "weight",
    [PARAM_BIAS] = "bias",
    [PARAM_RUNNING_MEAN] = "running_mean",
    [PARAM_RUNNING_VAR] = "running_var",
    [PARAM_NUM_BATCHES_TRACKED] = "num_batches_tracked",
};
_Static_assert(DDPC_COUNT(param_word) == PARAM_ROLE_COUNT, "a parameter role without its word");

static void internal_error(const char *what)
{
    fprintf(stderr, "ddpc: internal error: gen_names.c: %s\n", what);
    abort();
}

const char *gen_name_kernel(Arena *a, const Node *n, const char *word, GenPass pass)
{
    if (word) {
        const OpFacts *f = op_facts(n->op);
        bool known = false;
        for (int k = 0; k < (int)DDPC_COUNT(f->kernels) && f->kernels[k] && !known; k++)
            known = strcmp(f->kernels[k], word) == 0;
        if (!known)
            internal_error("a kernel's word that is not in its op row's kernels");
    }
    return arena_printf(a, "%s%s%s_%s", n->name, word ? "_" : "", word ? word : "", pass_word[pass]);
}

const char *gen_name_product_kernel(Arena *a, const Node *n, const char *act, GenPass pass)
{
    if (!op_facts(n->op)->library_product)
        internal_error("a product's kernel named for a layer that is no product");
    return arena_printf(a, "%s%s%s%s_%s", n->name, n->bias ? "_bias" : "", act ? "_" : "", act ? act : "",
                        pass_word[pass]);
}

const char *gen_name_buffer(Arena *a, const Node *n, bool gradient)
{
    return arena_printf(a, "%s%s_out", gradient ? GEN_GRADIENT_PREFIX : "", n->name);
}

const char *gen_name_scratch(Arena *a, const Node *n, int k)
{
    return arena_printf(a, "%s_%s", n->name, op_facts(n->op)->scratch[k].name);
}

const char *gen_name_offset(Arena *a, const char *buffer) { return arena_printf(a, "%s_at", buffer); }

const char *gen_param_word(ParamRole role) { return param_word[role]; }

const char *gen_name_param(Arena *a, const Node *n, ParamRole role, bool gradient)
{
    return arena_printf(a, "%s%s_%s", gradient ? GEN_GRADIENT_PREFIX : "", n->name, param_word[role]);
}

const char *gen_name_conv_shape(Arena *a, const Node *n) { return arena_printf(a, "%s_shape", n->name); }

const char *gen_name_loss_kernel(GenLossKernel k) { return loss_kernel[k]; }

static void add_suffix(const char **out, int max, int *n, const char *suffix)
{
    if (*n == max || strlen(suffix) > LONGEST_NAME_SUFFIX)
        internal_error("more name suffixes than MAX_NAME_SUFFIXES, or one longer than LONGEST_NAME_SUFFIX");
    out[(*n)++] = suffix;
}

/* A kernel's both directions, as gen_name_kernel (ACT unused) or, for
 * PRODUCT, gen_name_product_kernel (WORD unused) spells them. */
static void add_kernel(Arena *a, const Node *n, bool product, const char *word, const char *act, const char **out,
                       int max, int *count)
{
    for (int p = 0; p < (int)DDPC_COUNT(pass_word); p++)
        add_suffix(out, max, count,
                   product ? gen_name_product_kernel(a, n, act, (GenPass)p) : gen_name_kernel(a, n, word, (GenPass)p));
}

int gen_name_suffixes(Arena *a, OpKind op, bool bias, const char **out, int max)
{
    const Node n = {.op = op, .bias = bias, .name = ""}; /* its names are its suffixes */
    const OpFacts *f = op_facts(op);
    int count = 0;
    if (f->library_product)
        add_suffix(out, max, &count, gen_name_conv_shape(a, &n));
    /* kernels: NAME_forward and NAME_backward; NAME_WORD_... for the op's
     * other kernels; a product's NAME_bias_... and NAME_bias_ACT_..., or
     * without a bias NAME_ACT_..., for an activation ACT fused into it (its
     * NAME_... without either is no kernel: nothing to add after the
     * product) */
    add_kernel(a, &n, false, NULL, NULL, out, max, &count);
    for (int k = 0; k < (int)DDPC_COUNT(f->kernels) && f->kernels[k]; k++)
        add_kernel(a, &n, false, f->kernels[k], NULL, out, max, &count);
    if (f->library_product) {
        if (bias)
            add_kernel(a, &n, true, NULL, NULL, out, max, &count);
        const char *words[64];
        int n_words = layer_words(words, 64);
        for (int i = 0; i < n_words; i++)
            if (op_facts(layer_kind_find(words[i])->op)->activation)
                add_kernel(a, &n, true, NULL, words[i], out, max, &count);
    }
    /* buffers, and their offsets in the arena table */
    add_suffix(out, max, &count, gen_name_buffer(a, &n, false));
    add_suffix(out, max, &count, gen_name_offset(a, gen_name_buffer(a, &n, false)));
    for (int k = 0; k < OP_MAX_SCRATCH && f->scratch[k].name; k++) {
        add_suffix(out, max, &count, gen_name_scratch(a, &n, k));
        add_suffix(out, max, &count, gen_name_offset(a, gen_name_scratch(a, &n, k)));
    }
    /* parameters: conv1.weight is conv1_weight */
    for (int r = 0; r < PARAM_ROLE_COUNT; r++)
        if (f->init[r] != INIT_NONE)
            add_suffix(out, max, &count, gen_name_param(a, &n, (ParamRole)r, false));
    return count;
}
