/*
 * plan.c: decisions the emitter follows, made once from the checked Net.
 *
 *  - Fusion: an activation right after a conv or linear (and read by nothing
 *    else) is applied by the conv's bias kernel, and its backward likewise,
 *    when its derivative can be had from the output alone (relu, leaky_relu
 *    with a positive slope, sigmoid, tanh).
 *  - Parameters: trainable ones in one flat buffer in reverse order (the last
 *    layer's bias first), the order in which backward produces gradients and
 *    DDP fills buckets, so every bucket is a contiguous slice; running
 *    statistics in a second buffer. The bucket plan is PyTorch's: reverse
 *    order, a bucket closes once it reaches its cap, the first cap 1 MB
 *    (runtime/buckets.c, shared with the program).
 *  - Memory: every activation, gradient and scratch buffer gets a lifetime on
 *    the step's timeline (forward nodes, then backward nodes in reverse) and a
 *    place in one arena, reusing places whose lifetime ended (first fit, in
 *    order of first use). Buffers that grow with the batch are sized per
 *    sample, so one plan serves any batch size; per-channel ones live in a
 *    small fixed region.
 *  - The net's hash: what ranks and checkpoints compare to know they run the
 *    same net.
 */
#include "ddpc.h"

#include <stdlib.h>
#include <string.h>

static bool act_from_output(const Node *a)
{
    switch (a->op) {
    case OP_RELU:
    case OP_SIGMOID:
    case OP_TANH: return true;
    case OP_LEAKY_RELU: return a->slope > 0;
    default: return false;
    }
}

/* The step's timeline: forward node i runs at time i, its backward at 2N-1-i. */
static int t_fwd(const Net *net, int i) { (void)net; return i; }
static int t_bwd(const Net *net, int i) { return 2 * net->n_nodes - 1 - i; }

static int new_storage(Arena *a, Plan *p, int64_t per_sample, int64_t fixed, int t)
{
    if (p->n_storages == p->storages_cap) {
        int cap = p->storages_cap ? 2 * p->storages_cap : 64;
        Storage *s = arena_alloc(a, sizeof *s * (size_t)cap);
        if (p->n_storages)
            memcpy(s, p->storages, sizeof *s * (size_t)p->n_storages);
        p->storages = s;
        p->storages_cap = cap;
    }
    Storage *s = &p->storages[p->n_storages];
    s->per_sample = per_sample;
    s->fixed = fixed;
    s->start = s->end = t;
    s->offset = -1;
    return p->n_storages++;
}

static void touch(Plan *p, int storage, int t)
{
    if (storage < 0)
        return;
    Storage *s = &p->storages[storage];
    if (t < s->start)
        s->start = t;
    if (t > s->end)
        s->end = t;
}

/* Values read by more than one node (a residual's input) have their gradient
 * summed; the emitter writes the first contribution and adds the others. */
static void count_consumers(const Net *net, int *consumers)
{
    for (int i = 0; i < net->n_nodes; i++) {
        const Node *n = &net->nodes[i];
        if (n->in >= 0)
            consumers[n->in]++;
        if (n->skip >= 0)
            consumers[n->skip]++;
    }
}

static void plan_fusion(const Net *net, Plan *p, const int *consumers)
{
    for (int i = 0; i + 1 < net->n_nodes; i++) {
        const Node *n = &net->nodes[i], *a = &net->nodes[i + 1];
        if ((n->op == OP_CONV || n->op == OP_LINEAR) && a->in == n->out && consumers[n->out] == 1 &&
            act_from_output(a)) {
            p->nodes[i].fused_act = i + 1;
            p->nodes[i + 1].fused_into = i;
        }
    }
}

/* Reverse order of the state_dict's parameters, as DDP's reducer. */
static void plan_params(Arena *a, const Net *net, Plan *p)
{
    p->param_offset = arena_alloc(a, sizeof *p->param_offset * (size_t)(net->n_params + 1));
    int64_t trainable = 0, buffers = 0;
    for (int i = net->n_params - 1; i >= 0; i--) {
        const Param *q = &net->params[i];
        if (q->is_int64)
            p->param_offset[i] = -1; /* num_batches_tracked: the runtime's step count */
        else if (q->trainable) {
            p->param_offset[i] = trainable;
            trainable += q->numel;
        } else {
            p->param_offset[i] = buffers;
            buffers += q->numel;
        }
    }
    p->n_param_floats = trainable;
    p->n_buffer_floats = buffers;
}

/* DDP's buckets over the trainable parameters in reverse order, by the
 * runtime's own planner, so that --emit plan and the running program can
 * never disagree. */
static void plan_bucket_layout(Arena *a, const Net *net, Plan *p)
{
    int64_t *sizes = arena_alloc(a, sizeof *sizes * (size_t)(net->n_params + 1));
    p->bucket_param = arena_alloc(a, sizeof *p->bucket_param * (size_t)(net->n_params + 1));
    int n = 0;
    for (int i = net->n_params - 1; i >= 0; i--)
        if (net->params[i].trainable) {
            sizes[n] = net->params[i].numel;
            p->bucket_param[n++] = i;
        }
    p->buckets = arena_alloc(a, sizeof *p->buckets * (size_t)(n + 1));
    p->n_buckets = ddp_buckets_plan(sizes, n, net->train.bucket_cap_bytes, net->train.first_bucket_bytes, p->buckets);
}

/* Assigns arena places: buffers in order of first use, each at the lowest
 * place free for its whole lifetime. Batch-sized and fixed buffers are placed
 * in separate regions. */
static void place(Plan *p)
{
    int n = p->n_storages;
    int *order = malloc(sizeof *order * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        order[i] = i;
    /* insertion sort by start time: storages are created almost in order */
    for (int i = 1; i < n; i++) {
        int k = order[i], j = i - 1;
        while (j >= 0 && p->storages[order[j]].start > p->storages[k].start) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = k;
    }
    int *live = malloc(sizeof *live * (size_t)(n + 1));
    int n_live = 0;
    for (int oi = 0; oi < n; oi++) {
        Storage *s = &p->storages[order[oi]];
        bool batch = s->per_sample > 0;
        int64_t size = batch ? s->per_sample : s->fixed;
        if (!batch) { /* fixed buffers are small: no reuse, and 2-float aligned for doubles */
            s->offset = (p->arena_fixed + 1) & ~(int64_t)1;
            p->arena_fixed = s->offset + size;
            continue;
        }
        /* drop storages whose lifetime ended */
        int w = 0;
        for (int i = 0; i < n_live; i++)
            if (p->storages[live[i]].end >= s->start)
                live[w++] = live[i];
        n_live = w;
        /* lowest offset that fits between live storages (sorted by offset) */
        int64_t at = 0;
        for (int i = 0; i < n_live; i++) {
            const Storage *l = &p->storages[live[i]];
            if (l->offset >= at + size)
                break;
            if (l->offset + l->per_sample > at)
                at = l->offset + l->per_sample;
        }
        s->offset = at;
        if (at + size > p->arena_per_sample)
            p->arena_per_sample = at + size;
        int pos = n_live;
        while (pos > 0 && p->storages[live[pos - 1]].offset > at) {
            live[pos] = live[pos - 1];
            pos--;
        }
        live[pos] = order[oi];
        n_live++;
    }
    p->arena_per_sample += p->arena_per_sample & 1; /* keeps the fixed region's doubles aligned */
    free(order);
    free(live);
}

static void hash_bytes(uint64_t *h, const void *data, size_t len)
{
    const unsigned char *b = data;
    for (size_t i = 0; i < len; i++)
        *h = (*h ^ b[i]) * 1099511628211ull;
}

static void hash_str(uint64_t *h, const char *s) { hash_bytes(h, s, strlen(s) + 1); }

/* The net's meaning: ops, attributes, shapes and parameter names. Not its
 * train block, which ranks check separately, nor comments or layout. */
static void plan_hash(Arena *a, const Net *net, Plan *p)
{
    uint64_t h = 1469598103934665603ull;
    hash_str(&h, "ddpc-net-1");
    for (int i = 0; i < net->n_nodes; i++) {
        const Node *n = &net->nodes[i];
        int64_t attrs[] = {n->op, n->in, n->skip, n->out, n->in_ch, n->out_ch, n->kernel, n->stride,
                           n->pad, n->groups, n->bias, n->sync, n->gelu_tanh, n->loss, n->out_shape.rank,
                           n->out_shape.d[0], n->out_shape.d[1], n->out_shape.d[2]};
        double reals[] = {n->p, n->slope, n->eps, n->momentum};
        hash_str(&h, n->name);
        hash_bytes(&h, attrs, sizeof attrs);
        hash_bytes(&h, reals, sizeof reals);
    }
    for (int i = 0; i < net->n_params; i++) {
        hash_str(&h, net->params[i].name);
        hash_bytes(&h, net->params[i].shape, sizeof net->params[i].shape);
    }
    p->hash = arena_printf(a, "%016llx", (unsigned long long)h);
}

void plan_net(Arena *a, const Net *net, Plan *p)
{
    memset(p, 0, sizeof *p);
    int nv = net->n_values, nn = net->n_nodes;
    p->nodes = arena_alloc(a, sizeof *p->nodes * (size_t)(nn + 1));
    p->act = arena_alloc(a, sizeof *p->act * (size_t)(nv + 1));
    p->grad = arena_alloc(a, sizeof *p->grad * (size_t)(nv + 1));
    p->grad_first = arena_alloc(a, sizeof *p->grad_first * (size_t)(nn + 1));
    int *consumers = calloc((size_t)nv + 1, sizeof *consumers);
    count_consumers(net, consumers);
    for (int i = 0; i < nn; i++)
        p->nodes[i] = (NodePlan){.fused_act = -1, .fused_into = -1, .scratch = -1, .scratch2 = -1, .conv_id = -1};
    for (int v = 0; v < nv; v++)
        p->act[v] = p->grad[v] = -1;
    plan_fusion(net, p, consumers);
    plan_params(a, net, p);
    plan_bucket_layout(a, net, p);
    plan_hash(a, net, p);

    /* Activations: each value's storage, made when its producer runs forward. */
    for (int i = 0; i < nn; i++) {
        const Node *n = &net->nodes[i];
        NodePlan *np = &p->nodes[i];
        int64_t per_sample = shape_numel(n->out_shape);
        switch (n->op) {
        case OP_INPUT: break; /* ctx->x */
        case OP_FLATTEN: p->act[n->out] = p->act[n->in]; break;
        case OP_LOSS: /* per-sample loss and correctness, summed by the reduce kernel */
            np->scratch = new_storage(a, p, 2, 0, t_fwd(net, i));
            break;
        default:
            if (np->fused_into >= 0) /* the conv or linear wrote it in place */
                p->act[n->out] = p->act[n->in];
            else
                p->act[n->out] = new_storage(a, p, per_sample, 0, t_fwd(net, i));
            break;
        }
        if (n->in >= 0)
            touch(p, p->act[n->in], t_fwd(net, i));
        if (n->skip >= 0)
            touch(p, p->act[n->skip], t_fwd(net, i));
        if (n->op == OP_CONV)
            np->conv_id = p->n_convs++;
        if (n->op == OP_MAXPOOL) /* argmax of each window, for backward */
            np->scratch = new_storage(a, p, per_sample, 0, t_fwd(net, i));
        if (n->op == OP_BATCHNORM) {
            /* per channel: sums (2 doubles) and their count (1 double), then mean and 1/std (2 floats) */
            np->scratch = new_storage(a, p, 0, 4 * n->out_ch + 2, t_fwd(net, i));
            np->scratch2 = new_storage(a, p, 0, 2 * n->out_ch, t_fwd(net, i));
        }
    }

    /* Gradients, walking backward: a node's output gradient exists from its
     * first writer (the last consumer in forward order) to this node. */
    for (int i = nn - 1; i >= 0; i--) {
        const Node *n = &net->nodes[i];
        const NodePlan *np = &p->nodes[i];
        int t = t_bwd(net, i);
        /* what backward reads of the forward pass */
        switch (n->op) {
        case OP_CONV:
        case OP_LINEAR:
            touch(p, p->act[n->in], t);
            if (np->fused_act >= 0)
                touch(p, p->act[n->out], t);
            break;
        case OP_RELU:
        case OP_SIGMOID:
        case OP_TANH:
        case OP_LOG_SOFTMAX:
            if (np->fused_into < 0)
                touch(p, p->act[n->out], t);
            break;
        case OP_LEAKY_RELU:
            if (np->fused_into < 0)
                touch(p, n->slope > 0 ? p->act[n->out] : p->act[n->in], t);
            break;
        case OP_GELU:
        case OP_BATCHNORM: touch(p, p->act[n->in], t); break;
        default: break;
        }
        touch(p, np->scratch, t);
        touch(p, np->scratch2, t);
        if (n->op == OP_LOSS) /* the loss kernel writes d logits during forward */
            touch(p, p->act[n->in], t);
        touch(p, p->grad[n->out], t);

        /* the gradient of this node's input(s) */
        int inputs[2] = {n->in, n->skip};
        for (int k = 0; k < 2; k++) {
            int v = inputs[k];
            if (v <= 0 || n->op == OP_INPUT)
                continue; /* value 0 is the data: no gradient */
            if (p->grad[v] < 0) {
                bool alias = consumers[v] == 1 && (n->op == OP_FLATTEN || n->op == OP_RESIDUAL_ADD ||
                                                   np->fused_into >= 0) && k == 0 && p->grad[n->out] >= 0;
                if (alias)
                    p->grad[v] = p->grad[n->out];
                else
                    p->grad[v] = new_storage(a, p, shape_numel(net->values[v]), 0, t);
                if (k == 0)
                    p->grad_first[i] |= 1;
                else
                    p->grad_first[i] |= 2;
            }
            touch(p, p->grad[v], t);
        }
        if (n->op == OP_LOSS) { /* d logits is written at the loss's forward */
            touch(p, p->grad[n->in], t_fwd(net, i));
        }
    }
    free(consumers);
    place(p);
}
