/*
 * summary.c: `ddpc --summary`, a layer table and totals, as torchinfo prints,
 * then the training settings and the data { } block (data.c's words).
 *
 *   layer    op              output     params  MFLOPs
 *   input    input           1x28x28         0    0.00
 *   conv1    conv 1->32 k5   32x24x24      832    0.94
 *
 * Everything printed comes from the checked Net; nothing is re-derived.
 * Layers inside residual blocks are indented under the block's name. The
 * column widths fit the widest entry, so the table stays aligned for any net.
 */
#include "ddpc.h"

#include <string.h>

/* 184586 -> "184,586" */
const char *summary_grouped(Arena *a, int64_t v)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%lld", (long long)v);
    char *out = arena_alloc(a, (size_t)n + (size_t)n / 3 + 2);
    int j = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && digits[i - 1] != '-' && (n - i) % 3 == 0)
            out[j++] = ',';
        out[j++] = digits[i];
    }
    return out;
}

/* The op column: the layer as one would write it, non-default options only. */
static const char *describe(Arena *a, const Node *n)
{
    switch (n->op) {
    case OP_CONV:
        return arena_printf(a, "conv %lld->%lld k%lld%s%s%s%s%s", (long long)n->in_ch, (long long)n->out_ch,
                            (long long)n->kernel, n->stride != 1 ? arena_printf(a, " s%lld", (long long)n->stride) : "",
                            n->pad ? arena_printf(a, " p%lld", (long long)n->pad) : "",
                            n->groups != 1 ? arena_printf(a, " groups=%lld", (long long)n->groups) : "",
                            n->bias ? "" : " nobias", "");
    case OP_MAXPOOL:
    case OP_AVGPOOL:
        if (n->stride == n->kernel && n->pad == 0)
            return arena_printf(a, "%s %lld", n->kind_word, (long long)n->kernel);
        return arena_printf(a, "%s k%lld s%lld%s", n->kind_word, (long long)n->kernel, (long long)n->stride,
                            n->pad ? arena_printf(a, " p%lld", (long long)n->pad) : "");
    case OP_LINEAR:
        return arena_printf(a, "linear %lld->%lld%s", (long long)n->in_ch, (long long)n->out_ch, n->bias ? "" : " nobias");
    case OP_LEAKY_RELU: return arena_printf(a, "leaky_relu slope=%g", n->slope);
    case OP_GELU: return n->gelu_tanh ? "gelu approximate=tanh" : "gelu";
    case OP_DROPOUT: return arena_printf(a, "dropout %g", n->p);
    case OP_BATCHNORM: return arena_printf(a, "batchnorm %lld%s", (long long)n->out_ch, n->sync ? "" : " sync=off");
    case OP_RESIDUAL_ADD: return "residual: x + body(x)";
    case OP_LOSS: return arena_printf(a, "loss %s", loss_words[n->loss]);
    case OP_INPUT:
    case OP_GLOBAL_AVGPOOL:
    case OP_FLATTEN:
    case OP_RELU:
    case OP_SIGMOID:
    case OP_TANH:
    case OP_LOG_SOFTMAX:
    case OP_COUNT: break; /* the word says it all */
    }
    return n->kind_word;
}

void summary_print(FILE *out, const Net *net, LayoutRequest layout)
{
    Arena a = {0};
    int wname = 5, wop = 2, wshape = 6, wparams = 6;
    for (int i = 0; i < net->n_nodes; i++) {
        const Node *n = &net->nodes[i];
        int len = (int)strlen(n->name) + 2 * n->depth;
        wname = len > wname ? len : wname;
        len = (int)strlen(describe(&a, n));
        wop = len > wop ? len : wop;
        len = (int)strlen(shape_str(&a, n->out_shape));
        wshape = len > wshape ? len : wshape;
        len = (int)strlen(summary_grouped(&a, n->params));
        wparams = len > wparams ? len : wparams;
    }
    int total_len = (int)strlen(summary_grouped(&a, net->total_params));
    wparams = total_len > wparams ? total_len : wparams;

    fprintf(out, "net %s (%s)\n\n", net->name, net->file);
    fprintf(out, "%-*s  %-*s  %-*s  %*s  %9s\n", wname, "layer", wop, "op", wshape, "output", wparams, "params",
            "MFLOPs");
    int64_t activations = 0;
    for (int i = 0; i < net->n_nodes; i++) {
        const Node *n = &net->nodes[i];
        fprintf(out, "%*s%-*s  %-*s  %-*s  %*s  %9.2f\n", 2 * n->depth, "", wname - 2 * n->depth, n->name, wop,
                describe(&a, n), wshape, shape_str(&a, n->out_shape), wparams, summary_grouped(&a, n->params),
                (double)n->flops / 1e6);
        OpOutput o = op_facts(n->op)->output;
        if (o == OUT_NEW || o == OUT_DATA) /* not a view, not the loss */
            activations = checked_add(activations, shape_numel(n->out_shape));
    }
    fprintf(out, "%-*s  %-*s  %-*s  %*s  %9.2f\n\n", wname, "total", wop, "", wshape, "", wparams,
            summary_grouped(&a, net->total_params), (double)net->total_flops / 1e6);

    fprintf(out, "parameters:   %s trainable (%.2f MB as float32)", summary_grouped(&a, net->total_params),
            (double)net->total_params * 4 / (1024.0 * 1024.0));
    if (net->total_buffers)
        fprintf(out, ", %s in buffers (running statistics)", summary_grouped(&a, net->total_buffers));
    fprintf(out, "\nforward:      %.2f MFLOPs per sample (a multiply-add counts as 2)\n",
            (double)net->total_flops / 1e6);
    fprintf(out, "activations:  %s values per sample\n", summary_grouped(&a, activations));

    const TrainConfig *t = &net->train;
    static const char *const opt[] = {"sgd", "adam", "adamw"};
    /* both figures: the world size is the run's, so one of them is a rule */
    if (t->batch_global)
        fprintf(out, "training:     batch %lld global (%lld / the world size per rank), %lld epochs, %s lr=%g",
                (long long)t->batch, (long long)t->batch, (long long)t->epochs, opt[t->optimizer], t->lr);
    else
        fprintf(out, "training:     batch %lld per rank (global: %lld x the world size), %lld epochs, %s lr=%g",
                (long long)t->batch, (long long)t->batch, (long long)t->epochs, opt[t->optimizer], t->lr);
    if (t->optimizer == OPT_SGD) {
        if (t->momentum)
            fprintf(out, " momentum=%g", t->momentum);
        if (t->dampening)
            fprintf(out, " dampening=%g", t->dampening);
        if (t->nesterov)
            fprintf(out, " nesterov");
    } else
        fprintf(out, " betas=%g,%g eps=%g", t->beta1, t->beta2, t->eps);
    if (t->weight_decay)
        fprintf(out, " weight_decay=%g", t->weight_decay);
    if (t->schedule == SCHED_STEP)
        fprintf(out, ", schedule step every=%lld gamma=%g", (long long)t->step_every, t->gamma);
    else if (t->schedule == SCHED_COSINE)
        fprintf(out, ", schedule cosine warmup=%lld", (long long)t->warmup);
    fprintf(out, ", bucket %.6g MB, seed %llu, precision %s\n", (double)t->bucket_cap_bytes / (1024.0 * 1024.0),
            (unsigned long long)t->seed, ddp_precision_name(t->precision));
    plan_layout_summary(out, net, layout);
    data_summary(out, &net->data);
    arena_free(&a);
}
