/*
 * layers.c: what each layer word means.
 *
 * One table row per word of the language (layer_kinds below) and one check
 * function per kind. A check reads the statement's arguments into the node,
 * reporting each bad one at its own span, and, when the input shape is known,
 * checks it, sets the output shape, adds the parameters (PyTorch's shapes and
 * names) and counts forward FLOPs per sample (a multiply-add counts 2; an
 * elementwise op counts 1 per element).
 *
 * Conventions follow PyTorch's modules, so that `ddpc --emit torch` writes the
 * same net: Conv2d's output size floor((H + 2p - k) / s) + 1, MaxPool2d's
 * stride defaulting to its window, BatchNorm's eps 1e-5 and momentum 0.1,
 * LeakyReLU's slope 0.01.
 */
#include "ddpc.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_SIZE = 1 << 30 }; /* any one channel count, kernel or stride */

/* How the layer that feeds N is named in a message: "flatten gives 1024 (64x4x4)". */
static const char *feeder(Sema *s, const Node *n, const char **detail)
{
    const Net *net = s->net;
    *detail = "";
    for (const Node *p = n - 1; p >= net->nodes; p--) {
        if (p->out != n->in)
            continue;
        if (p->op == OP_FLATTEN && p->in_shape.rank == 3)
            *detail = arena_printf(s->arena, " (%s)", shape_str(s->arena, p->in_shape));
        else if (p->out_shape.rank == 3)
            *detail = arena_printf(s->arena, " (%s)", shape_str(s->arena, p->out_shape));
        return p->labeled ? p->name : p->kind_word;
    }
    return "the layer above";
}

static bool need_rank(Sema *s, const Stmt *st, Node *n, int rank)
{
    if (n->in_shape.rank == 0)
        return false; /* unknown: already reported */
    if (n->in_shape.rank == rank)
        return true;
    const char *detail;
    const char *from = feeder(s, n, &detail);
    if (rank == 1)
        diag_at(s->diag, SEV_ERROR, st->word_loc, "%s needs a flat input, but %s gives %s; add 'flatten' before it",
                st->word, from, shape_str(s->arena, n->in_shape));
    else
        diag_at(s->diag, SEV_ERROR, st->word_loc, "%s needs a CxHxW input, but %s gives %s features", st->word, from,
                shape_str(s->arena, n->in_shape));
    return false;
}

/* Reads `kN` (a positional word) or `k=N` / `kernel=N` into *OUT. */
static bool size_option(Sema *s, const Stmt *st, char letter, const char *long_key, int64_t lo, int64_t *out)
{
    bool found = false;
    for (Arg *a = st->args; a; a = a->next) {
        bool is_short = !a->key && a->val->kind == VAL_WORD && a->val->text[0] == letter &&
                        a->val->text[1] >= '0' && a->val->text[1] <= '9' &&
                        strspn(a->val->text + 1, "0123456789") == strlen(a->val->text + 1);
        bool is_key = a->key && !a->used && (strcmp(a->key, long_key) == 0 || (a->key[0] == letter && !a->key[1]));
        if (!is_short && !is_key)
            continue;
        a->used = true;
        if (found) {
            diag_at(s->diag, SEV_ERROR, a->loc, "%s given twice", long_key);
            continue;
        }
        found = true;
        if (is_short) {
            char *end;
            long long v = strtoll(a->val->text + 1, &end, 10);
            if (v < lo || v > MAX_SIZE)
                diag_at(s->diag, SEV_ERROR, a->loc, "%s must be between %lld and %d, not %s", long_key,
                        (long long)lo, MAX_SIZE, diag_quote(s->arena, a->val->text + 1));
            else
                *out = v;
        } else
            sema_value_int(s, a->val, long_key, lo, MAX_SIZE, out);
    }
    return found;
}

/* A bare positional word such as `nobias`, or `bias=false`. Returns the
 * option's value, DEFAULT when absent. */
static bool flag_option(Sema *s, const Stmt *st, const char *negative_word, const char *key, bool dflt)
{
    bool value = dflt;
    for (Arg *a = st->args; a; a = a->next) {
        if (!a->key && a->val->kind == VAL_WORD && strcmp(a->val->text, negative_word) == 0) {
            a->used = true;
            value = false;
        }
    }
    Arg *a = sema_take_key(s, st, key);
    if (a)
        sema_value_bool(s, a, &value);
    return value;
}

/* The channel or feature count: `in->out` (in checked) or `out`. */
static Arg *channels(Sema *s, const Stmt *st, int64_t *in, int64_t *out)
{
    *in = -1;
    *out = -1;
    for (Arg *a = st->args; a; a = a->next) {
        if (a->key || a->used || (a->val->kind != VAL_ARROW && a->val->kind != VAL_INT))
            continue;
        a->used = true;
        const Value *v = a->val;
        int64_t vin = v->kind == VAL_ARROW ? v->dims[0] : -1, vout = v->kind == VAL_ARROW ? v->dims[1] : v->i;
        if (v->overflow || vout < 1 || vout > MAX_SIZE || (v->kind == VAL_ARROW && (vin < 1 || vin > MAX_SIZE))) {
            diag_at(s->diag, SEV_ERROR, a->loc, "%s sizes must be between 1 and %d, not %s", st->word, MAX_SIZE,
                    diag_quote(s->arena, v->text));
            return a;
        }
        *in = vin;
        *out = vout;
        return a;
    }
    return NULL;
}

static void check_in_count(Sema *s, const Stmt *st, Node *n, const Arg *arg, int64_t written, int64_t actual,
                           const char *unit)
{
    if (written < 0 || written == actual) {
        n->in_ch = actual;
        return;
    }
    const char *detail;
    const char *from = feeder(s, n, &detail);
    diag_at(s->diag, SEV_ERROR, arg->loc, "%s expects %lld input %s, but %s gives %lld%s", st->word,
            (long long)written, unit, from, (long long)actual, detail);
}

static const char *const conv_keys[] = {"k", "s", "p", "kernel", "stride", "pad", "groups", "bias", "nobias"};

static void check_conv(Sema *s, const Stmt *st, Node *n)
{
    int64_t in, out;
    Arg *ch = channels(s, st, &in, &out);
    n->kernel = -1;
    n->stride = 1;
    n->pad = 0;
    n->groups = 1;
    const bool kernel_given = size_option(s, st, 'k', "kernel", 1, &n->kernel);
    size_option(s, st, 's', "stride", 1, &n->stride);
    bool same = false;
    Arg *p = sema_take_key(s, st, "p");
    if (p && p->val->kind == VAL_WORD && strcmp(p->val->text, "same") == 0)
        same = true;
    else if (p)
        p->used = false; /* a number: size_option reads it */
    size_option(s, st, 'p', "pad", 0, &n->pad);
    Arg *g = sema_take_key(s, st, "groups");
    if (g)
        sema_value_int(s, g->val, "groups", 1, MAX_SIZE, &n->groups);
    n->bias = flag_option(s, st, "nobias", "bias", true);
    sema_report_unused(s, st, conv_keys, 9);

    if (!ch) {
        diag_at(s->diag, SEV_ERROR, st->word_loc, "conv needs its channel counts: 'conv IN->OUT kN' or 'conv OUT kN'");
        return;
    }
    if (out < 0)
        return;
    n->out_ch = out;
    if (n->kernel < 0) { /* one given but refused (k0) has had its message */
        if (!kernel_given)
            diag_at(s->diag, SEV_ERROR, st->loc, "conv needs a kernel size, e.g. 'k3'");
        return;
    }
    if (same) {
        if (n->stride != 1 || n->kernel % 2 == 0) {
            diag_at(s->diag, SEV_ERROR, p->loc, "p=same needs stride 1 and an odd kernel (as PyTorch's padding='same' here)");
            return;
        }
        n->pad = (n->kernel - 1) / 2;
    }
    if (!need_rank(s, st, n, 3))
        return;
    check_in_count(s, st, n, ch, in, n->in_shape.d[0], "channels");
    if (n->in_ch != n->in_shape.d[0])
        return;
    if (n->in_ch % n->groups || n->out_ch % n->groups) {
        diag_at(s->diag, SEV_ERROR, g ? g->loc : st->loc, "groups=%lld must divide both %lld input and %lld output channels",
                (long long)n->groups, (long long)n->in_ch, (long long)n->out_ch);
        return;
    }
    int64_t h = n->in_shape.d[1] + 2 * n->pad, w = n->in_shape.d[2] + 2 * n->pad;
    if (h < n->kernel || w < n->kernel) {
        diag_at(s->diag, SEV_ERROR, st->loc, "kernel %lld does not fit the %lldx%lld input (padding %lld)",
                (long long)n->kernel, (long long)n->in_shape.d[1], (long long)n->in_shape.d[2], (long long)n->pad);
        return;
    }
    n->out_shape = (Shape){3, {n->out_ch, (h - n->kernel) / n->stride + 1, (w - n->kernel) / n->stride + 1}};
    int64_t per_out = checked_mul(checked_mul(n->in_ch / n->groups, n->kernel), n->kernel);
    int64_t wshape[4] = {n->out_ch, n->in_ch / n->groups, n->kernel, n->kernel};
    sema_add_param(s, n, PARAM_WEIGHT, 4, wshape);
    if (n->bias)
        sema_add_param(s, n, PARAM_BIAS, 1, &n->out_ch);
    int64_t outs = shape_numel(n->out_shape);
    n->flops = checked_add(checked_mul(checked_mul(2, per_out), outs), n->bias ? outs : 0);
}

static const char *const pool_keys[] = {"k", "s", "p", "kernel", "stride", "pad"};

/* maxpool 2 | maxpool k3 s2 p1: window, stride (default: the window), padding. */
static void check_pool(Sema *s, const Stmt *st, Node *n)
{
    n->kernel = -1;
    n->pad = 0;
    Arg *win = NULL;
    for (Arg *a = st->args; a; a = a->next)
        if (!a->key && a->val->kind == VAL_INT) {
            win = a;
            a->used = true;
            sema_value_int(s, a->val, "the pooling window", 1, MAX_SIZE, &n->kernel);
            break;
        }
    const bool k_given = size_option(s, st, 'k', "kernel", 1, &n->kernel);
    if (k_given && win)
        diag_at(s->diag, SEV_ERROR, win->loc, "window given twice");
    n->stride = n->kernel;
    size_option(s, st, 's', "stride", 1, &n->stride);
    size_option(s, st, 'p', "pad", 0, &n->pad);
    sema_report_unused(s, st, pool_keys, 6);
    if (n->kernel < 0) { /* one given but refused (k0, maxpool 0) has had its message */
        if (!win && !k_given)
            diag_at(s->diag, SEV_ERROR, st->word_loc, "%s needs a window, e.g. '%s 2'", st->word, st->word);
        return;
    }
    if (n->stride < 0)
        n->stride = n->kernel;
    if (2 * n->pad > n->kernel) {
        diag_at(s->diag, SEV_ERROR, st->loc, "padding %lld is more than half the window %lld", (long long)n->pad,
                (long long)n->kernel);
        return;
    }
    if (!need_rank(s, st, n, 3))
        return;
    int64_t h = n->in_shape.d[1] + 2 * n->pad, w = n->in_shape.d[2] + 2 * n->pad;
    if (h < n->kernel || w < n->kernel) {
        diag_at(s->diag, SEV_ERROR, st->loc, "window %lld does not fit the %lldx%lld input", (long long)n->kernel,
                (long long)n->in_shape.d[1], (long long)n->in_shape.d[2]);
        return;
    }
    n->out_shape = (Shape){3, {n->in_shape.d[0], (h - n->kernel) / n->stride + 1, (w - n->kernel) / n->stride + 1}};
    n->flops = checked_mul(shape_numel(n->out_shape), checked_mul(n->kernel, n->kernel));
}

static void check_global_avgpool(Sema *s, const Stmt *st, Node *n)
{
    sema_report_unused(s, st, NULL, 0);
    if (!need_rank(s, st, n, 3))
        return;
    n->out_shape = (Shape){1, {n->in_shape.d[0], 0, 0}};
    n->flops = shape_numel(n->in_shape);
}

static const char *const linear_keys[] = {"bias", "nobias"};

static void check_linear(Sema *s, const Stmt *st, Node *n)
{
    int64_t in, out;
    Arg *ch = channels(s, st, &in, &out);
    n->bias = flag_option(s, st, "nobias", "bias", true);
    sema_report_unused(s, st, linear_keys, 2);
    if (!ch) {
        diag_at(s->diag, SEV_ERROR, st->word_loc, "linear needs its feature counts: 'linear IN->OUT' or 'linear OUT'");
        return;
    }
    if (out < 0)
        return;
    n->out_ch = out;
    if (!need_rank(s, st, n, 1))
        return;
    check_in_count(s, st, n, ch, in, n->in_shape.d[0], "features");
    if (n->in_ch != n->in_shape.d[0])
        return;
    n->out_shape = (Shape){1, {n->out_ch, 0, 0}};
    int64_t wshape[2] = {n->out_ch, n->in_ch};
    sema_add_param(s, n, PARAM_WEIGHT, 2, wshape);
    if (n->bias)
        sema_add_param(s, n, PARAM_BIAS, 1, &n->out_ch);
    n->flops = checked_add(checked_mul(2, checked_mul(n->in_ch, n->out_ch)), n->bias ? n->out_ch : 0);
}

static void check_flatten(Sema *s, const Stmt *st, Node *n)
{
    sema_report_unused(s, st, NULL, 0);
    if (n->in_shape.rank)
        n->out_shape = (Shape){1, {shape_numel(n->in_shape), 0, 0}};
}

/* Elementwise, shape-preserving: FLOPs one per element. */
static void same_shape(Node *n)
{
    n->out_shape = n->in_shape;
    if (n->in_shape.rank)
        n->flops = shape_numel(n->in_shape);
}

static void check_activation(Sema *s, const Stmt *st, Node *n)
{
    sema_report_unused(s, st, NULL, 0);
    same_shape(n);
}

static const char *const slope_keys[] = {"slope"};

static void check_leaky_relu(Sema *s, const Stmt *st, Node *n)
{
    n->slope = 0.01;
    Arg *a = sema_take_key(s, st, "slope");
    if (!a)
        a = sema_take_positional(s, st);
    if (a)
        sema_value_real(s, a->val, "slope", -1e6, 1e6, &n->slope);
    sema_report_unused(s, st, slope_keys, 1);
    same_shape(n);
}

static const char *const gelu_keys[] = {"approximate"};

static void check_gelu(Sema *s, const Stmt *st, Node *n)
{
    Arg *a = sema_take_key(s, st, "approximate");
    if (a) {
        if (strcmp(a->val->text, "tanh") == 0)
            n->gelu_tanh = true;
        else if (strcmp(a->val->text, "none") != 0)
            diag_at(s->diag, SEV_ERROR, a->val->loc, "approximate must be 'none' or 'tanh', not '%s'",
                    diag_quote(s->arena, a->val->text));
    }
    sema_report_unused(s, st, gelu_keys, 1);
    same_shape(n);
}

static const char *const dropout_keys[] = {"p"};

static void check_dropout(Sema *s, const Stmt *st, Node *n)
{
    n->p = 0.5;
    Arg *a = sema_take_key(s, st, "p");
    if (!a)
        a = sema_take_positional(s, st);
    if (a && sema_value_real(s, a->val, "the dropout probability", 0, 1, &n->p) && n->p >= 1) {
        diag_at(s->diag, SEV_ERROR, a->val->loc, "a dropout probability of 1 drops everything; use a value below 1");
        n->p = 0.5;
    }
    sema_report_unused(s, st, dropout_keys, 1);
    same_shape(n);
}

static const char *const batchnorm_keys[] = {"eps", "momentum", "sync"};

static void check_batchnorm(Sema *s, const Stmt *st, Node *n)
{
    n->eps = 1e-5;
    n->momentum = 0.1;
    n->sync = true;
    Arg *a;
    if ((a = sema_take_key(s, st, "eps")))
        sema_value_real(s, a->val, "eps", 1e-30, 1, &n->eps);
    if ((a = sema_take_key(s, st, "momentum")))
        sema_value_real(s, a->val, "momentum", 0, 1, &n->momentum);
    if ((a = sema_take_key(s, st, "sync")))
        sema_value_bool(s, a, &n->sync);
    /* `batchnorm 64` may state the channel count, checked like conv's. */
    Arg *ch = NULL;
    int64_t in = -1, out = -1;
    if (st->args && !st->args->key && st->args->val->kind == VAL_INT)
        ch = channels(s, st, &in, &out);
    sema_report_unused(s, st, batchnorm_keys, 3);
    if (n->in_shape.rank == 0)
        return;
    int64_t c = n->in_shape.d[0];
    if (ch && out != c) {
        const char *detail;
        const char *from = feeder(s, n, &detail);
        diag_at(s->diag, SEV_ERROR, ch->loc, "batchnorm expects %lld channels, but %s gives %lld%s", (long long)out,
                from, (long long)c, detail);
        return;
    }
    n->in_ch = n->out_ch = c;
    same_shape(n);
    n->flops = checked_mul(2, shape_numel(n->in_shape));
    sema_add_param(s, n, PARAM_WEIGHT, 1, &c);
    sema_add_param(s, n, PARAM_BIAS, 1, &c);
    sema_add_param(s, n, PARAM_RUNNING_MEAN, 1, &c);
    sema_add_param(s, n, PARAM_RUNNING_VAR, 1, &c);
    sema_add_param(s, n, PARAM_NUM_BATCHES_TRACKED, 0, NULL);
}

static void check_log_softmax(Sema *s, const Stmt *st, Node *n)
{
    sema_report_unused(s, st, NULL, 0);
    if (!need_rank(s, st, n, 1))
        return;
    same_shape(n);
    n->flops = checked_mul(3, shape_numel(n->in_shape));
}

static void check_loss(Sema *s, const Stmt *st, Node *n)
{
    Arg *a = sema_take_positional(s, st);
    n->loss = LOSS_CROSS_ENTROPY;
    if (!a)
        diag_at(s->diag, SEV_ERROR, st->word_loc, "loss needs a kind: cross_entropy, nll or mse");
    else {
        int k = -1;
        for (int i = 0; i < LOSS_KINDS; i++)
            if (a->val->kind == VAL_WORD && strcmp(a->val->text, loss_words[i]) == 0)
                k = i;
        const char *near = a->val->kind == VAL_WORD ? ddp_suggest_nearest(a->val->text, loss_words, LOSS_KINDS) : NULL;
        if (k >= 0)
            n->loss = (LossKind)k;
        else if (near)
            diag_at(s->diag, SEV_ERROR, a->loc, "unknown loss '%s'; did you mean '%s'?", diag_quote(s->arena, a->val->text), near);
        else
            diag_at(s->diag, SEV_ERROR, a->loc, "unknown loss '%s'; expected cross_entropy, nll or mse",
                    diag_quote(s->arena, a->val->text));
    }
    sema_report_unused(s, st, NULL, 0);

    /* Likely mistakes around the loss, worth a warning. */
    const Node *prev = n > s->net->nodes && n[-1].out == n->in ? &n[-1] : NULL;
    if (prev && prev->op == OP_DROPOUT)
        diag_at(s->diag, SEV_WARNING, prev->loc, "dropout right before the loss drops class scores at random");
    if (prev && prev->op == OP_LOG_SOFTMAX && n->loss == LOSS_CROSS_ENTROPY)
        diag_at(s->diag, SEV_WARNING, prev->loc,
                "cross_entropy applies log_softmax itself; this one makes it twice (use 'loss nll' after log_softmax)");
    if (n->loss == LOSS_NLL && (!prev || prev->op != OP_LOG_SOFTMAX))
        diag_at(s->diag, SEV_WARNING, st->loc, "nll expects log-probabilities; add log_softmax before it, or use cross_entropy");

    if (!need_rank(s, st, n, 1))
        return;
    n->out_shape = (Shape){1, {1, 0, 0}};
    n->flops = checked_mul(n->loss == LOSS_MSE ? 3 : 4, shape_numel(n->in_shape));
}

static const LayerKind layer_kinds[] = {
    {"conv", OP_CONV, "conv", check_conv},
    {"maxpool", OP_MAXPOOL, "maxpool", check_pool},
    {"avgpool", OP_AVGPOOL, "avgpool", check_pool},
    {"global_avgpool", OP_GLOBAL_AVGPOOL, "global_avgpool", check_global_avgpool},
    {"linear", OP_LINEAR, "linear", check_linear},
    {"flatten", OP_FLATTEN, "flatten", check_flatten},
    {"relu", OP_RELU, "relu", check_activation},
    {"leaky_relu", OP_LEAKY_RELU, "leaky_relu", check_leaky_relu},
    {"sigmoid", OP_SIGMOID, "sigmoid", check_activation},
    {"tanh", OP_TANH, "tanh", check_activation},
    {"gelu", OP_GELU, "gelu", check_gelu},
    {"dropout", OP_DROPOUT, "dropout", check_dropout},
    {"batchnorm", OP_BATCHNORM, "bn", check_batchnorm},
    {"log_softmax", OP_LOG_SOFTMAX, "log_softmax", check_log_softmax},
    {"loss", OP_LOSS, "loss", check_loss},
};

enum { N_LAYER_KINDS = DDPC_COUNT(layer_kinds) };

int layer_words(const char **out, int max)
{
    int n = 0;
    for (int i = 0; i < N_LAYER_KINDS && n < max; i++)
        out[n++] = layer_kinds[i].word;
    return n;
}

const LayerKind *layer_kind_find(const char *word)
{
    for (int i = 0; i < N_LAYER_KINDS; i++)
        if (strcmp(layer_kinds[i].word, word) == 0)
            return &layer_kinds[i];
    return NULL;
}
