/*
 * emit_cu.c: writes the generated program, OUT.cu.
 *
 * The file is meant to be read and tuned by a CUDA programmer, so it is laid
 * out as one would write it by hand:
 *
 *   the build line; in a channels-last program, a note on the layout;
 *   per layer, its kernels (forward, then backward), each named after the
 *   layer and the direction (linear1_bias_relu_backward, maxpool1_backward),
 *   as every name derived from a layer's, by gen_names.c, and
 *   preceded by the .net line it came from, and opening with its sizes as
 *   named constants (C, HW, S, K...) fixed at generation;
 *   the loss and optimizer kernels (K classes, P parameters);
 *   the arena table: each buffer's offset (conv1_out_at);
 *   forward(), train_step(), eval_step(), optimizer_step(): one kernel launch
 *   or library call per op, again under the .net line and ending in
 *   DDP_LAYER_DONE (DDP_DEBUG's check), over pointers named after the layer
 *   outputs they hold (conv1_out, d_conv1_out, conv1_weight);
 *   CHANNELS_LAST, the layout; plan_ops(), the parameter table, the DdpNet
 *   the runtime reads, and main().
 *
 * Every decision (fusion, places in memory, parameter order, the layout)
 * was made by plan.c; every shape by sema.c. This file only writes them
 * down. A channels-last program (Plan.channels_last) gets a channels-last
 * twin of every kernel that reads where a value's elements lie (pools,
 * batchnorm, per-channel sums, dropout's mask), adding the same terms in
 * the same order, so that on a CPU it takes the NCHW program's steps. The same
 * text compiles under nvcc and, through kernel.h, under a host compiler.
 */
#include "ddpc.h"

#include <ctype.h>   // toupper
#include <stdlib.h>
#include <string.h>

typedef struct {
    FILE *out;               /* where the current function's body goes */
    const Net *net;
    const Plan *plan;
    const char *file;        /* the .net file's base name, for comments */
    Arena *arena;
    /* what the current function uses, to declare just that */
    unsigned char *used_act, *used_grad, *used_param, *used_scratch;
    bool used_beta;
    /* what any function used: the arena table names just that */
    unsigned char *any_act, *any_grad, *any_scratch;
    /* looked up once, so that each layer's code is written in constant time */
    int *maker;              /* per value: the node whose output it is */
    /* the launch table (launch_table.c): each launch noted as it is written */
    LaunchTable *launches;
    const char *function;    /* the generated function being written: "forward" */
    LaunchWhen when;         /* in forward: training only, evaluation only, or both */
    /* per node: the inner-loop trips of one item of its forward and backward
     * kernels, set where each kernel's loops are written (1 where none) */
    int64_t *forward_work, *backward_work;
} Emit;

#define E(...) fprintf(e->out, __VA_ARGS__)

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* A float literal for X: 0.5f, 1.0f, 1e-05f. */
static const char *flit(Emit *e, double x)
{
    char *s = arena_printf(e->arena, "%.9g", x);
    return arena_printf(e->arena, "%s%sf", s, strpbrk(s, ".e") ? "" : ".0");
}

/* A double literal that reads back exactly, as short as it can be. */
static const char *dlit(Arena *a, double x)
{
    for (int digits = 6; digits < 17; digits++) {
        char *s = arena_printf(a, "%.*g", digits, x);
        if (strtod(s, NULL) == x)
            return arena_printf(a, "%s%s", s, strpbrk(s, ".e") ? "" : ".0");
    }
    return arena_printf(a, "%.17g", x);
}

static int64_t per_sample(const Emit *e, int v) { return shape_numel(e->net->values[v]); }

/* The node whose output is value V. */
static const Node *producer(const Emit *e, int v) { return &e->net->nodes[e->maker[v]]; }

/* The buffer of value V, or of its GRADIENT: conv1_out, d_conv1_out (its
 * offset in the arena table: conv1_out_at). */
static const char *buffer_name(Emit *e, int v, bool gradient)
{
    return gen_name_buffer(e->arena, producer(e, v), gradient);
}

/* Scratch K of node I: maxpool1_argmax. */
static const char *scratch_name(Emit *e, int i, int k)
{
    return gen_name_scratch(e->arena, &e->net->nodes[i], k);
}

static const char *act(Emit *e, int v)
{
    /* the data, or a flatten of it: the same floats (but for the data's
     * channels-last copy, input_out) */
    if (e->plan->is_data[v] && !(v == 0 && e->plan->input_permuted))
        return "ctx->x";
    e->used_act[v] = 1;
    return buffer_name(e, v, false);
}

static const char *grad(Emit *e, int v)
{
    e->used_grad[v] = 1;
    return buffer_name(e, v, true);
}

/* conv1.weight -> conv1_weight */
static const char *param_name(Emit *e, int i, bool gradient)
{
    const Param *p = &e->net->params[i];
    return gen_name_param(e->arena, &e->net->nodes[p->node], p->role, gradient);
}

static const char *param(Emit *e, int i) { e->used_param[i] |= 1; return param_name(e, i, false); }
static const char *dparam(Emit *e, int i) { e->used_param[i] |= 2; return param_name(e, i, true); }

static int node_param(const Emit *e, const Node *n, ParamRole role)
{
    for (int k = 0; k < n->n_params; k++)
        if (e->net->params[n->first_param + k].role == role)
            return n->first_param + k;
    return -1;
}

static const char *scratch(Emit *e, const Node *n, int which)
{
    int idx = (int)(n - e->net->nodes);
    e->used_scratch[idx] |= (unsigned char)(1 << which);
    return scratch_name(e, idx, which);
}

/* "// mnist.net:4: conv 1->32 k5" (and the fused activation's line) */
static void comment_pass(Emit *e, const Node *n, const char *indent, bool backward)
{
    const NodePlan *np = &e->plan->nodes[n - e->net->nodes];
    E("%s// %s:%d: %s", indent, e->file, n->line, n->text);
    if (np->fused_act >= 0) {
        const Node *a = &e->net->nodes[np->fused_act];
        E(", with %s:%d: %s", e->file, a->line, a->text);
        if (backward && np->mask_in_pool >= 0)
            E(" (its mask in %s's backward)", e->net->nodes[np->mask_in_pool].name);
    }
    E("\n");
}

static void comment(Emit *e, const Node *n, const char *indent)
{
    comment_pass(e, n, indent, false);
}

//
// Activation formulas, shared by fused and standalone kernels
//

/* y = f(v). A NaN passes each, as in PyTorch: relu keeps what is not below
 * 0 (v > 0 ? v : 0 would make a NaN 0, and hide a diverged run behind a
 * finite loss) */
static const char *act_forward_expr(Emit *e, const Node *a, const char *v)
{
    switch (a->op) {
    case OP_RELU: return arena_printf(e->arena, "%s < 0.0f ? 0.0f : %s", v, v);
    case OP_LEAKY_RELU: return arena_printf(e->arena, "%s > 0.0f ? %s : %s * %s", v, v, flit(e, a->slope), v);
    case OP_SIGMOID: return arena_printf(e->arena, "1.0f / (1.0f + ddp_expf(-%s))", v);
    case OP_TANH: return arena_printf(e->arena, "ddp_tanhf(%s)", v);
    case OP_GELU:
        if (a->gelu_tanh)
            return arena_printf(e->arena, "0.5f * %s * (1.0f + ddp_tanhf(0.7978845608f * (%s + 0.044715f * %s * %s * %s)))", v,
                                v, v, v, v);
        return arena_printf(e->arena, "0.5f * %s * (1.0f + ddp_erff(%s * 0.70710678f))", v, v);
    case OP_INPUT:
    case OP_CONV:
    case OP_MAXPOOL:
    case OP_AVGPOOL:
    case OP_GLOBAL_AVGPOOL:
    case OP_LINEAR:
    case OP_FLATTEN:
    case OP_DROPOUT:
    case OP_BATCHNORM:
    case OP_RESIDUAL_ADD:
    case OP_LOG_SOFTMAX:
    case OP_LOSS:
    case OP_COUNT: break; /* not activations */
    }
    return v;
}

/* d input from d output G and the saved value S (the output y, or for
 * gelu and non-positive leaky slopes the input x) */
static const char *act_backward_expr(Emit *e, const Node *a, const char *g, const char *s)
{
    switch (a->op) {
    case OP_RELU: return arena_printf(e->arena, "%s <= 0.0f ? 0.0f : %s", s, g); /* NaN: passed on, as PyTorch's */
    case OP_LEAKY_RELU: return arena_printf(e->arena, "%s > 0.0f ? %s : %s * %s", s, g, flit(e, a->slope), g);
    case OP_SIGMOID: return arena_printf(e->arena, "%s * %s * (1.0f - %s)", g, s, s);
    case OP_TANH: return arena_printf(e->arena, "%s * (1.0f - %s * %s)", g, s, s);
    case OP_GELU:
        if (a->gelu_tanh)
            return arena_printf(e->arena,
                                "%s * ddp_gelu_tanh_grad(%s)", g, s);
        return arena_printf(e->arena, "%s * (0.5f * (1.0f + ddp_erff(%s * 0.70710678f)) + %s * 0.39894228f * ddp_expf(-0.5f * %s * %s))",
                            g, s, s, s, s);
    case OP_INPUT:
    case OP_CONV:
    case OP_MAXPOOL:
    case OP_AVGPOOL:
    case OP_GLOBAL_AVGPOOL:
    case OP_LINEAR:
    case OP_FLATTEN:
    case OP_DROPOUT:
    case OP_BATCHNORM:
    case OP_RESIDUAL_ADD:
    case OP_LOG_SOFTMAX:
    case OP_LOSS:
    case OP_COUNT: break; /* not activations */
    }
    return g;
}

//
// Kernels
//

/* Dimensions of a CxHxW (or F: C=F, H=W=1) per-sample shape. */
static void chw(Shape s, int64_t *c, int64_t *h, int64_t *w)
{
    *c = s.d[0];
    *h = s.rank == 3 ? s.d[1] : 1;
    *w = s.rank == 3 ? s.d[2] : 1;
}

/* The pixels of a channel's plane in a CxHxW (or F) per-sample shape: what a
 * per-channel sum runs over in each sample (DDP_LAUNCH_CHANNELS's HW). */
static int64_t plane_pixels(Shape s)
{
    int64_t c, h, w;
    chw(s, &c, &h, &w);
    return h * w;
}

/* Whether a value of per-sample shape S is stored channels-last: each
 * sample H x W x C, element i of a batch channel i % C of pixel i / C
 * (ddpc.h: Plan.channels_last). A rank-1 value is the same floats either
 * way, and keeps the NCHW kernels. */
static bool channels_last(const Emit *e, Shape s)
{
    return e->plan->channels_last && s.rank == 3;
}

/* Element j of channel c of sample s, in a per-channel sum's loops
 * (DDP_FOR_CHANNELS, DDP_FOR_SAMPLES, DDP_FOR_PIXELS): the same terms in the
 * same order in either layout, so the same sums. */
static const char *element_of(const Emit *e, Shape s)
{
    return channels_last(e, s) ? "((int64_t)s * HW + j) * C + c" : "((int64_t)s * C + c) * HW + j";
}

/* The end of a line that indexes a value of shape S: a note where it is
 * channels-last. */
static const char *layout_note(const Emit *e, Shape s)
{
    return channels_last(e, s) ? "  // channels-last" : "";
}

/* A kernel's first line naming the sizes its text uses: C channels of HW
 * pixels (plane_constants), or S values a sample (sample_constant). */
static void plane_constants(Emit *e, int64_t c, int64_t hw)
{
    E("    const int64_t C = %lld, HW = %lld;  // channels, pixels of a plane\n", (long long)c, (long long)hw);
}

static void sample_constant(Emit *e, int64_t s)
{
    E("    const int64_t S = %lld;  // values of a sample\n", (long long)s);
}

/* Whether N's backward computes its input's gradient (dx): the input
 * carries one (plan.c: not the data, nor a value before the first trainable
 * parameter), in storage of its own rather than its output's. A layer's
 * backward kernel is emitted only where it is launched. */
static bool computes_dx(const Emit *e, const Node *n)
{
    const Plan *p = e->plan;
    return n->in > 0 && p->grad[n->in] >= 0 && p->grad[n->in] != p->grad[n->out];
}

/* Whether a residual join's backward runs: for its body's gradient or its
 * skip's. */
static bool residual_backward_runs(const Emit *e, const Node *n)
{
    return computes_dx(e, n) || (n->skip > 0 && e->plan->grad[n->skip] >= 0);
}

static const Node *fused_act(const Emit *e, const Node *n)
{
    int a = e->plan->nodes[n - e->net->nodes].fused_act;
    return a >= 0 ? &e->net->nodes[a] : NULL;
}

/* The fused activation whose mask N's backward applies: none where a maxpool
 * applies it (plan_fusion: mask_in_pool). */
static const Node *backward_act(const Emit *e, const Node *n)
{
    return e->plan->nodes[n - e->net->nodes].mask_in_pool >= 0 ? NULL : fused_act(e, n);
}

/* Whether N's forward adds its bias and applies its fused activation inside
 * the library's call (ops.h: ddp_conv_forward_bias, ddp_linear_forward_bias,
 * cuDNN's and cuBLASLt's epilogues): a bias, then a relu or nothing. Other
 * activations keep a generated kernel after the product. */
static bool epilogue_in_library(const Emit *e, const Node *n)
{
    const Node *a = fused_act(e, n);
    return n->bias && (!a || a->op == OP_RELU);
}

/* Whether a generated kernel adds N's bias or applies its fused activation
 * after the product, in forward: kernels_conv_linear emits it exactly when
 * forward_node launches it. */
static bool forward_kernel_after_product(const Emit *e, const Node *n)
{
    return (n->bias || fused_act(e, n)) && !epilogue_in_library(e, n);
}

/* N's kernel for PASS (relu1_forward), or with WORD, one of its op row's
 * kernels, that one (bn1_sums_backward). */
static const char *kernel_name(Emit *e, const Node *n, const char *word, GenPass pass)
{
    return gen_name_kernel(e->arena, n, word, pass);
}

/* A conv/linear's kernel after its product, named after what it adds or
 * applies (conv1_bias_tanh_forward); A the activation it applies, or NULL. */
static const char *product_kernel(Emit *e, const Node *n, const Node *a, GenPass pass)
{
    return gen_name_product_kernel(e->arena, n, a ? a->kind_word : NULL, pass);
}

static void kernels_conv_linear(Emit *e, const Node *n)
{
    const Node *a = fused_act(e, n);
    int64_t c, h, w;
    chw(n->out_shape, &c, &h, &w);
    int64_t hw = h * w, s = c * hw;
    if (!n->bias && !a)
        return;
    bool last = channels_last(e, n->out_shape);
    if (forward_kernel_after_product(e, n)) {
        comment(e, n, "");
        E("DDP_KERNEL %s(int n, float *y%s)\n{\n",
          product_kernel(e, n, a, GEN_FORWARD), n->bias ? ", const float *bias" : "");
        if (last) { /* element by element: the bias's channel is the element's place in its pixel */
            if (n->bias)
                E("    const int64_t C = %lld, S = %lld;  // channels, values of a sample (channels-last)\n",
                  (long long)c, (long long)s);
            else
                sample_constant(e, s);
            E("    DDP_FOR(i, (int64_t)n * S) {\n");
        } else {
            plane_constants(e, c, hw);
            E("    DDP_FOR_2D(plane, (int64_t)n * C, j, HW) {\n");
            E("        int64_t i = plane * HW + j;\n");
        }
        if (n->bias)
            E("        float v = y[i] + bias[%s %% C];\n", last ? "i" : "plane");
        else
            E("        float v = y[i];\n");
        E("        y[i] = %s;\n    }\n}\n\n", a ? act_forward_expr(e, a, "v") : "v");
    }

    /* backward: the activation's mask here, unless a maxpool applies it */
    a = backward_act(e, n);
    const char *backward = product_kernel(e, n, a, GEN_BACKWARD);
    if (!n->bias && !a)
        return;
    comment_pass(e, n, "", true);
    if (n->bias) {
        /* a channel's bias gradient, summed over its samples in a fixed order
         * (channel_sum.h: DDP_FOR_CHANNELS); with an activation, turning dy
         * into the gradient before it on the way */
        E("DDP_KERNEL %s(int n, %sfloat *dy%s, DdpGrad *dbias, int accumulate)\n{\n", backward,
          a ? "" : "const ", a ? ", const float *y" : "");
        plane_constants(e, c, hw);
        E("    DDP_FOR_CHANNELS(c, C) {\n        DdpSum sum = ddp_sum_empty();\n");
        E("        DDP_FOR_SAMPLES(s, n, HW) {\n            double sample = 0.0;  // this sample's part (on a GPU, a thread's share of it)\n");
        E("            DDP_SIMD_SUM(sample)\n");
        E("            DDP_FOR_PIXELS(j, HW) {\n");
        E("                int64_t i = %s;%s\n", element_of(e, n->out_shape), layout_note(e, n->out_shape));
        if (a) {
            /* both loaded first: a select the compiler can vectorise, not a branch */
            E("                float d = dy[i], v = y[i];\n                float g = %s;\n",
              act_backward_expr(e, a, "d", "v"));
            E("                dy[i] = g;\n                sample += g;\n");
        } else
            E("                sample += dy[i];\n");
        E("            }\n            ddp_grad_sum_add(&sum, sample);\n        }\n");
        E("        if (DDP_CHANNEL_DONE(c, &sum, NULL)) {\n");
        E("            DdpSum total = ddp_grad_open(dbias + c, accumulate);\n");
        E("            ddp_sum_merge(&total, sum);\n            dbias[c] = ddp_grad_close(total);\n        }\n    }\n}\n\n");
    } else {
        E("DDP_KERNEL %s(int n, float *dy, const float *y)\n{\n", backward);
        sample_constant(e, s);
        E("    DDP_FOR(i, (int64_t)n * S)\n        dy[i] = %s;\n}\n\n", act_backward_expr(e, a, "dy[i]", "y[i]"));
    }
}

/* Pooling windows that tile the input: no overlap, no padding, nothing left over. */
static bool pool_tiles(const Node *n)
{
    return n->stride == n->kernel && n->pad == 0 && n->in_shape.d[1] % n->kernel == 0 &&
           n->in_shape.d[2] % n->kernel == 0;
}

/* The sizes a pooling kernel works with, as its first line: C planes of
 * H x W in, OH x OW out, a K x K window at stride ST with PAD; the kernel's
 * text then names them instead of repeating numbers. USED lists the ones it
 * names (space-separated, in the order above), since an unused constant is a
 * compiler warning. */
static void pool_constants(Emit *e, const Node *n, const char *used)
{
    int64_t c, h, w;
    chw(n->in_shape, &c, &h, &w);
    const struct {
        const char *name;
        int64_t value;
    } sizes[] = {{"C", c}, {"H", h}, {"W", w}, {"OH", n->out_shape.d[1]}, {"OW", n->out_shape.d[2]},
                 {"K", n->kernel}, {"ST", n->stride}, {"PAD", n->pad}};
    const size_t n_sizes = DDPC_COUNT(sizes);
    const char *sep = "    const int ";
    for (const char *u = used; *u;) {
        size_t len = strcspn(u, " "), i = 0;
        while (i < n_sizes && !(strlen(sizes[i].name) == len && strncmp(u, sizes[i].name, len) == 0))
            i++;
        if (i == n_sizes) { /* a misspelt name: the emitter's bug, caught here rather than by the C++ compiler */
            fprintf(stderr, "ddpc: internal error: pool_constants: an unknown size in '%s'\n", used);
            abort();
        }
        E("%s%s = %lld", sep, sizes[i].name, (long long)sizes[i].value);
        sep = ", ";
        u += len;
        u += *u == ' ';
    }
    E(";\n");
}

/* The forward of any window, stride and padding: bounds checked per tap;
 * LAST: on channels-last values, where a plane's pixels lie C floats apart. */
static void pool_forward_general(Emit *e, const Node *n, bool last)
{
    bool max = n->op == OP_MAXPOOL;
    pool_constants(e, n, "C H W OH OW K ST PAD");
    if (last) {
        E("    DDP_FOR(i, (int64_t)n * OH * OW * C) {  // y[i]: channel i %% C of pixel i / C, channels-last\n");
        E("        int64_t pixel = i / C, s = pixel / (OH * OW);\n");
        E("        int oy = (int)(pixel / OW %% OH), ox = (int)(pixel %% OW);\n");
        E("        const float *xp = x + s * (H * W * C) + i %% C;  // the sample's channel, a value every C floats\n");
    } else {
        E("    DDP_FOR(i, (int64_t)n * C * OH * OW) {\n");
        E("        int64_t plane = i / (OH * OW);\n");
        E("        int oy = (int)(i / OW %% OH), ox = (int)(i %% OW);\n");
        E("        const float *xp = x + plane * (H * W);\n");
    }
    const char *tap = last ? "xp[(int64_t)(iy * W + ix) * C]" : "xp[iy * W + ix]";
    if (max)
        E("        float best = -INFINITY;\n        int at = -1;\n");
    else
        E("        float sum = 0.0f;\n");
    E("        for (int ky = 0; ky < K; ky++) {\n");
    E("            int iy = oy * ST - PAD + ky;\n");
    E("            if (iy < 0 || iy >= H)\n                continue;\n");
    E("            for (int kx = 0; kx < K; kx++) {\n");
    E("                int ix = ox * ST - PAD + kx;\n");
    E("                if (ix < 0 || ix >= W)\n                    continue;\n");
    if (max)
        E("                float v = %s;\n                if (v > best || v != v || at < 0) {  // a NaN wins, as in PyTorch\n"
          "                    best = v;\n                    at = iy * W + ix;\n                }\n", tap);
    else
        E("                sum += %s;\n", tap);
    E("            }\n        }\n");
    if (max)
        E("        y[i] = best;\n        argmax[i] = at;\n    }\n}\n\n");
    else /* PyTorch's count_include_pad: always the full window */
        E("        y[i] = sum * %s;\n    }\n}\n\n", flit(e, 1.0 / (double)(n->kernel * n->kernel)));
}

/* The backward of any window, stride and padding: each input element
 * gathers from the windows covering it, so no atomics, one writer per
 * element, a fixed order. WINDOW_G: a window's gradient (kernels_pool's);
 * LAST: on channels-last values. */
static void pool_backward_gather(Emit *e, const Node *n, const char *window_g, bool last)
{
    bool max = n->op == OP_MAXPOOL;
    pool_constants(e, n, "C H W OH OW K ST PAD");
    if (last) {
        E("    DDP_FOR(i, (int64_t)n * H * W * C) {  // dx[i]: channel i %% C of pixel i / C, channels-last\n");
        E("        int64_t pixel = i / C, s = pixel / (H * W), c = i %% C;\n");
        E("        int iy = (int)(pixel / W %% H), ix = (int)(pixel %% W);\n");
    } else {
        E("    DDP_FOR(i, (int64_t)n * C * H * W) {\n");
        E("        int64_t plane = i / (H * W);\n");
        E("        int iy = (int)(i / W %% H), ix = (int)(i %% W);\n");
    }
    E("        // the windows that cover (iy, ix): rows y0..y1-1, columns x0..x1-1\n");
    E("        int y0 = iy + PAD < K ? 0 : (iy + PAD - K) / ST + 1;\n");
    E("        int y1 = (iy + PAD) / ST + 1 < OH ? (iy + PAD) / ST + 1 : OH;\n");
    E("        int x0 = ix + PAD < K ? 0 : (ix + PAD - K) / ST + 1;\n");
    E("        int x1 = (ix + PAD) / ST + 1 < OW ? (ix + PAD) / ST + 1 : OW;\n");
    E("        float g = 0.0f;\n");
    E("        for (int oy = y0; oy < y1; oy++)\n            for (int ox = x0; ox < x1; ox++) {\n");
    E("                int64_t o = %s;\n", last ? "((s * OH + oy) * OW + ox) * C + c" : "plane * (OH * OW) + oy * OW + ox");
    if (max)
        E("                if (argmax[o] == iy * W + ix)\n                    g += %s;\n", window_g);
    else
        E("                g += dy[o];\n");
    E("            }\n");
    if (!max)
        E("        g *= %s;\n", flit(e, 1.0 / (double)(n->kernel * n->kernel)));
    E("        dx[i] = accumulate ? dx[i] + g : g;\n    }\n}\n\n");
}

/* A pool's kernels on channels-last values: element by element, the
 * channel the element's place in its pixel. The same taps in the same
 * order as the NCHW kernels, so the same outputs and gradients; the
 * argmax is the winner's pixel, iy * W + ix, in every window. Backward
 * writes each input's gradient once: from the window that owns it where
 * windows tile, else gathered from the windows that cover it. The
 * window's gradient WINDOW_G and the relu mask's argument MASK_ARG are
 * kernels_pool's. */
static void pool_channels_last(Emit *e, const Node *n, const char *window_g, const char *mask_arg)
{
    bool max = n->op == OP_MAXPOOL;
    const char *scale = flit(e, 1.0 / (double)(n->kernel * n->kernel));
    comment(e, n, "");
    E("DDP_KERNEL %s(int n, const float *x, float *y%s)\n{\n",
      kernel_name(e, n, NULL, GEN_FORWARD), max ? ", int32_t *argmax" : "");
    pool_forward_general(e, n, true);
    if (!computes_dx(e, n))
        return;
    comment(e, n, "");
    E("DDP_KERNEL %s(int n, const float *dy%s%s, float *dx, int accumulate)\n{\n",
      kernel_name(e, n, NULL, GEN_BACKWARD), max ? ", const int32_t *argmax" : "", mask_arg);
    if (pool_tiles(n)) { /* each window owns its inputs: one writer per input */
        pool_constants(e, n, "C H W OH OW K");
        E("    DDP_FOR(o, (int64_t)n * OH * OW * C) {  // dy[o]: channel o %% C of pixel o / C, channels-last\n");
        E("        int64_t pixel = o / C, s = pixel / (OH * OW);\n");
        E("        int oy = (int)(pixel / OW %% OH), ox = (int)(pixel %% OW);\n");
        E("        float *dxc = dx + s * (H * W * C) + o %% C;\n");
        if (max)
            E("        float g = %s;\n        int won = argmax[o];  // the winner's pixel, iy * W + ix\n", window_g);
        else
            E("        float g = dy[o] * %s;\n", scale);
        E("        for (int ky = 0; ky < K; ky++)\n            for (int kx = 0; kx < K; kx++) {\n");
        E("                int at = (oy * K + ky) * W + ox * K + kx;\n");
        E("                float t = %s;\n", max ? "at == won ? g : 0.0f" : "g");
        E("                dxc[(int64_t)at * C] = accumulate ? dxc[(int64_t)at * C] + t : t;\n            }\n    }\n}\n\n");
        return;
    }
    pool_backward_gather(e, n, window_g, true);
}

static void kernels_pool(Emit *e, const Node *n)
{
    int64_t k = n->kernel, w = n->in_shape.d[2]; /* the unrolled taps' offsets */
    bool max = n->op == OP_MAXPOOL;
    int64_t covering = (k - 1) / n->stride + 1; /* the most windows along a side that cover one input */
    /* the relu before it, whose mask this backward applies (plan_fusion):
     * an input's gradient only where its window's max, y, is positive */
    int masks_for = e->plan->nodes[n - e->net->nodes].masks_for;
    const char *mask_arg = masks_for >= 0 ? ", const float *y" : "";
    const Node *relu = masks_for >= 0 ? &e->net->nodes[e->plan->nodes[masks_for].fused_act] : NULL;
    /* a window's gradient dy[o], or, masking, the relu's backward of it at y[o] */
    const char *window_g = relu ? arena_printf(e->arena, "(%s)", act_backward_expr(e, relu, "dy[o]", "y[o]")) : "dy[o]";
    e->forward_work[n - e->net->nodes] = k * k;
    e->backward_work[n - e->net->nodes] = pool_tiles(n) ? k * k : covering * covering;
    if (channels_last(e, n->in_shape)) {
        pool_channels_last(e, n, window_g, mask_arg);
        return;
    }
    comment(e, n, "");
    E("DDP_KERNEL %s(int n, const float *x, float *y%s)\n{\n",
      kernel_name(e, n, NULL, GEN_FORWARD), max ? ", int32_t *argmax" : "");
    if (pool_tiles(n)) { /* every window lies inside the input: no bounds to check */
        /* rows of windows: window row ROW of all planes starts at x + ROW * K * W */
        pool_constants(e, n, "C W OH OW K");
        E("    DDP_FOR_2D(row, (int64_t)n * C * OH, ox, OW) {\n");
        E("        int64_t i = row * OW + ox;\n");
        E("        const float *xp = x + row * (K * W) + ox * K;\n");
        if (max)
            E("        float best = xp[0];\n        int at = 0;\n");
        else
            E("        float sum = 0.0f;\n");
        E("        for (int ky = 0; ky < K; ky++)\n            for (int kx = 0; kx < K; kx++) {\n");
        if (max)
            /* selects, not branches: which tap wins is data, and a mispredicted
             * branch per tap costs more than the comparison. The argmax of a
             * tiling window is its tap number, ky * K + kx: small and the same
             * in every window, so backward compares it with constants. */
            E("                float v = xp[ky * W + kx];\n"
              "                int wins = v > best || v != v;  // a NaN wins, as in PyTorch\n"
              "                at = wins ? ky * K + kx : at;\n                best = wins ? v : best;\n");
        else
            E("                sum += xp[ky * W + kx];\n");
        E("            }\n");
        if (max)
            E("        y[i] = best;\n        argmax[i] = at;\n    }\n}\n\n");
        else
            E("        y[i] = sum * %s;\n    }\n}\n\n", flit(e, 1.0 / (double)(k * k)));
    } else
        pool_forward_general(e, n, false);
    if (!computes_dx(e, n))
        return;
    if (pool_tiles(n)) {
        /* Windows tile the input exactly: each output element owns its
         * window's inputs and writes them all, no other thread touches them.
         * Window row ROW of all planes covers K input rows from dx + ROW * K * W,
         * as in forward: the taps' addresses are affine in ox, so the CPU
         * compiler vectorises their stores (as interleaved vectors; with the
         * plane and row recomputed per item it scattered them, 10 times slower). */
        comment(e, n, "");
        E("DDP_KERNEL %s(int n, const float *dy%s%s, float *dx, int accumulate)\n{\n",
          kernel_name(e, n, NULL, GEN_BACKWARD), max ? ", const int32_t *argmax" : "", mask_arg);
        pool_constants(e, n, "C W OH OW K");
        E("    DDP_FOR_2D(row, (int64_t)n * C * OH, ox, OW) {\n");
        E("        int64_t o = row * OW + ox;\n");
        E("        float *dxp = dx + row * (K * W) + ox * K;  // the window's first tap\n");
        if (k <= 4) {
            /* the taps written out, no loop inside the item: the CPU compiler
             * then vectorises across ox (DDP_FOR_2D's inner loop) */
            if (relu)
                E("        float g = %s;  // and %s's mask: y, the max, is the winner's\n", window_g, relu->name);
            else
                E("        float g = dy[o]%s;\n", max ? "" : arena_printf(e->arena, " * %s", flit(e, 1.0 / (double)(k * k))));
            if (max) {
                E("        int won = argmax[o];  // the winning tap, ky * K + kx\n");
                for (long long tap = 0; tap < k * k; tap++)
                    E("        float g%lld = won == %lld ? g : 0.0f;\n", tap, tap);
            }
            /* one test of accumulate around plain stores: the compiler takes
             * it out of the loop, which then has no condition left */
            for (int add = 1; add >= 0; add--) {
                E(add ? "        if (accumulate) {\n" : "        } else {\n");
                for (int64_t ky = 0; ky < k; ky++)
                    for (int64_t kx = 0; kx < k; kx++) {
                        long long tap = (long long)(ky * k + kx), at = (long long)(ky * w + kx);
                        E("            dxp[%lld] %s= %s;\n", at, add ? "+" : "",
                          max ? arena_printf(e->arena, "g%lld", tap) : "g");
                    }
            }
            E("        }\n    }\n}\n\n");
            return;
        }
        E("        for (int ky = 0; ky < K; ky++)\n            for (int kx = 0; kx < K; kx++) {\n");
        E("                int64_t at = ky * W + kx;\n");
        if (max)
            E("                float g = ky * K + kx == argmax[o] ? %s : 0.0f;\n", window_g);
        else
            E("                float g = dy[o] * %s;\n", flit(e, 1.0 / (double)(k * k)));
        E("                dxp[at] = accumulate ? dxp[at] + g : g;\n            }\n    }\n}\n\n");
        return;
    }
    comment(e, n, "");
    E("DDP_KERNEL %s(int n, const float *dy%s%s, float *dx, int accumulate)\n{\n",
      kernel_name(e, n, NULL, GEN_BACKWARD), max ? ", const int32_t *argmax" : "", mask_arg);
    pool_backward_gather(e, n, window_g, false);
}

static void kernels_global_avgpool(Emit *e, const Node *n)
{
    int64_t c, h, w;
    chw(n->in_shape, &c, &h, &w);
    e->forward_work[n - e->net->nodes] = h * w;
    comment(e, n, "");
    bool last = channels_last(e, n->in_shape);
    E("DDP_KERNEL %s(int n, const float *x, float *y)\n{\n", kernel_name(e, n, NULL, GEN_FORWARD));
    plane_constants(e, c, h * w);
    E("    DDP_FOR(i, (int64_t)n * C) {\n        float sum = 0.0f;\n");
    if (last) /* the same pixels in the same order: the same sum */
        E("        const float *xc = x + i / C * (HW * C) + i %% C;  // channel i %% C of its sample, channels-last\n"
          "        for (int64_t j = 0; j < HW; j++)\n            sum += xc[j * C];\n");
    else
        E("        for (int64_t j = 0; j < HW; j++)\n            sum += x[i * HW + j];\n");
    E("        y[i] = sum * %s;\n    }\n}\n\n", flit(e, 1.0 / (double)(h * w)));
    if (!computes_dx(e, n))
        return;
    comment(e, n, "");
    E("DDP_KERNEL %s(int n, const float *dy, float *dx, int accumulate)\n{\n", kernel_name(e, n, NULL, GEN_BACKWARD));
    plane_constants(e, c, h * w);
    E("    DDP_FOR(i, (int64_t)n * C * HW) {\n");
    E("        float g = dy[%s] * %s;\n", last ? "i / (HW * C) * C + i % C" : "i / HW", flit(e, 1.0 / (double)(h * w)));
    E("        dx[i] = accumulate ? dx[i] + g : g;\n    }\n}\n\n");
}

static void kernels_activation(Emit *e, const Node *n)
{
    int64_t s = shape_numel(n->out_shape);
    comment(e, n, "");
    E("DDP_KERNEL %s(int n, const float *x, float *y)\n{\n", kernel_name(e, n, NULL, GEN_FORWARD));
    sample_constant(e, s);
    E("    DDP_FOR(i, (int64_t)n * S)\n        y[i] = %s;\n}\n\n", act_forward_expr(e, n, "x[i]"));
    if (!computes_dx(e, n))
        return;
    comment(e, n, "");
    bool from_y = op_backward_reads(n) == READS_OUTPUT;
    E("DDP_KERNEL %s(int n, const float *dy, const float *%s, float *dx, int accumulate)\n{\n",
      kernel_name(e, n, NULL, GEN_BACKWARD), from_y ? "y" : "x");
    sample_constant(e, s);
    E("    DDP_FOR(i, (int64_t)n * S) {\n");
    E("        float g = %s;\n", act_backward_expr(e, n, "dy[i]", from_y ? "y[i]" : "x[i]"));
    E("        dx[i] = accumulate ? dx[i] + g : g;\n    }\n}\n\n");
}

/* The element of its sample that element i's mask is hashed for: its
 * place in C x H x W order, so that a channels-last program drops what the
 * NCHW one drops. dropout_element writes the sizes the expression uses. */
static void dropout_element(Emit *e, const Node *n)
{
    if (channels_last(e, n->out_shape))
        E("    const int64_t C = %lld, HW = %lld;  // channels-last: element e of a sample is channel e %% C of pixel e / C\n",
          (long long)n->out_shape.d[0], (long long)plane_pixels(n->out_shape));
}

static const char *dropout_element_expr(const Emit *e, const Node *n)
{
    return channels_last(e, n->out_shape) ? "i % S % C * HW + i % S / C" : "i % S";
}

static void kernels_dropout(Emit *e, const Node *n)
{
    int64_t s = shape_numel(n->out_shape);
    uint32_t threshold = (uint32_t)(n->p * 4294967296.0);
    float scale = (float)(1.0 / (1.0 - n->p));
    comment(e, n, "");
    E("// The mask is a hash of (seed, layer, epoch, sample, element): see dropout_mask.h.\n");
    const char *kernel = kernel_name(e, n, NULL, GEN_FORWARD);
    E("DDP_KERNEL %s(int n, const float *x, float *y, const int64_t *sample_ids, uint64_t seed,\n"
      "%*sconst DdpStepScalars *step, int train)\n{\n", kernel, (int)strlen(kernel) + 12, "");
    sample_constant(e, s);
    E("    const uint32_t key = ddp_dropout_layer_key(seed, %d, step->epoch);  // this layer's, this epoch\n",
      n->dropout_layer);
    E("    const uint32_t DROP_BELOW = %uu;  // p of 2^32\n", threshold);
    dropout_element(e, n);
    E("    DDP_FOR(i, (int64_t)n * S) {\n");
    E("        bool keep = !train || ddp_dropout_keep(key, sample_ids[i / S], %s, DROP_BELOW);\n",
      dropout_element_expr(e, n));
    /* times 0 where dropped, not a plain 0, so that a NaN passes, as in PyTorch */
    E("        y[i] = train ? x[i] * (keep ? %s : 0.0f) : x[i];\n    }\n}\n\n", flit(e, scale));
    if (!computes_dx(e, n))
        return;
    comment(e, n, "");
    kernel = kernel_name(e, n, NULL, GEN_BACKWARD);
    E("DDP_KERNEL %s(int n, const float *dy, float *dx, const int64_t *sample_ids, uint64_t seed,\n"
      "%*sconst DdpStepScalars *step, int accumulate)\n{\n", kernel, (int)strlen(kernel) + 12, "");
    sample_constant(e, s);
    E("    const uint32_t key = ddp_dropout_layer_key(seed, %d, step->epoch);  // as forward's\n", n->dropout_layer);
    E("    const uint32_t DROP_BELOW = %uu;  // p of 2^32\n", threshold);
    dropout_element(e, n);
    E("    DDP_FOR(i, (int64_t)n * S) {\n");
    E("        float g = dy[i] * (ddp_dropout_keep(key, sample_ids[i / S], %s, DROP_BELOW) ? %s : 0.0f);\n",
      dropout_element_expr(e, n), flit(e, scale));
    E("        dx[i] = accumulate ? dx[i] + g : g;\n    }\n}\n\n");
}

/* Opens a loop over the elements I of a batch's C planes of HW pixels, each
 * with its channel c: by plane (DDP_FOR_2D), so that no element divides for
 * its channel and the CPU vectorises along the plane; channels-last
 * (LAST), element by element, the channel the element's place in its pixel. */
static void channel_planes(Emit *e, int64_t c, int64_t hw, bool last)
{
    plane_constants(e, c, hw);
    if (last)
        E("    DDP_FOR(i, (int64_t)n * HW * C) {\n        int64_t c = i %% C;  // channels-last\n");
    else
        E("    DDP_FOR_2D(plane, (int64_t)n * C, j, HW) {\n        int64_t i = plane * HW + j, c = plane %% C;\n");
}

static void kernels_batchnorm(Emit *e, const Node *n)
{
    int64_t c, h, w;
    chw(n->in_shape, &c, &h, &w);
    int64_t hw = h * w;
    comment(e, n, "");
    E("// Training statistics: per channel sum and sum of squares over the batch (each\n"
      "// sample's part in double), and the count of values they are over (sums[%lld]),\n"
      "// so that ranks can add theirs up.\n", (long long)(2 * c));
    E("DDP_KERNEL %s(int n, const float *x, DdpSum *sums)\n{\n", kernel_name(e, n, "sums", GEN_FORWARD));
    plane_constants(e, c, hw);
    E("    DDP_FOR_CHANNELS(c, C) {\n        DdpSum sum = ddp_sum_empty(), sumsq = ddp_sum_empty();\n");
    E("        DDP_FOR_SAMPLES(s, n, HW) {\n            double sample = 0.0, sample_sq = 0.0;\n");
    E("            DDP_SIMD_SUM(sample, sample_sq)\n");
    E("            DDP_FOR_PIXELS(j, HW) {\n");
    E("                double v = x[%s];%s\n", element_of(e, n->in_shape), layout_note(e, n->in_shape));
    E("                sample += v;\n                sample_sq += v * v;\n            }\n");
    E("            ddp_stats_sum_add(&sum, sample);\n            ddp_stats_sum_add(&sumsq, sample_sq);\n        }\n");
    E("        if (DDP_CHANNEL_DONE(c, &sum, &sumsq)) {\n");
    E("            sums[2 * c] = sum;\n            sums[2 * c + 1] = sumsq;\n");
    E("            if (c == 0)\n                sums[2 * C] = ddp_sum_count((double)n * HW);\n        }\n    }\n}\n\n");
    comment(e, n, "");
    E("// Mean and 1/std of the batch from the sums, and the running statistics, as\n"
      "// PyTorch: unbiased variance, momentum %.9g.\n", n->momentum);
    E("DDP_KERNEL %s(const DdpSum *sums, float *stats, float *running_mean, float *running_var)\n{\n",
      kernel_name(e, n, "stats", GEN_FORWARD));
    E("    const int64_t C = %lld;  // channels\n", (long long)c);
    E("    DDP_FOR(c, C) {\n        double count = ddp_sum_value(sums[2 * C]);\n");
    E("        double mean = ddp_sum_value(sums[2 * c]) / count;\n");
    E("        double var = ddp_sum_value(sums[2 * c + 1]) / count - mean * mean;\n        var = var > 0.0 ? var : 0.0;\n");
    E("        stats[2 * c] = (float)mean;\n        stats[2 * c + 1] = (float)(1.0 / sqrt(var + %.9g));\n", n->eps);
    E("        double unbiased = count > 1 ? var * count / (count - 1) : var;\n");
    E("        running_mean[c] = (float)((1.0 - %.9g) * running_mean[c] + %.9g * mean);\n", n->momentum, n->momentum);
    E("        running_var[c] = (float)((1.0 - %.9g) * running_var[c] + %.9g * unbiased);\n    }\n}\n\n", n->momentum,
      n->momentum);
    comment(e, n, "");
    E("DDP_KERNEL %s(int n, const float *x, float *y, const float *stats, const float *weight, const float *bias)\n{\n",
      kernel_name(e, n, "normalize", GEN_FORWARD));
    channel_planes(e, c, hw, channels_last(e, n->in_shape));
    E("        y[i] = (x[i] - stats[2 * c]) * stats[2 * c + 1] * weight[c] + bias[c];\n    }\n}\n\n");
    comment(e, n, "");
    E("DDP_KERNEL %s(int n, const float *x, float *y, const float *running_mean, const float *running_var,\n"
      "                          const float *weight, const float *bias)\n{\n", kernel_name(e, n, "eval", GEN_FORWARD));
    channel_planes(e, c, hw, channels_last(e, n->in_shape));
    E("        y[i] = (x[i] - running_mean[c]) / sqrtf(running_var[c] + %s) * weight[c] + bias[c];\n    }\n}\n\n",
      flit(e, n->eps));
    comment(e, n, "");
    E("// Per channel: d bias = sum dy, d weight = sum dy * xhat; the sums are kept for dx.\n");
    E("DDP_KERNEL %s(int n, const float *dy, const float *x, const float *stats, DdpSum *sums,\n"
      "                          DdpGrad *dweight, DdpGrad *dbias, int accumulate)\n{\n",
      kernel_name(e, n, "sums", GEN_BACKWARD));
    plane_constants(e, c, hw);
    E("    DDP_FOR_CHANNELS(c, C) {\n        DdpSum sdy = ddp_sum_empty(), sdyx = ddp_sum_empty();\n");
    E("        DDP_FOR_SAMPLES(s, n, HW) {\n            double sample = 0.0, sample_x = 0.0;\n");
    E("            DDP_SIMD_SUM(sample, sample_x)\n");
    E("            DDP_FOR_PIXELS(j, HW) {\n");
    E("                int64_t i = %s;%s\n", element_of(e, n->in_shape), layout_note(e, n->in_shape));
    E("                sample += dy[i];\n                sample_x += (double)dy[i] * ((x[i] - stats[2 * c]) * stats[2 * c + 1]);\n");
    E("            }\n            ddp_grad_sum_add(&sdy, sample);\n            ddp_grad_sum_add(&sdyx, sample_x);\n        }\n");
    E("        if (DDP_CHANNEL_DONE(c, &sdy, &sdyx)) {\n");
    E("            sums[2 * c] = sdy;\n            sums[2 * c + 1] = sdyx;\n");
    E("            DdpSum db = ddp_grad_open(dbias + c, accumulate), dw = ddp_grad_open(dweight + c, accumulate);\n");
    E("            ddp_sum_merge(&db, sdy);\n            ddp_sum_merge(&dw, sdyx);\n");
    E("            dbias[c] = ddp_grad_close(db);\n            dweight[c] = ddp_grad_close(dw);\n        }\n    }\n}\n\n");
    if (!computes_dx(e, n))
        return;
    comment(e, n, "");
    E("DDP_KERNEL %s(int n, const float *dy, const float *x, const float *stats,\n"
      "                               const DdpSum *sums, const float *weight, float *dx, int accumulate)\n{\n",
      kernel_name(e, n, "normalize", GEN_BACKWARD));
    channel_planes(e, c, hw, channels_last(e, n->in_shape));
    E("        double count = ddp_sum_value(sums[2 * C]);\n");
    E("        float xhat = (x[i] - stats[2 * c]) * stats[2 * c + 1];\n");
    E("        float g = weight[c] * stats[2 * c + 1] *\n"
      "                  (dy[i] - (float)(ddp_sum_value(sums[2 * c]) / count) -\n"
      "                   xhat * (float)(ddp_sum_value(sums[2 * c + 1]) / count));\n");
    E("        dx[i] = accumulate ? dx[i] + g : g;\n    }\n}\n\n");
}

static void kernels_residual(Emit *e, const Node *n)
{
    int64_t s = shape_numel(n->out_shape);
    comment(e, n, "");
    E("DDP_KERNEL %s(int n, const float *body, const float *skip, float *y)\n{\n",
      kernel_name(e, n, NULL, GEN_FORWARD));
    sample_constant(e, s);
    E("    DDP_FOR(i, (int64_t)n * S)\n        y[i] = body[i] + skip[i];\n}\n\n");
}

/* dx = dy or dx += dy: the backward of a residual join, or of a flatten
 * whose gradient cannot share its output's memory. */
static void kernels_pass_gradient(Emit *e, const Node *n)
{
    int64_t s = shape_numel(n->out_shape);
    comment(e, n, "");
    E("DDP_KERNEL %s(int n, const float *dy, float *dx, int accumulate)\n{\n", kernel_name(e, n, NULL, GEN_BACKWARD));
    sample_constant(e, s);
    E("    DDP_FOR(i, (int64_t)n * S)\n        dx[i] = accumulate ? dx[i] + dy[i] : dy[i];\n}\n\n");
}

/* A kernel that moves a batch of samples of C channels of HW pixels
 * between C x H x W order and channels-last: TO_LAST into channels-last
 * (the data; a flatten's gradient), else out of it (a flatten's output,
 * in the order the linear layer's weights are, PyTorch's). GRADIENT: the
 * kernel adds or writes dx as the step's accumulate says. */
static void permute_kernel(Emit *e, const char *name, int64_t c, int64_t hw, bool to_last, bool gradient)
{
    if (gradient)
        E("DDP_KERNEL %s(int n, const float *dy, float *dx, int accumulate)\n{\n", name);
    else
        E("DDP_KERNEL %s(int n, const float *x, float *y)\n{\n", name);
    plane_constants(e, c, hw);
    E("    DDP_FOR(i, (int64_t)n * C * HW) {\n");
    if (to_last)
        E("        // element i is channel i %% C of pixel i / C; from C x H x W\n"
          "        int64_t pixel = i / C, from = (pixel / HW * C + i %% C) * HW + pixel %% HW;\n");
    else
        E("        // element i is pixel i %% HW of plane i / HW; from channels-last\n"
          "        int64_t plane = i / HW, from = (plane / C * HW + i %% HW) * C + plane %% C;\n");
    if (gradient)
        E("        dx[i] = accumulate ? dx[i] + dy[from] : dy[from];\n    }\n}\n\n");
    else
        E("        y[i] = x[from];\n    }\n}\n\n");
}

/* The data's copy in channels-last order (Plan.input_permuted). */
static void kernels_input(Emit *e, const Node *n)
{
    if (!e->plan->input_permuted)
        return;
    comment(e, n, "");
    E("// The data, from the loader's C x H x W order to channels-last.\n");
    permute_kernel(e, kernel_name(e, n, NULL, GEN_FORWARD), n->out_shape.d[0], plane_pixels(n->out_shape),
                   true, false);
}

/* A flatten of a channels-last value (NodePlan.flatten_permutes): its
 * output in C x H x W order, and its gradient back. */
static void kernels_flatten_permute(Emit *e, const Node *n)
{
    Shape in = n->in_shape;
    comment(e, n, "");
    permute_kernel(e, kernel_name(e, n, NULL, GEN_FORWARD), in.d[0], plane_pixels(in), false, false);
    if (!computes_dx(e, n))
        return;
    comment(e, n, "");
    permute_kernel(e, kernel_name(e, n, NULL, GEN_BACKWARD), in.d[0], plane_pixels(in), true, true);
}

static void kernels_log_softmax(Emit *e, const Node *n)
{
    int64_t c = n->out_shape.d[0];
    e->forward_work[n - e->net->nodes] = 3 * c; /* the loops below: max, sum, write */
    e->backward_work[n - e->net->nodes] = 2 * c;
    comment(e, n, "");
    E("DDP_KERNEL %s(int n, const float *x, float *y)\n{\n", kernel_name(e, n, NULL, GEN_FORWARD));
    E("    const int64_t K = %lld;  // classes\n", (long long)c);
    E("    DDP_FOR(s, n) {\n        const float *xs = x + s * K;\n        float m = xs[0];\n");
    E("        for (int j = 1; j < K; j++)\n            m = xs[j] > m ? xs[j] : m;\n");
    E("        double sum = 0.0;\n        for (int j = 0; j < K; j++)\n            sum += expf(xs[j] - m);\n");
    /* (x - m) - log(sum), as PyTorch: log(sum) added to m first would be
     * rounded at m's size, and lost where m is large (1e4 and up) */
    E("        float log_sum = (float)log(sum);\n");
    E("        for (int j = 0; j < K; j++)\n            y[s * K + j] = (xs[j] - m) - log_sum;\n    }\n}\n\n");
    if (!computes_dx(e, n))
        return;
    comment(e, n, "");
    E("DDP_KERNEL %s(int n, const float *dy, const float *y, float *dx, int accumulate)\n{\n",
      kernel_name(e, n, NULL, GEN_BACKWARD));
    E("    const int64_t K = %lld;  // classes\n", (long long)c);
    E("    DDP_FOR(s, n) {\n        double sum = 0.0;\n");
    E("        for (int j = 0; j < K; j++)\n            sum += dy[s * K + j];\n");
    E("        for (int j = 0; j < K; j++) {\n            int64_t i = s * K + j;\n");
    E("            float g = dy[i] - expf(y[i]) * (float)sum;\n");
    E("            dx[i] = accumulate ? dx[i] + g : g;\n        }\n    }\n}\n\n");
}

/* The loss and its gradient in one pass per sample (the classifier fusion:
 * the softmax is never stored), then the batch's sums of the losses and of
 * the right predictions in the per-channel form of channel_sum.h, one
 * "channel" of one value a sample: on a CPU one thread's loop in sample
 * order, as before; on a GPU a thread a sample, added in a fixed tree. The
 * total is the same whatever the thread count or timing either way. */
static void kernels_loss(Emit *e, const Node *n)
{
    int64_t c = n->in_shape.d[0];
    int64_t *work = &e->forward_work[n - e->net->nodes]; /* a sample's trips: the loops below */
    comment(e, n, "");
    E("// Per sample: its loss and whether the prediction (first largest score) is right;\n"
      "// dx (when not NULL) gets d mean-loss / d scores, the mean over TOTAL samples:\n"
      "// this batch's N on every rank (ctx->world_size), so that the all-reduce's sum\n"
      "// is the global batch's gradient.\n");
    const char *kernel = gen_name_loss_kernel(GEN_LOSS_FORWARD_BACKWARD);
    E("DDP_KERNEL %s(int n, int64_t total, const float *x, const int32_t *labels, float *rows,\n"
      "%*sfloat *dx)\n{\n", kernel, (int)strlen(kernel) + 12, "");
    E("    const int64_t K = %lld;  // classes\n", (long long)c);
    E("    DDP_FOR(s, n) {\n        const float *xs = x + s * K;\n        int label = labels[s];\n");
    E("        int best = 0;\n        for (int j = 1; j < K; j++)\n            best = xs[j] > xs[best] ? j : best;\n");
    E("        rows[2 * s + 1] = best == label ? 1.0f : 0.0f;\n");
    switch (n->loss) {
    case LOSS_CROSS_ENTROPY:
        *work = 3 * c; /* the best score, the sum, dx */
        E("        float m = xs[best];\n        double sum = 0.0;\n");
        E("        for (int j = 0; j < K; j++)\n            sum += expf(xs[j] - m);\n");
        /* each log-probability (x - m) - log(sum), as log_softmax's */
        E("        float log_sum = (float)log(sum);\n        rows[2 * s] = log_sum - (xs[label] - m);\n");
        E("        if (dx)\n            for (int j = 0; j < K; j++)\n");
        E("                dx[s * K + j] = (expf((xs[j] - m) - log_sum) - (j == label ? 1.0f : 0.0f)) / (float)total;\n");
        break;
    case LOSS_NLL:
        *work = 2 * c; /* the best score, dx */
        E("        rows[2 * s] = -xs[label];\n");
        E("        if (dx)\n            for (int j = 0; j < K; j++)\n");
        E("                dx[s * K + j] = j == label ? -1.0f / (float)total : 0.0f;\n");
        break;
    case LOSS_MSE:
        *work = 2 * c; /* the best score, the sum with dx */
        E("        double sum = 0.0;\n        for (int j = 0; j < K; j++) {\n");
        E("            float d = xs[j] - (j == label ? 1.0f : 0.0f);\n            sum += (double)d * d;\n");
        E("            if (dx)\n                dx[s * K + j] = 2.0f * d / ((float)total * K);\n        }\n");
        E("        rows[2 * s] = (float)(sum / K);\n");
        break;
    }
    E("    }\n}\n\n");
    E("// The batch's loss and right predictions, added to the running stats (doubles).\n");
    E("DDP_KERNEL %s(int n, const float *rows, double *stats)\n{\n", gen_name_loss_kernel(GEN_LOSS_REDUCE));
    E("    DDP_FOR_CHANNELS(c, 1) {\n        double loss = 0.0, correct = 0.0;  // plain doubles (a GPU's DdpSum), not order-free sums\n");
    E("        DDP_FOR_SAMPLES(s, n, 1) {\n            loss += rows[2 * s];\n            correct += rows[2 * s + 1];\n        }\n");
    E("        if (DDP_CHANNEL_DONE(c, &loss, &correct)) {\n");
    E("            stats[0] += loss;\n            stats[1] += correct;\n            stats[2] += n;\n        }\n    }\n}\n\n");
}

/* Adam's momentum is stored as zero where subnormal (runtime/optimizer_state.h
 * says why) only for an eps of at least this: the weight's move that drops,
 * below step_size x 2^-126 / eps, is then below step_size x 1.2e-26
 * (tests/parity/momentum_flushed.py runs either side of it). */
#define FLUSH_MOMENTUM_LEAST_EPS 1e-12

/* The optimizer over the one flat parameter buffer, PyTorch's formulas, but
 * for a subnormal momentum stored as zero. */
static void kernels_optimizer(Emit *e)
{
    const TrainConfig *t = &e->net->train;
    int64_t count = e->plan->n_param_floats;
    if (t->optimizer == OPT_SGD) {
        E("// SGD as torch.optim.SGD: lr per step, momentum %.9g, dampening %.9g, weight_decay %.9g%s.\n", t->momentum,
          t->dampening, t->weight_decay, t->nesterov ? ", nesterov" : "");
        E("DDP_KERNEL optimizer_sgd_step(float *p, const DdpGrad *g, float *momentum_buffer, const DdpStepScalars *s)\n{\n");
        E("    const int64_t P = %lld;  // parameters\n", (long long)count);
        E("    const float lr = s->lr;\n");
        if (t->momentum)
            E("    const int first_step = s->step == 0;\n");
        E("    DDP_FOR(i, P) {\n");
        E("        float d = (float)ddp_grad_value(g[i])%s;  // the gradient's one rounding to float\n",
          t->weight_decay ? arena_printf(e->arena, " + %s * p[i]", flit(e, t->weight_decay)) : "");
        if (t->momentum) {
            E("        // a subnormal momentum as zero: optimizer_state.h\n");
            E("        float b = ddp_flush_subnormal(first_step ? d : %s * momentum_buffer[i] + %s);\n",
              flit(e, t->momentum), t->dampening ? arena_printf(e->arena, "%s * d", flit(e, 1.0 - t->dampening)) : "d");
            E("        momentum_buffer[i] = b;\n");
            E("        d = %s;\n", t->nesterov ? arena_printf(e->arena, "d + %s * b", flit(e, t->momentum)) : "b");
        } else
            E("        (void)momentum_buffer;\n");
        E("        p[i] -= lr * d;\n    }\n}\n\n");
    } else {
        bool adamw = t->optimizer == OPT_ADAMW;
        E("// %s as torch.optim.%s: betas %.9g, %.9g, eps %.9g, weight_decay %.9g.\n", adamw ? "AdamW" : "Adam",
          adamw ? "AdamW" : "Adam", t->beta1, t->beta2, t->eps, t->weight_decay);
        E("DDP_KERNEL optimizer_adam_step(float *p, const DdpGrad *g, float *m, float *v, const DdpStepScalars *s)\n{\n");
        E("    const int64_t P = %lld;  // parameters\n", (long long)count);
        if (adamw && t->weight_decay)
            E("    const float lr = s->lr;\n");
        E("    const double t = (double)(s->step + 1);  // this step's number, from 1\n");
        E("    const float step_size = (float)(s->lr / (1.0 - pow(%s, t)));\n", dlit(e->arena, t->beta1));
        E("    const float bias_correction2_sqrt = (float)sqrt(1.0 - pow(%s, t));\n", dlit(e->arena, t->beta2));
        E("    DDP_FOR(i, P) {\n");
        if (adamw && t->weight_decay)
            E("        p[i] *= 1.0f - lr * %s;\n", flit(e, t->weight_decay));
        E("        float d = (float)ddp_grad_value(g[i])%s;  // the gradient's one rounding to float\n",
          !adamw && t->weight_decay ? arena_printf(e->arena, " + %s * p[i]", flit(e, t->weight_decay)) : "");
        if (t->eps >= FLUSH_MOMENTUM_LEAST_EPS)
            E("        m[i] = ddp_flush_subnormal(%s * m[i] + %s * d);  // a subnormal as zero: optimizer_state.h\n",
              flit(e, t->beta1), flit(e, 1.0 - t->beta1));
        else
            E("        m[i] = %s * m[i] + %s * d;  // kept subnormal: eps below %g (optimizer_state.h)\n",
              flit(e, t->beta1), flit(e, 1.0 - t->beta1), FLUSH_MOMENTUM_LEAST_EPS);
        E("        v[i] = %s * v[i] + %s * d * d;\n", flit(e, t->beta2), flit(e, 1.0 - t->beta2));
        E("        p[i] -= step_size * m[i] / (sqrtf(v[i]) / bias_correction2_sqrt + %s);\n    }\n}\n\n", flit(e, t->eps));
    }
}

static void emit_kernels(Emit *e)
{
    for (int i = 0; i < e->net->n_nodes; i++) {
        const Node *n = &e->net->nodes[i];
        if (e->plan->nodes[i].fused_into >= 0)
            continue;
        switch (n->op) {
        case OP_CONV:
        case OP_LINEAR: kernels_conv_linear(e, n); break;
        case OP_MAXPOOL:
        case OP_AVGPOOL: kernels_pool(e, n); break;
        case OP_GLOBAL_AVGPOOL: kernels_global_avgpool(e, n); break;
        case OP_RELU:
        case OP_LEAKY_RELU:
        case OP_SIGMOID:
        case OP_TANH:
        case OP_GELU: kernels_activation(e, n); break;
        case OP_DROPOUT: kernels_dropout(e, n); break;
        case OP_BATCHNORM: kernels_batchnorm(e, n); break;
        case OP_RESIDUAL_ADD:
            kernels_residual(e, n);
            if (residual_backward_runs(e, n))
                kernels_pass_gradient(e, n);
            break;
        case OP_FLATTEN:
            if (e->plan->nodes[i].flatten_permutes)
                kernels_flatten_permute(e, n);
            else if (computes_dx(e, n))
                kernels_pass_gradient(e, n);
            break;
        case OP_LOG_SOFTMAX: kernels_log_softmax(e, n); break;
        case OP_LOSS: kernels_loss(e, n); break;
        case OP_INPUT: kernels_input(e, n); break;
        case OP_COUNT: break;
        }
    }
    kernels_optimizer(e);
}

//
// The step: one launch or library call per op
//

/* The value a conv/linear writes: its activation's output when fused. */
static int written_value(const Emit *e, const Node *n)
{
    const Node *a = fused_act(e, n);
    return a ? a->out : n->out;
}

/* WHERE of DDP_LAYER_DONE (kernel.h) for N's PASS, as a C string literal:
 * "conv1 forward, mnist.net:4" (the file name escaped: it is the user's). */
static void layer_done(Emit *e, const Node *n, const char *pass)
{
    E("    DDP_LAYER_DONE(\"%s %s, ", n->name, pass);
    for (const char *c = e->file; *c; c++) {
        if (*c == '"' || *c == '\\')
            E("\\%c", *c);
        else if ((unsigned char)*c < 0x20 || *c == 0x7f)
            E("\\%03o", (unsigned char)*c);
        else
            E("%c", *c);
    }
    E(":%d\");\n", n->line);
}

/* Writes INDENT "DDP_LAUNCH(KERNEL, ITEMS", ITEMS being PER_SAMPLE x n (FIXED
 * alone where PER_SAMPLE is 0), and notes the launch in the launch table,
 * each item making WORK trips through its loops (0: one a sample of the
 * batch). The caller writes the kernel's arguments and ");". */
static void launch(Emit *e, const char *indent, const char *kernel, int64_t per_sample, int64_t fixed, int64_t work)
{
    if (per_sample != 0 && fixed != 0) { /* the launch would drop FIXED that the table counts */
        fprintf(stderr, "ddpc: internal error: launch of %s: items per sample and fixed items both\n", kernel);
        abort();
    }
    if (per_sample == 0)
        E("%sDDP_LAUNCH(%s, %lld", indent, kernel, (long long)fixed);
    else if (per_sample == 1)
        E("%sDDP_LAUNCH(%s, n", indent, kernel);
    else
        E("%sDDP_LAUNCH(%s, (int64_t)n * %lld", indent, kernel, (long long)per_sample);
    launch_table_items(e->launches, e->function, e->when, kernel, per_sample, fixed, work);
}

/* The same for a per-channel sum over C planes of HW pixels: DDP_LAUNCH_CHANNELS. */
static void launch_channels(Emit *e, const char *indent, const char *kernel, int64_t c, int64_t hw)
{
    E("%sDDP_LAUNCH_CHANNELS(%s, %lld, %lld, n", indent, kernel, (long long)c, (long long)hw);
    launch_table_channels(e->launches, e->function, e->when, kernel, c, hw);
}

/* Notes a library call (cuDNN, cuBLAS, a collective) of N's in the launch table. */
static void library_call(Emit *e, const char *call, const Node *n)
{
    launch_table_library(e->launches, e->function, e->when, arena_printf(e->arena, "%s (%s)", call, n->name));
}

static void forward_node(Emit *e, const Node *n)
{
    const NodePlan *np = &e->plan->nodes[n - e->net->nodes];
    if ((n->op == OP_INPUT && e->plan->input_permuted) || np->flatten_permutes) { /* into or out of channels-last */
        comment(e, n, "    ");
        launch(e, "    ", kernel_name(e, n, NULL, GEN_FORWARD), per_sample(e, n->out), 0, 1);
        E(", n, %s, %s);\n", n->op == OP_INPUT ? "ctx->x" : act(e, n->in), act(e, n->out));
        layer_done(e, n, "forward");
        return;
    }
    if (np->fused_into >= 0 || op_facts(n->op)->output != OUT_NEW) /* the loss: in train_step, eval_step */
        return;
    comment(e, n, "    ");
    const char *x = act(e, n->in);
    int64_t work = e->forward_work[n - e->net->nodes]; /* an item's, in N's forward kernel */
    switch (n->op) {
    case OP_CONV:
    case OP_LINEAR: {
        const char *y = act(e, written_value(e, n));
        const char *w = param(e, node_param(e, n, PARAM_WEIGHT));
        if (epilogue_in_library(e, n)) {
            const char *b = param(e, node_param(e, n, PARAM_BIAS));
            const char *epilogue = fused_act(e, n) ? "DDP_EPILOGUE_BIAS_RELU" : "DDP_EPILOGUE_BIAS";
            if (n->op == OP_CONV)
                E("    ddp_conv_forward_bias(ctx->ops, %d, n, %s, %s, %s, %s, %s);\n", np->conv_id, x, w, b, epilogue,
                  y);
            else
                E("    ddp_linear_forward_bias(ctx->ops, n, %lld, %lld, %s, %s, %s, %s, %s);\n", (long long)n->in_ch,
                  (long long)n->out_ch, x, w, b, epilogue, y);
            library_call(e, n->op == OP_CONV ? "ddp_conv_forward_bias" : "ddp_linear_forward_bias", n);
        } else if (n->op == OP_CONV) {
            E("    ddp_conv_forward(ctx->ops, %d, n, %s, %s, %s);\n", np->conv_id, x, w, y);
            library_call(e, "ddp_conv_forward", n);
        } else {
            E("    ddp_gemm(ctx->ops, 0, 1, n, %lld, %lld, 1.0f, %s, %lld, %s, %lld, 0.0f, %s, %lld);\n",
              (long long)n->out_ch, (long long)n->in_ch, x, (long long)n->in_ch, w, (long long)n->in_ch, y,
              (long long)n->out_ch);
            library_call(e, "ddp_gemm", n);
        }
        if (forward_kernel_after_product(e, n)) {
            launch(e, "    ", product_kernel(e, n, fused_act(e, n), GEN_FORWARD), shape_numel(n->out_shape), 0, 1);
            E(", n, %s%s%s);\n", y, n->bias ? ", " : "", n->bias ? param(e, node_param(e, n, PARAM_BIAS)) : "");
        }
        break;
    }
    case OP_MAXPOOL:
        launch(e, "    ", kernel_name(e, n, NULL, GEN_FORWARD), per_sample(e, n->out), 0, work);
        E(", n, %s, %s, %s);\n", x, act(e, n->out), scratch(e, n, 0));
        break;
    case OP_AVGPOOL:
    case OP_RELU:
    case OP_LEAKY_RELU:
    case OP_SIGMOID:
    case OP_TANH:
    case OP_GELU:
    case OP_LOG_SOFTMAX:
        launch(e, "    ", kernel_name(e, n, NULL, GEN_FORWARD), n->op == OP_LOG_SOFTMAX ? 1 : per_sample(e, n->out), 0,
               work);
        E(", n, %s, %s);\n", x, act(e, n->out));
        break;
    case OP_GLOBAL_AVGPOOL:
        launch(e, "    ", kernel_name(e, n, NULL, GEN_FORWARD), n->out_shape.d[0], 0, work);
        E(", n, %s, %s);\n", x, act(e, n->out));
        break;
    case OP_DROPOUT:
        launch(e, "    ", kernel_name(e, n, NULL, GEN_FORWARD), per_sample(e, n->out), 0, work);
        E(", n, %s, %s, ctx->sample_ids,\n               ctx->seed, ctx->step_scalars, train);\n", x, act(e, n->out));
        break;
    case OP_BATCHNORM: {
        int64_t c = n->out_ch;
        const char *w = param(e, node_param(e, n, PARAM_WEIGHT)), *b = param(e, node_param(e, n, PARAM_BIAS));
        const char *rm = param(e, node_param(e, n, PARAM_RUNNING_MEAN)), *rv = param(e, node_param(e, n, PARAM_RUNNING_VAR));
        E("    if (train) {\n");
        e->when = LAUNCH_TRAINING;
        launch_channels(e, "        ", kernel_name(e, n, "sums", GEN_FORWARD), c, plane_pixels(n->in_shape));
        E(", %s, %s);\n", x, scratch(e, n, 0));
        if (n->sync) {
            E("        ddp_sync_batchnorm(ctx, %s, %lld);  // statistics of the global batch, as SyncBatchNorm\n",
              scratch(e, n, 0), (long long)(2 * c + 1));
            library_call(e, "ddp_sync_batchnorm", n);
        }
        launch(e, "        ", kernel_name(e, n, "stats", GEN_FORWARD), 0, c, 1);
        E(", %s, %s, %s, %s);\n", scratch(e, n, 0), scratch(e, n, 1), rm, rv);
        launch(e, "        ", kernel_name(e, n, "normalize", GEN_FORWARD), per_sample(e, n->out), 0, 1);
        E(", n, %s, %s, %s, %s, %s);\n", x, act(e, n->out), scratch(e, n, 1), w, b);
        E("    } else {\n");
        e->when = LAUNCH_EVALUATION;
        launch(e, "        ", kernel_name(e, n, "eval", GEN_FORWARD), per_sample(e, n->out), 0, 1);
        E(", n, %s, %s, %s, %s, %s, %s);\n    }\n", x, act(e, n->out), rm, rv, w, b);
        e->when = LAUNCH_ALWAYS;
        break;
    }
    case OP_RESIDUAL_ADD:
        launch(e, "    ", kernel_name(e, n, NULL, GEN_FORWARD), per_sample(e, n->out), 0, work);
        E(", n, %s, %s, %s);\n", x, act(e, n->skip), act(e, n->out));
        break;
    case OP_INPUT:
    case OP_FLATTEN:
    case OP_LOSS:
    case OP_COUNT: break;
    }
    layer_done(e, n, "forward");
}

static void grad_ready(Emit *e, const Node *n)
{
    for (int k = 0; k < n->n_params; k++)
        if (e->net->params[n->first_param + k].trainable)
            E("    if (ctx->grad_ready)\n        ctx->grad_ready(ctx, %d);  // %s\n", n->first_param + k,
              e->net->params[n->first_param + k].name);
}

static const char *beta(Emit *e)
{
    e->used_beta = true;
    return "beta";
}

static void backward_node(Emit *e, const Node *n)
{
    int idx = (int)(n - e->net->nodes);
    const NodePlan *np = &e->plan->nodes[idx];
    const Plan *p = e->plan;
    OpOutput output = op_facts(n->op)->output;
    if (np->fused_into >= 0 || output == OUT_DATA || output == OUT_LOSS) /* the loss: at its forward */
        return;
    bool dx = computes_dx(e, n);
    int acc_in = (p->grad_first[idx] & 1) ? 0 : 1;
    int64_t work = e->backward_work[idx]; /* an item's, in N's backward kernel */
    const char *backward = kernel_name(e, n, NULL, GEN_BACKWARD);
    if (output == OUT_VIEW) {
        if (dx) {
            comment(e, n, "    ");
            launch(e, "    ", backward, per_sample(e, n->out), 0, work);
            E(", n, %s, %s, %d);\n", grad(e, n->out), grad(e, n->in), acc_in);
            layer_done(e, n, "backward");
        }
        return;
    }
    if (n->params == 0 && !(n->op == OP_RESIDUAL_ADD ? residual_backward_runs(e, n) : dx))
        return; /* before the first trainable parameter: no backward at all (plan.c) */
    comment_pass(e, n, "    ", true);
    bool lib = op_facts(n->op)->library_product;
    const char *dy = grad(e, lib ? written_value(e, n) : n->out);
    int64_t s_out = per_sample(e, n->out), s_in = n->in > 0 ? per_sample(e, n->in) : 0;
    switch (n->op) {
    case OP_CONV:
    case OP_LINEAR: {
        const Node *a = backward_act(e, n);
        const char *y = a ? act(e, written_value(e, n)) : "";
        const char *product_backward = product_kernel(e, n, a, GEN_BACKWARD);
        if (n->bias) {
            launch_channels(e, "    ", product_backward, n->out_ch, plane_pixels(n->out_shape));
            E(", %s%s%s, %s, ctx->accumulate);\n", dy, a ? ", " : "", a ? y : "",
              dparam(e, node_param(e, n, PARAM_BIAS)));
        } else if (a) {
            launch(e, "    ", product_backward, s_out, 0, 1);
            E(", n, %s, %s);\n", dy, y);
        }
        const char *dw = dparam(e, node_param(e, n, PARAM_WEIGHT));
        const char *w = dx ? param(e, node_param(e, n, PARAM_WEIGHT)) : "";
        const char *x = act(e, n->in);
        if (n->op == OP_CONV) {
            E("    ddp_conv_backward_filter(ctx->ops, %d, n, %s, %s, %s, %s);\n", np->conv_id, x, dy, dw, beta(e));
            library_call(e, "ddp_conv_backward_filter", n);
            if (dx) {
                E("    ddp_conv_backward_data(ctx->ops, %d, n, %s, %s, %s, %d.0f);\n", np->conv_id, dy, w,
                  grad(e, n->in), acc_in);
                library_call(e, "ddp_conv_backward_data", n);
            }
        } else {
            long long in = n->in_ch, out = n->out_ch;
            E("    ddp_gemm_grad(ctx->ops, %lld, %lld, n, %s, %lld, %s, %lld, %s, %s, %lld);\n", out, in, dy, out, x, in,
              beta(e), dw, in);
            library_call(e, "ddp_gemm_grad", n);
            if (dx) {
                E("    ddp_gemm(ctx->ops, 0, 0, n, %lld, %lld, 1.0f, %s, %lld, %s, %lld, %d.0f, %s, %lld);\n", in, out, dy,
                  out, w, in, acc_in, grad(e, n->in), in);
                library_call(e, "ddp_gemm", n);
            }
        }
        break;
    }
    case OP_MAXPOOL:
        if (np->masks_for >= 0 && acc_in) { /* the mask would reach the pool's share alone */
            fprintf(stderr, "ddpc: internal error: %s applies a relu's mask but adds to its input's gradient\n",
                    n->name);
            abort();
        }
        if (dx) {
            launch(e, "    ", backward, pool_tiles(n) ? s_out : s_in, 0, work);
            E(", n, %s, %s%s%s, %s, %d);\n", dy, scratch(e, n, 0), np->masks_for >= 0 ? ", " : "",
              np->masks_for >= 0 ? act(e, n->out) : "", grad(e, n->in), acc_in);
        }
        break;
    case OP_AVGPOOL:
        if (dx) {
            launch(e, "    ", backward, pool_tiles(n) ? s_out : s_in, 0, work);
            E(", n, %s, %s, %d);\n", dy, grad(e, n->in), acc_in);
        }
        break;
    case OP_GLOBAL_AVGPOOL:
        if (dx) {
            launch(e, "    ", backward, s_in, 0, work);
            E(", n, %s, %s, %d);\n", dy, grad(e, n->in), acc_in);
        }
        break;
    case OP_RELU:
    case OP_LEAKY_RELU:
    case OP_SIGMOID:
    case OP_TANH:
    case OP_GELU:
        if (dx) {
            launch(e, "    ", backward, s_in, 0, work);
            E(", n, %s, %s, %s, %d);\n", dy, op_backward_reads(n) == READS_OUTPUT ? act(e, n->out) : act(e, n->in),
              grad(e, n->in), acc_in);
        }
        break;
    case OP_LOG_SOFTMAX:
        if (dx) {
            launch(e, "    ", backward, 1, 0, work);
            E(", n, %s, %s, %s, %d);\n", dy, act(e, n->out), grad(e, n->in), acc_in);
        }
        break;
    case OP_DROPOUT:
        if (dx) {
            launch(e, "    ", backward, s_in, 0, work);
            E(", n, %s, %s, ctx->sample_ids,\n               ctx->seed, ctx->step_scalars, %d);\n", dy,
              grad(e, n->in), acc_in);
        }
        break;
    case OP_BATCHNORM: {
        int64_t c = n->out_ch;
        const char *x = act(e, n->in);
        launch_channels(e, "    ", kernel_name(e, n, "sums", GEN_BACKWARD), c, plane_pixels(n->in_shape));
        E(", %s, %s, %s, %s, %s, %s, ctx->accumulate);\n", dy, x, scratch(e, n, 1), scratch(e, n, 0),
          dparam(e, node_param(e, n, PARAM_WEIGHT)), dparam(e, node_param(e, n, PARAM_BIAS)));
        if (dx && n->sync) {
            E("    ddp_sync_batchnorm(ctx, %s, %lld);  // dx needs the global sums\n", scratch(e, n, 0), (long long)(2 * c));
            library_call(e, "ddp_sync_batchnorm", n);
        }
        if (dx) {
            launch(e, "    ", kernel_name(e, n, "normalize", GEN_BACKWARD), s_in, 0, 1);
            E(", n, %s, %s, %s, %s, %s, %s, %d);\n", dy, x, scratch(e, n, 1), scratch(e, n, 0),
              param(e, node_param(e, n, PARAM_WEIGHT)), grad(e, n->in), acc_in);
        }
        break;
    }
    case OP_RESIDUAL_ADD: {
        if (dx) {
            launch(e, "    ", backward, s_out, 0, work);
            E(", n, %s, %s, %d);\n", dy, grad(e, n->in), acc_in);
        }
        if (n->skip > 0 && p->grad[n->skip] >= 0) {
            launch(e, "    ", backward, s_out, 0, work);
            E(", n, %s, %s, %d);\n", dy, grad(e, n->skip), (p->grad_first[idx] & 2) ? 0 : 1);
        }
        break;
    }
    case OP_INPUT:
    case OP_FLATTEN:
    case OP_LOSS:
    case OP_COUNT: break;
    }
    layer_done(e, n, "backward"); /* checked before the reducer takes its gradients */
    grad_ready(e, n);
}

static const Node *loss_node(const Net *net) { return &net->nodes[net->n_nodes - 1]; }

/* Declarations of what BODY used, then BODY. */
static void finish_function(Emit *e, FILE *out, char *body)
{
    const Plan *p = e->plan;
    const Net *net = e->net;
    bool any_arena = false;
    for (int v = 0; v < net->n_values; v++)
        any_arena = any_arena || e->used_act[v] || e->used_grad[v];
    for (int i = 0; i < net->n_nodes; i++)
        any_arena = any_arena || e->used_scratch[i];
    if (any_arena)
        fprintf(out, "    float *const A = ctx->arena;          // planned by ddpc: the table above forward\n"
                     "    const int64_t B = ctx->max_batch;     // batch-sized buffers are B x their per-sample size\n");
    bool any_param = false, any_grad = false;
    for (int i = 0; i < net->n_params; i++) {
        any_param = any_param || (e->used_param[i] & 1);
        any_grad = any_grad || (e->used_param[i] & 2);
    }
    for (int i = 0; i < net->n_params; i++) {
        if (!e->used_param[i])
            continue;
        const Param *q = &net->params[i];
        const char *region = q->trainable ? "ctx->params" : "ctx->buffers";
        if (e->used_param[i] & 1)
            fprintf(out, "    float *%s = %s + %lld;\n", param_name(e, i, false), region, (long long)p->param_offset[i]);
        if (e->used_param[i] & 2)
            fprintf(out, "    DdpGrad *%s = (DdpGrad *)ctx->grads + %lld;\n", param_name(e, i, true),
                    (long long)p->param_offset[i]);
    }
    for (int v = 0; v < net->n_values; v++) { /* value 0: the data's channels-last copy, if used */
        for (int g = 0; g < 2; g++) {
            if (!(g ? e->used_grad[v] : e->used_act[v]))
                continue;
            const char *name = buffer_name(e, v, g);
            fprintf(out, "    float *%s = A + %s * B;\n", name, gen_name_offset(e->arena, name));
        }
    }
    for (int i = 0; i < net->n_nodes; i++) {
        for (int k = 0; k < OP_MAX_SCRATCH; k++) {
            if (!(e->used_scratch[i] & (1 << k)))
                continue;
            const ScratchFact *f = &op_facts(net->nodes[i].op)->scratch[k];
            const char *name = scratch_name(e, i, k);
            const char *offset = gen_name_offset(e->arena, name);
            const char *at = p->storages[p->nodes[i].scratch[k]].per_sample > 0
                                 ? arena_printf(e->arena, "A + %s * B", offset)
                                 : arena_printf(e->arena, "A + ARENA_PER_SAMPLE * B + %s", offset);
            if (strcmp(f->type, "float") == 0)
                fprintf(out, "    float *%s = %s;\n", name, at);
            else
                fprintf(out, "    %s *%s = (%s *)(%s);\n", f->type, name, f->type, at);
        }
    }
    if (e->used_beta)
        fprintf(out, "    const float beta = ctx->accumulate ? 1.0f : 0.0f;  // no_sync steps add to the gradients\n");
    fputs(body, out);
    free(body);
    for (int v = 0; v < net->n_values; v++) {
        e->any_act[v] |= e->used_act[v];
        e->any_grad[v] |= e->used_grad[v];
    }
    for (int i = 0; i < net->n_nodes; i++)
        e->any_scratch[i] |= e->used_scratch[i];
    memset(e->used_act, 0, (size_t)net->n_values);
    memset(e->used_grad, 0, (size_t)net->n_values);
    memset(e->used_param, 0, (size_t)net->n_params);
    memset(e->used_scratch, 0, (size_t)net->n_nodes);
    e->used_beta = false;
}

static FILE *begin_body(Emit *e, char **buf, size_t *len)
{
    FILE *f = open_memstream(buf, len);
    e->out = f;
    return f;
}

/* Ends a function begun with begin_body: HEADER (its comment and signature),
 * the declarations of what the body used, the body, the closing brace. */
static void end_function(Emit *e, FILE *out, FILE *body_stream, char **body, const char *header)
{
    fclose(body_stream); /* sets *body */
    fprintf(out, "%s{\n", header);
    finish_function(e, out, *body);
    fprintf(out, "}\n\n");
}

/* Where each buffer lies in the activation arena, named after it, so that
 * the functions' declarations and the DdpNet read one table. */
static void emit_arena_table(Emit *e, FILE *out)
{
    const Net *net = e->net;
    const Plan *p = e->plan;
    fprintf(out, "// The activation arena (ctx->arena), planned by ddpc. A batch-sized buffer lies\n"
                 "// at its offset x B (the batch) and holds B x its size per sample; buffers whose\n"
                 "// lifetimes do not overlap share floats. Fixed-size buffers lie after all of\n"
                 "// them, at ARENA_PER_SAMPLE x B + their offset.\n");
    fprintf(out, "static const int64_t ARENA_PER_SAMPLE = %lld, ARENA_FIXED = %lld;  // floats\n",
            (long long)p->arena_per_sample, (long long)p->arena_fixed);
    for (int v = 0; v < net->n_values; v++)
        for (int g = 0; g < 2; g++) {
            int s = g ? p->grad[v] : p->act[v];
            if (!(g ? e->any_grad[v] : e->any_act[v]))
                continue;
            fprintf(out, "static const int64_t %s = %lld;  // %s%s\n", gen_name_offset(e->arena, buffer_name(e, v, g)),
                    (long long)p->storages[s].offset, g ? "its gradient, " : "", shape_str(e->arena, net->values[v]));
        }
    for (int i = 0; i < net->n_nodes; i++)
        for (int k = 0; k < OP_MAX_SCRATCH; k++) {
            if (!(e->any_scratch[i] & (1 << k)))
                continue;
            const Storage *st = &p->storages[p->nodes[i].scratch[k]];
            fprintf(out, "static const int64_t %s = %lld;  // %s, %lld floats%s\n",
                    gen_name_offset(e->arena, scratch_name(e, i, k)),
                    (long long)st->offset, op_facts(net->nodes[i].op)->scratch[k].type,
                    (long long)(st->per_sample > 0 ? st->per_sample : st->fixed), st->per_sample > 0 ? " per sample" : "");
        }
    fprintf(out, "\n");
}

static void emit_functions(Emit *e, FILE *out)
{
    const Net *net = e->net;
    const Node *loss = loss_node(net);
    char *body;
    size_t len;
    bool uses_train = false;
    for (int i = 0; i < net->n_nodes; i++)
        uses_train = uses_train || op_facts(net->nodes[i].op)->differs_in_training;

    /* forward */
    e->function = "forward";
    FILE *b = begin_body(e, &body, &len);
    if (!uses_train)
        E("    (void)train;  // no layer of this net behaves differently in training\n");
    for (int i = 0; i < net->n_nodes; i++)
        forward_node(e, &net->nodes[i]);
    end_function(e, out, b, &body, "// The forward pass; TRAIN selects batch statistics and dropout.\n"
                                   "static void forward(DdpCtx *ctx, int n, int train)\n");

    /* train step */
    int64_t loss_work = e->forward_work[loss - net->nodes]; /* a sample's, in loss_forward_backward */
    e->function = "train_step";
    b = begin_body(e, &body, &len);
    E("    forward(ctx, n, 1);\n");
    comment(e, loss, "    ");
    launch(e, "    ", gen_name_loss_kernel(GEN_LOSS_FORWARD_BACKWARD), 1, 0, loss_work);
    E(", n, (int64_t)n * ctx->world_size, %s, ctx->labels, %s, %s);\n", act(e, loss->in), scratch(e, loss, 0),
      grad(e, loss->in));
    launch_channels(e, "    ", gen_name_loss_kernel(GEN_LOSS_REDUCE), 1, 1);
    E(", %s, ctx->stats);\n", scratch(e, loss, 0));
    layer_done(e, loss, "forward and backward");
    E("\n    if (ctx->backward_begins)\n        ctx->backward_begins(ctx);\n");
    E("    // backward, last layer first; each parameter's gradient is announced as soon\n"
      "    // as it is final, so that its bucket's all-reduce can start\n");
    for (int i = net->n_nodes - 1; i >= 0; i--)
        backward_node(e, &net->nodes[i]);
    end_function(e, out, b, &body, "// Forward, loss and backward for a batch of N: grads get d loss / d params.\n"
                                   "static void train_step(DdpCtx *ctx, int n)\n");

    /* eval step */
    e->function = "eval_step";
    e->when = LAUNCH_EVALUATION;
    b = begin_body(e, &body, &len);
    E("    forward(ctx, n, 0);\n");
    comment(e, loss, "    ");
    launch(e, "    ", gen_name_loss_kernel(GEN_LOSS_FORWARD_BACKWARD), 1, 0, loss_work);
    E(", n, (int64_t)n, %s, ctx->labels, %s, NULL);\n", act(e, loss->in), scratch(e, loss, 0));
    launch_channels(e, "    ", gen_name_loss_kernel(GEN_LOSS_REDUCE), 1, 1);
    E(", %s, ctx->stats);\n", scratch(e, loss, 0));
    layer_done(e, loss, "forward");
    end_function(e, out, b, &body, "// Forward in evaluation mode and the loss, for a batch of N.\n"
                                   "static void eval_step(DdpCtx *ctx, int n)\n");

    /* optimizer */
    const TrainConfig *t = &net->train;
    int64_t count = e->plan->n_param_floats;
    e->function = "optimizer_step";
    e->when = LAUNCH_ALWAYS;
    e->out = out;
    E("// One optimizer update of all %lld parameters at once.\n"
      "static void optimizer_step(DdpCtx *ctx)\n{\n", (long long)count);
    if (t->optimizer == OPT_SGD) {
        launch(e, "    ", "optimizer_sgd_step", 0, count, 1);
        E(", ctx->params, (const DdpGrad *)ctx->grads, ctx->opt_state, ctx->step_scalars);\n");
    } else {
        launch(e, "    ", "optimizer_adam_step", 0, count, 1);
        E(", ctx->params, (const DdpGrad *)ctx->grads, ctx->opt_state,\n"
          "               ctx->opt_state + %lld, ctx->step_scalars);\n", (long long)count);
    }
    E("}\n\n");

    /* library ops */
    fprintf(out, "// How every C x H x W value lies, the convs' x and y among them (ddpc --layout):\n"
                 "// 1 channels-last (NHWC), 0 NCHW. The kernels above are written for it.\n"
                 "static const int CHANNELS_LAST = %d;\n\n", e->plan->channels_last ? 1 : 0);
    fprintf(out, "// Registers each convolution and linear layer with the library ops, which size their scratch\n"
                 "// (the copies a precision rounds operands into) and, after the start-up memory check, choose\n"
                 "// cuDNN's algorithms.\n"
                 "static DdpStatus plan_ops(DdpCtx *ctx)\n{\n");
    int products = 0;
    for (int i = 0; i < net->n_nodes; i++)
        products += net->nodes[i].op == OP_CONV || net->nodes[i].op == OP_LINEAR;
    if (products == 0)
        fprintf(out, "    (void)ctx;\n");
    for (int i = 0; i < net->n_nodes; i++) {
        const Node *n = &net->nodes[i];
        if (n->op != OP_CONV && n->op != OP_LINEAR)
            continue;
        fprintf(out, "    // %s:%d: %s\n", e->file, n->line, n->text);
        if (n->op == OP_LINEAR) {
            fprintf(out, "    DDP_CHECK(ddp_ops_plan_linear(ctx->ops, ctx->max_batch, %lld, %lld));\n",
                    (long long)n->in_ch, (long long)n->out_ch);
            continue;
        }
        const char *shape = gen_name_conv_shape(e->arena, n);
        fprintf(out, "    DdpConvShape %s = {ctx->max_batch, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, 0, 0, "
                     "CHANNELS_LAST};\n",
                shape, (long long)n->in_shape.d[0], (long long)n->in_shape.d[1], (long long)n->in_shape.d[2],
                (long long)n->out_ch, (long long)n->kernel, (long long)n->kernel, (long long)n->stride, (long long)n->pad,
                (long long)n->groups);
        fprintf(out, "    DDP_CHECK(ddp_conv_shape_init(&%s));\n", shape);
        fprintf(out, "    DDP_CHECK(ddp_ops_plan_conv(ctx->ops, %d, &%s));\n", e->plan->nodes[i].conv_id, shape);
    }
    fprintf(out, "    return DDP_OK;\n}\n\n");
}

/* How parameter Q of N starts (op_facts.c), in kernel.h's words. */
static const char *param_init(const Node *n, const Param *q)
{
    switch (op_facts(n->op)->init[q->role]) {
    case INIT_ZEROS: return "DDP_INIT_ZEROS";
    case INIT_ONES: return "DDP_INIT_ONES";
    case INIT_KAIMING_UNIFORM: return "DDP_INIT_KAIMING_UNIFORM";
    case INIT_NONE: break;
    }
    fprintf(stderr, "ddpc: internal error: op_facts.c does not say how %s starts\n", q->name);
    abort();
}

/* The fewest values per channel one sample gives a batchnorm of NET (the
 * pixels of its input's plane: 1 for a flat or 1x1 input), FEWEST[1] among
 * the synchronised ones, FEWEST[0] among sync=off's; 0 where there is none
 * (DdpNet.batchnorm_values_*, which the trainer checks batches against). */
static void batchnorm_fewest_values(const Net *net, int64_t fewest[2])
{
    fewest[0] = fewest[1] = 0;
    for (int i = 0; i < net->n_nodes; i++) {
        const Node *n = &net->nodes[i];
        const int64_t values = plane_pixels(n->in_shape);
        if (n->op == OP_BATCHNORM && (fewest[n->sync] == 0 || values < fewest[n->sync]))
            fewest[n->sync] = values;
    }
}

static void emit_tables(Emit *e, FILE *out)
{
    const Net *net = e->net;
    const Plan *p = e->plan;
    fprintf(out, "// The state_dict, in PyTorch's names; trainable parameters are laid out last\n"
                 "// layer first, the order in which backward finishes them and buckets fill.\n");
    fprintf(out, "static const DdpParamInfo params[] = {\n"
                 "    // name, dims, shape, values, trainable, offset (floats, in params or buffers), step count, init, fan-in\n");
    for (int i = 0; i < net->n_params; i++) {
        const Param *q = &net->params[i];
        const Node *n = &net->nodes[q->node];
        const char *init = param_init(n, q);
        int64_t fan_in = op_fan_in(net, n);
        fprintf(out, "    {\"%s\", %d, {%lld, %lld, %lld, %lld}, %lld, %d, %lld, %d, %s, %lld},\n", q->name, q->ndim,
                (long long)q->shape[0], (long long)q->shape[1], (long long)q->shape[2], (long long)q->shape[3],
                (long long)q->numel, q->trainable, (long long)(p->param_offset[i] < 0 ? 0 : p->param_offset[i]),
                q->is_int64, init, (long long)fan_in);
    }
    fprintf(out, "};\n\n");

    const TrainConfig *t = &net->train;
    static const char *const opt[] = {"DDP_OPT_SGD", "DDP_OPT_ADAM", "DDP_OPT_ADAMW"};
    static const char *const sched[] = {"DDP_SCHED_CONSTANT", "DDP_SCHED_STEP", "DDP_SCHED_COSINE"};
    const Node *input = &net->nodes[0];
    int64_t c, h, w;
    chw(input->out_shape, &c, &h, &w);
    const DataConfig *d = &net->data;
    if (d->mean) {
        fprintf(out, "// data { }: normalize's mean and std per channel\n");
        for (int k = 0; k < 2; k++) {
            fprintf(out, "static const double data_%s[] = {", k ? "std" : "mean");
            for (int64_t i = 0; i < d->n_channels; i++)
                fprintf(out, "%s%s", i ? ", " : "", dlit(e->arena, (k ? d->std : d->mean)[i]));
            fprintf(out, "};\n");
        }
        fprintf(out, "static_assert(sizeof data_mean == sizeof data_std, \"a mean and a std per channel\");\n\n");
    }
    fprintf(out, "static const DdpNet net = {\n");
    fprintf(out, "    \"%s\", \"%s\",  // name, hash\n", net->name, p->hash);
    fprintf(out, "    %d, {%lld, %lld, %lld}, %lld, %lld,  // sample rank, shape, values; classes\n",
            input->out_shape.rank, (long long)c, (long long)h, (long long)w, (long long)shape_numel(input->out_shape),
            (long long)net->num_classes);
    fprintf(out, "    // params, their count, parameter floats, buffer floats, optimizer slots, gradient bytes\n");
    fprintf(out, "    params, (int)(sizeof params / sizeof params[0]), %lld, %lld, %d, (int)sizeof(DdpGrad),\n",
            (long long)p->n_param_floats,
            (long long)p->n_buffer_floats, t->optimizer == OPT_SGD ? 1 : 2);
    fprintf(out, "    // train { }: batch, epochs, optimizer, lr, momentum, dampening, weight_decay, nesterov,\n"
                 "    // betas, eps, schedule, warmup, every, gamma, bucket cap, first bucket, seed, batch is global,\n"
                 "    // precision\n");
    Arena *a = e->arena;
    char precision[32] = "DDP_PRECISION_"; /* the enum's name: precision.h's, in capitals */
    for (const char *ch = ddp_precision_name(t->precision); *ch; ch++)
        precision[strlen(precision)] = (char)toupper((unsigned char)*ch);
    fprintf(out, "    {%lld, %lld, %s, %s, %s, %s, %s, %d, %s, %s, %s, %s, %lld, %lld, %s, %lld, %lld, %lluull, %d, %s},\n",
            (long long)t->batch, (long long)t->epochs, opt[t->optimizer], dlit(a, t->lr), dlit(a, t->momentum),
            dlit(a, t->dampening), dlit(a, t->weight_decay), t->nesterov, dlit(a, t->beta1), dlit(a, t->beta2),
            dlit(a, t->eps), sched[t->schedule], (long long)t->warmup, (long long)t->step_every, dlit(a, t->gamma),
            (long long)t->bucket_cap_bytes, (long long)t->first_bucket_bytes, (unsigned long long)t->seed,
            t->batch_global, precision);
    fprintf(out, "    // data { }%s: normalized channels, mean, std; random crop height, width, pad, padding;\n"
                 "    // probability of a left-right flip, of an upside-down flip; for image files: resize to\n"
                 "    // height, width, or of the shorter side; center crop height, width\n"
                 "    {%s, %s, %s, %lld, %lld, %lld, %s, %s, %s, {%lld, %lld, %lld, %lld, %lld}},\n",
            data_any(d) ? "" : " (none in the .net)",
            d->mean ? "(int)(sizeof data_mean / sizeof data_mean[0])" : "0", d->mean ? "data_mean" : "NULL",
            d->mean ? "data_std" : "NULL",
            (long long)d->crop_h, (long long)d->crop_w, (long long)d->pad,
            d->pad_mode == PAD_REFLECT ? "DDP_PAD_REFLECT" : "DDP_PAD_ZERO", dlit(e->arena, d->flip_h),
            dlit(e->arena, d->flip_v), (long long)d->resize_h, (long long)d->resize_w, (long long)d->resize_shorter,
            (long long)d->center_h, (long long)d->center_w);
    const Node *loss = loss_node(net);
    /* the loss reads a layer's output: a net without one, with nothing to
     * train, is refused (sema.c) */
    fprintf(out, "    ARENA_PER_SAMPLE, ARENA_FIXED, %s,  // the activation arena; the scores the loss reads\n",
            gen_name_offset(e->arena, buffer_name(e, loss->in, false)));
    fprintf(out, "    plan_ops, train_step, eval_step, optimizer_step,  // the generated functions\n");
    int64_t fewest[2];
    batchnorm_fewest_values(net, fewest);
    fprintf(out, "    CHANNELS_LAST,  // the layout, which checkpoints record\n");
    fprintf(out, "    %lld, %lld,  // a batchnorm's fewest values per channel a sample: synchronised, sync=off\n};\n\n",
            (long long)fewest[1], (long long)fewest[0]);
    fprintf(out, "int main(int argc, char **argv)\n{\n    return ddp_main(argc, argv, &net);\n}\n");
}

/* OUT.cu, its launches noted in LAUNCHES (allocated in ARENA). */
static void emit_program(FILE *out, const Net *net, const Plan *plan, const char *build_command, Arena *arena,
                         LaunchTable **launches)
{
    Emit e = {0};
    e.net = net;
    e.plan = plan;
    e.arena = arena;
    e.file = base_name(net->file);
    e.used_act = arena_alloc(arena, (size_t)net->n_values + 1);
    e.used_grad = arena_alloc(arena, (size_t)net->n_values + 1);
    e.used_param = arena_alloc(arena, (size_t)net->n_params + 1);
    e.used_scratch = arena_alloc(arena, (size_t)net->n_nodes + 1);
    e.any_act = arena_alloc(arena, (size_t)net->n_values + 1);
    e.any_grad = arena_alloc(arena, (size_t)net->n_values + 1);
    e.any_scratch = arena_alloc(arena, (size_t)net->n_nodes + 1);
    e.maker = arena_alloc(arena, sizeof *e.maker * ((size_t)net->n_values + 1));
    e.launches = *launches = launch_table_new(arena);
    e.forward_work = arena_alloc(arena, sizeof *e.forward_work * ((size_t)net->n_nodes + 1));
    e.backward_work = arena_alloc(arena, sizeof *e.backward_work * ((size_t)net->n_nodes + 1));
    for (int i = 0; i < net->n_nodes; i++) /* an elementwise kernel's item: one trip */
        e.forward_work[i] = e.backward_work[i] = 1;
    for (int i = net->n_nodes - 1; i >= 0; i--) /* downward, so that the first maker of a value wins */
        if (net->nodes[i].out >= 0)
            e.maker[net->nodes[i].out] = i;

    fprintf(out, "// The training program of %s (net %s), generated by ddpc %s.\n", e.file, net->name, DDPC_VERSION);
    fprintf(out, "// Edit it freely; `ddpc --rebuild THIS_FILE` runs the build line below again.\n//\n");
    fprintf(out, "// ddpc-build: %s\n//\n", build_command);
    fprintf(out, "// One source for both targets: under nvcc the kernels run on the GPU; under a\n"
                 "// host compiler kernel.h turns each into an OpenMP loop (see DDP_FOR there).\n\n");
    if (plan->channels_last)
        fprintf(out, "// Layout: every C x H x W value is stored channels-last (NHWC): a sample is H x W x C,\n"
                     "// element i of a batch channel i %% C of pixel i / C. The data arrives C x H x W and\n"
                     "// is permuted on the way in (input_forward) where it has channels and pixels; a\n"
                     "// flatten of channels and pixels permutes back, so that the linear layers' weights\n"
                     "// keep PyTorch's order, as every parameter does.\n\n");
    fprintf(out, "#include \"kernel.h\"  // DDP_KERNEL, DDP_FOR, DDP_LAUNCH; DdpCtx, DdpNet; ddp_conv_*, ddp_gemm\n\n");
    bool gelu_tanh = false;
    for (int i = 0; i < net->n_nodes; i++)
        gelu_tanh = gelu_tanh || (net->nodes[i].op == OP_GELU && net->nodes[i].gelu_tanh);
    if (gelu_tanh)
        fprintf(out, "// d/dx of gelu's tanh approximation\n"
                     "static inline DDP_HOST_DEVICE float ddp_gelu_tanh_grad(float x)\n{\n"
                     "    float u = 0.7978845608f * (x + 0.044715f * x * x * x);\n"
                     "    float t = ddp_tanhf(u);\n"
                     "    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.7978845608f * (1.0f + 0.134145f * x * x);\n"
                     "}\n\n");
    e.out = out;
    emit_kernels(&e);
    /* the functions first, into memory: the arena table before them names
     * what they use */
    char *functions;
    size_t functions_len;
    FILE *f = open_memstream(&functions, &functions_len);
    emit_functions(&e, f);
    fclose(f);
    emit_arena_table(&e, out);
    fputs(functions, out);
    free(functions);
    emit_tables(&e, out);
}

void emit_cu(FILE *out, const Net *net, const Plan *plan, const char *build_command)
{
    Arena arena = {0};
    LaunchTable *launches;
    emit_program(out, net, plan, build_command, &arena, &launches);
    fprintf(out, "\n");
    /* a global batch (batch 512 global) is one rank's at a world of one */
    launch_table_print(out, launches, net->train.batch, "// ");
    arena_free(&arena);
}

bool emit_launch_table(FILE *out, const Net *net, const Plan *plan)
{
    Arena arena = {0};
    LaunchTable *launches;
    char *text;
    size_t len;
    FILE *discard = open_memstream(&text, &len);
    if (!discard) {
        fprintf(stderr, "ddpc: out of memory writing the launch table\n");
        return false;
    }
    emit_program(discard, net, plan, "", &arena, &launches);
    fclose(discard);
    free(text);
    launch_table_print(out, launches, net->train.batch, "");
    arena_free(&arena);
    return true;
}
