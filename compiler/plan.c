/*
 * plan.c: decisions the emitter follows, made once from the checked Net.
 *
 *  - Fusion: an activation right after a conv or linear (and read by nothing
 *    else) is applied by the conv's bias kernel, and its backward likewise,
 *    when its derivative can be had from the output alone (relu, leaky_relu
 *    with a positive slope, sigmoid, tanh). A fused relu that only a maxpool
 *    reads has its mask applied by the pool's backward instead.
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
 *  - Layout (plan_channels_last): whether C x H x W values are stored
 *    channels-last, and so where the data is permuted on the way in and a
 *    flatten copies back to C x H x W order (their own storages).
 *  - The net's hash: what ranks and checkpoints compare to know they run the
 *    same net (not the layout, which checkpoints record apart).
 */
#include "ddpc.h"

#include <stdlib.h>
#include <string.h>

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
 * summed; the emitter writes the first contribution and adds the others.
 * READER gets each value's last reader (its only one where it has one). */
static void count_consumers(const Net *net, int *consumers, int *reader)
{
    for (int i = 0; i < net->n_nodes; i++) {
        const Node *n = &net->nodes[i];
        if (n->in >= 0) {
            consumers[n->in]++;
            reader[n->in] = i;
        }
        if (n->skip >= 0) {
            consumers[n->skip]++;
            reader[n->skip] = i;
        }
    }
}

static void plan_fusion(const Net *net, Plan *p, const int *consumers, const int *reader)
{
    for (int i = 0; i + 1 < net->n_nodes; i++) {
        const Node *n = &net->nodes[i], *act = &net->nodes[i + 1];
        /* the product's kernel overwrites x with y: only an activation
         * whose backward reads y alone may fuse */
        if (op_facts(n->op)->library_product && act->in == n->out && consumers[n->out] == 1 &&
            op_facts(act->op)->activation && op_backward_reads(act) == READS_OUTPUT) {
            p->nodes[i].fused_act = i + 1;
            p->nodes[i + 1].fused_into = i;
        }
    }
    /* A maxpool that alone reads a fused relu's output applies the relu's
     * mask in its backward, which then writes the gradient before the relu:
     * the product's backward neither reads y nor writes dy again (mnist.net's
     * conv1 and conv2: the bias gradient's kernel reads dy only). The mask
     * is the sign of the pool's own output: a window's max is its winning
     * input, which the relu made positive or zero, and only the winner gets
     * a gradient. Each input gets the same sum of the same terms as from the
     * two passes, or the relu's zero. */
    for (int i = 0; i < net->n_nodes; i++) {
        int f = p->nodes[i].fused_act;
        if (f < 0 || net->nodes[f].op != OP_RELU || consumers[net->nodes[f].out] != 1)
            continue;
        int m = reader[net->nodes[f].out];
        if (net->nodes[m].op == OP_MAXPOOL && net->nodes[m].in == net->nodes[f].out) {
            p->nodes[i].mask_in_pool = m;
            p->nodes[m].masks_for = i;
        }
    }
}

/* Reverse order of the state_dict's parameters, as DDP's reducer, each on
 * 16 bytes (ddp_param_start). */
static void plan_params(Arena *a, const Net *net, Plan *p)
{
    p->param_offset = arena_alloc(a, sizeof *p->param_offset * (size_t)(net->n_params + 1));
    int64_t trainable = 0, buffers = 0;
    for (int i = net->n_params - 1; i >= 0; i--) {
        const Param *q = &net->params[i];
        if (q->is_int64)
            p->param_offset[i] = -1; /* num_batches_tracked: the runtime's step count */
        else if (q->trainable) { /* on 16 bytes, as the bucket planner lays them out (buckets.h) */
            p->param_offset[i] = ddp_param_start(trainable);
            trainable = p->param_offset[i] + q->numel;
        } else {
            p->param_offset[i] = ddp_param_start(buffers);
            buffers = p->param_offset[i] + q->numel;
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

/* The free places of the batch region while the placer sweeps the timeline:
 * the maximal free runs between the live storages, [start, start + len), as
 * a treap ordered by start, each node also holding the longest run in its
 * subtree. The last run, past every live storage, is unbounded. The lowest
 * place where SIZE fits is then the start of the leftmost run at least SIZE
 * long, found by one walk down; a storage whose lifetime ended gives its
 * place back and joins the runs beside it. Expected O(log n) a step, so long
 * nets plan in O(n log n) where a scan of the live storages was quadratic. */
enum { GAP_NONE = -1 };
#define GAP_UNBOUNDED INT64_MAX

typedef struct {
    int64_t start, len, max;
    uint32_t prio;
    int l, r;
} Gap;

typedef struct {
    Gap *node;  /* grown as needed: there are rarely many free runs */
    int n_used, cap;
    int spare;  /* nodes given back, chained through l, for reuse */
    uint32_t seed;
    int64_t *work;
} Gaps;

static int64_t gap_max(const Gaps *g, int t) { return t == GAP_NONE ? 0 : g->node[t].max; }

static void gap_pull(Gaps *g, int t)
{
    Gap *n = &g->node[t];
    int64_t m = n->len, l = gap_max(g, n->l), r = gap_max(g, n->r);
    n->max = m > l ? (m > r ? m : r) : (l > r ? l : r);
}

static void gap_free(Gaps *g, int t)
{
    g->node[t].l = g->spare;
    g->spare = t;
}

/* The node pool may move here: no caller holds a Gap pointer across this call. */
static int gap_new(Gaps *g, int64_t start, int64_t len)
{
    int t = g->spare;
    if (t != GAP_NONE)
        g->spare = g->node[t].l;
    else {
        if (g->n_used == g->cap) {
            g->cap = g->cap ? 2 * g->cap : 64;
            g->node = realloc(g->node, sizeof *g->node * (size_t)g->cap);
            if (!g->node) {
                fputs("ddpc: internal error: out of memory\n", stderr);
                abort();
            }
        }
        t = g->n_used++;
    }
    g->seed ^= g->seed << 13; /* xorshift: the plan does not depend on the shape of the tree */
    g->seed ^= g->seed >> 17;
    g->seed ^= g->seed << 5;
    g->node[t] = (Gap){.start = start, .len = len, .max = len, .prio = g->seed, .l = GAP_NONE, .r = GAP_NONE};
    return t;
}

static int gap_merge(Gaps *g, int a, int b) /* every start in A below every start in B */
{
    ++*g->work;
    if (a == GAP_NONE)
        return b;
    if (b == GAP_NONE)
        return a;
    if (g->node[a].prio > g->node[b].prio) {
        g->node[a].r = gap_merge(g, g->node[a].r, b);
        gap_pull(g, a);
        return a;
    }
    g->node[b].l = gap_merge(g, a, g->node[b].l);
    gap_pull(g, b);
    return b;
}

/* Splits T into the runs starting below AT (*LO) and the others (*HI). */
static void gap_split(Gaps *g, int t, int64_t at, int *lo, int *hi)
{
    ++*g->work;
    if (t == GAP_NONE) {
        *lo = *hi = GAP_NONE;
        return;
    }
    if (g->node[t].start < at) {
        gap_split(g, g->node[t].r, at, &g->node[t].r, hi);
        *lo = t;
    } else {
        gap_split(g, g->node[t].l, at, lo, &g->node[t].l);
        *hi = t;
    }
    gap_pull(g, t);
}

/* Takes SIZE from the front of the leftmost run at least SIZE long; returns
 * where. The unbounded run is always long enough. */
static int64_t gap_take(Gaps *g, int *t, int64_t size)
{
    ++*g->work;
    Gap *n = &g->node[*t];
    int64_t at;
    if (gap_max(g, n->l) >= size)
        at = gap_take(g, &n->l, size);
    else if (n->len >= size) {
        at = n->start;
        n->start += size;
        if (n->len != GAP_UNBOUNDED)
            n->len -= size;
        if (n->len == 0) {
            int l = n->l, r = n->r;
            gap_free(g, *t);
            *t = gap_merge(g, l, r);
            return at;
        }
    } else
        at = gap_take(g, &n->r, size);
    gap_pull(g, *t);
    return at;
}

static int gap_edge(const Gaps *g, int t, bool right)
{
    while (t != GAP_NONE && (right ? g->node[t].r : g->node[t].l) != GAP_NONE)
        t = right ? g->node[t].r : g->node[t].l;
    return t;
}

/* Frees [at, at + size), joining the runs that end or start there. */
static void gap_give(Gaps *g, int *t, int64_t at, int64_t size)
{
    int below, above, before = GAP_NONE, prev = GAP_NONE, next = GAP_NONE, after = GAP_NONE;
    gap_split(g, *t, at, &below, &above);
    int p = gap_edge(g, below, true), q = gap_edge(g, above, false); /* q exists: the unbounded run */
    if (p != GAP_NONE)
        gap_split(g, below, g->node[p].start, &before, &prev);
    gap_split(g, above, g->node[q].start + 1, &next, &after);
    bool join_prev = prev != GAP_NONE && g->node[prev].start + g->node[prev].len == at;
    bool join_next = g->node[next].start == at + size;
    Gap *pn = join_prev ? &g->node[prev] : NULL, *nn = &g->node[next];
    if (join_prev && join_next) {
        pn->len = nn->len == GAP_UNBOUNDED ? GAP_UNBOUNDED : pn->len + size + nn->len;
        gap_free(g, next);
        next = GAP_NONE;
    } else if (join_prev)
        pn->len += size;
    else if (join_next) {
        nn->start = at;
        if (nn->len != GAP_UNBOUNDED)
            nn->len += size;
    } else
        next = gap_merge(g, gap_new(g, at, size), next);
    if (prev != GAP_NONE)
        gap_pull(g, prev);
    if (next != GAP_NONE)
        gap_pull(g, next);
    *t = gap_merge(g, gap_merge(g, before, prev), gap_merge(g, next, after));
}

static int by_start(const void *a, const void *b, void *storages)
{
    const Storage *s = storages;
    int i = *(const int *)a, j = *(const int *)b;
    int si = s[i].start, sj = s[j].start;
    return si != sj ? (si > sj) - (si < sj) : (i > j) - (i < j);
}

static int by_end(const void *a, const void *b, void *storages)
{
    const Storage *s = storages;
    int i = *(const int *)a, j = *(const int *)b;
    int ei = s[i].end, ej = s[j].end;
    return ei != ej ? (ei > ej) - (ei < ej) : (i > j) - (i < j);
}

/* What a buffer of FLOATS takes in the arena: whole units of PLAN_ARENA_ALIGN. */
static int64_t aligned_up(int64_t floats) { return (floats + PLAN_ARENA_ALIGN - 1) / PLAN_ARENA_ALIGN * PLAN_ARENA_ALIGN; }

/* Assigns arena places: buffers in order of first use (then of creation),
 * each at the lowest place free for its whole lifetime. Buffers placed
 * earlier start no later, so the ones that overlap the new lifetime are
 * exactly those still live at its start: the sweep frees every buffer whose
 * lifetime ended before that start, then takes the lowest free run that
 * fits. Batch-sized and fixed buffers are placed in separate regions, each
 * buffer taking its size rounded up to PLAN_ARENA_ALIGN floats. */
void plan_place(Plan *p)
{
    int n = p->n_storages, n_batch = 0;
    int *order = malloc(sizeof *order * (size_t)(n + 1));
    int *ending = malloc(sizeof *ending * (size_t)(n + 1));
    Gaps g = {.spare = GAP_NONE,
              .seed = 2463534242u,
              .work = &p->place_work};
    if (!order || !ending) {
        fputs("ddpc: internal error: out of memory\n", stderr);
        abort();
    }
    for (int i = 0; i < n; i++) {
        order[i] = i;
        if (p->storages[i].start > p->storages[i].end) {
            fprintf(stderr, "ddpc: internal error: storage %d lives from %d to %d\n", i, p->storages[i].start,
                    p->storages[i].end);
            abort();
        }
        if (p->storages[i].per_sample > 0)
            ending[n_batch++] = i;
    }
    qsort_r(order, (size_t)n, sizeof *order, by_start, p->storages);
    qsort_r(ending, (size_t)n_batch, sizeof *ending, by_end, p->storages);
    p->place_work += n + n_batch; /* the sorts' O(n log n) is not counted: qsort's own */
    int free_runs = gap_new(&g, 0, GAP_UNBOUNDED), n_ended = 0;
    for (int oi = 0; oi < n; oi++) {
        Storage *s = &p->storages[order[oi]];
        if (s->per_sample <= 0) { /* fixed buffers are small: no reuse */
            s->offset = aligned_up(p->arena_fixed);
            p->arena_fixed = s->offset + s->fixed;
            continue;
        }
        for (; n_ended < n_batch && p->storages[ending[n_ended]].end < s->start; n_ended++) {
            const Storage *e = &p->storages[ending[n_ended]];
            gap_give(&g, &free_runs, e->offset, aligned_up(e->per_sample));
        }
        const int64_t taken = aligned_up(s->per_sample);
        s->offset = gap_take(&g, &free_runs, taken);
        if (s->offset + taken > p->arena_per_sample)
            p->arena_per_sample = s->offset + taken;
    }
    free(order);
    free(ending);
    free(g.node);
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

static bool has_conv(const Net *net)
{
    for (int i = 0; i < net->n_nodes; i++)
        if (net->nodes[i].op == OP_CONV)
            return true;
    return false;
}

/* Whether a layer makes a C x H x W value: a net without one (the data
 * flattened at once, or rank 1) has nothing a layout could change. */
static bool makes_spatial_values(const Net *net)
{
    for (int i = 0; i < net->n_nodes; i++)
        if (net->nodes[i].op != OP_INPUT && net->nodes[i].out_shape.rank == 3)
            return true;
    return false;
}

bool plan_channels_last(const Net *net, bool gpu, LayoutRequest requested)
{
    switch (requested) {
    case LAYOUT_NCHW: return false;
    case LAYOUT_NHWC: return makes_spatial_values(net);
    case LAYOUT_AUTO: break;
    }
    return gpu && has_conv(net) && net->train.precision != DDP_PRECISION_FP32;
}

void plan_layout_summary(FILE *out, const Net *net, LayoutRequest requested)
{
    /* unasked, a net without a conv has nothing to choose for; asked, one
     * without C x H x W values has nothing to store otherwise */
    if (requested == LAYOUT_AUTO ? !has_conv(net) : !makes_spatial_values(net))
        return;
    bool gpu = plan_channels_last(net, true, requested), cpu = plan_channels_last(net, false, requested);
    if (requested != LAYOUT_AUTO)
        fprintf(out, "layout:       %s, as --layout asks\n", gpu ? "NHWC (channels-last)" : "NCHW");
    else if (gpu != cpu)
        fprintf(out, "layout:       NHWC (channels-last) on GPUs, for %s on tensor cores; NCHW on CPUs\n",
                ddp_precision_name(net->train.precision));
    else
        fprintf(out, "layout:       NCHW (NHWC on GPUs only for tf32 and bf16, which use tensor cores)\n");
}

/* Whether a value of shape S lies otherwise channels-last than in C x H x W
 * order: more than one channel and more than one pixel (one channel, or
 * one pixel, is the same floats in the same order either way). */
static bool layouts_differ(Shape s)
{
    return s.rank == 3 && s.d[0] > 1 && s.d[1] * s.d[2] > 1;
}

/* Whether flatten N's input is stored channels-last in a way a flatten's
 * C x H x W order cannot view. */
static bool flatten_permutes(const Net *net, const Plan *p, const Node *n)
{
    return p->channels_last && n->op == OP_FLATTEN && !p->is_data[n->in] && layouts_differ(net->values[n->in]);
}

/* Whether the data must be permuted to channels-last for its readers: a
 * reader other than a flatten (which reads ctx->x in C x H x W order as it
 * is). */
static bool input_permuted(const Net *net, const Plan *p)
{
    if (!p->channels_last || !layouts_differ(net->values[0]))
        return false;
    for (int i = 0; i < net->n_nodes; i++) {
        const Node *n = &net->nodes[i];
        if ((n->in == 0 || n->skip == 0) && op_facts(n->op)->output != OUT_VIEW)
            return true;
    }
    return false;
}

void plan_net(Arena *a, const Net *net, bool channels_last, Plan *p)
{
    memset(p, 0, sizeof *p);
    int nv = net->n_values, nn = net->n_nodes;
    p->nodes = arena_alloc(a, sizeof *p->nodes * (size_t)(nn + 1));
    p->act = arena_alloc(a, sizeof *p->act * (size_t)(nv + 1));
    p->grad = arena_alloc(a, sizeof *p->grad * (size_t)(nv + 1));
    p->grad_first = arena_alloc(a, sizeof *p->grad_first * (size_t)(nn + 1));
    int *consumers = calloc((size_t)nv + 1, sizeof *consumers);
    int *reader = arena_alloc(a, sizeof *reader * ((size_t)nv + 1));
    count_consumers(net, consumers, reader);
    for (int i = 0; i < nn; i++) {
        p->nodes[i] = (NodePlan){.fused_act = -1, .fused_into = -1, .mask_in_pool = -1, .masks_for = -1, .conv_id = -1};
        for (int k = 0; k < OP_MAX_SCRATCH; k++)
            p->nodes[i].scratch[k] = -1;
    }
    for (int v = 0; v < nv; v++)
        p->act[v] = p->grad[v] = -1;
    /* The data: value 0, and a flatten of it (`input 1x28x28; flatten`), a
     * view of the same floats: ctx->x, which nothing writes and which needs
     * no gradient. Values are made in node order, so one pass follows a
     * chain of flattens. */
    p->is_data = arena_alloc(a, sizeof *p->is_data * (size_t)(nv + 1));
    for (int v = 0; v <= nv; v++)
        p->is_data[v] = v == 0;
    for (int i = 0; i < nn; i++) {
        const Node *n = &net->nodes[i];
        if (op_facts(n->op)->output == OUT_VIEW && n->in >= 0 && p->is_data[n->in])
            p->is_data[n->out] = true;
    }
    /* The backward pass carries a gradient only as far back as the first
     * trainable parameter: nothing before it would use one. */
    p->carries_grad = arena_alloc(a, sizeof *p->carries_grad * (size_t)(nv + 1));
    for (int v = 0; v <= nv; v++)
        p->carries_grad[v] = false;
    for (int i = 0; i < nn; i++) {
        const Node *n = &net->nodes[i];
        if (n->out >= 0)
            p->carries_grad[n->out] = n->params > 0 || (n->in >= 0 && p->carries_grad[n->in]) ||
                                      (n->skip >= 0 && p->carries_grad[n->skip]);
    }
    p->channels_last = channels_last;
    p->input_permuted = input_permuted(net, p);
    for (int i = 0; i < nn; i++)
        p->nodes[i].flatten_permutes = flatten_permutes(net, p, &net->nodes[i]);
    plan_fusion(net, p, consumers, reader);
    plan_params(a, net, p);
    plan_bucket_layout(a, net, p);
    plan_hash(a, net, p);

    /* Activations: each value's storage, made when its producer runs forward. */
    for (int i = 0; i < nn; i++) {
        const Node *n = &net->nodes[i];
        NodePlan *np = &p->nodes[i];
        switch (op_facts(n->op)->output) {
        case OUT_DATA: /* ctx->x, or its channels-last copy */
            if (p->input_permuted)
                p->act[n->out] = new_storage(a, p, shape_numel(n->out_shape), 0, t_fwd(net, i));
            break;
        case OUT_LOSS: break; /* its rows are scratch */
        case OUT_VIEW:
            if (np->flatten_permutes)
                p->act[n->out] = new_storage(a, p, shape_numel(n->out_shape), 0, t_fwd(net, i));
            else if (!p->is_data[n->in]) /* a flatten of the data reads ctx->x */
                p->act[n->out] = p->act[n->in];
            break;
        case OUT_NEW:
            if (np->fused_into >= 0) /* the conv or linear wrote it in place */
                p->act[n->out] = p->act[n->in];
            else
                p->act[n->out] = new_storage(a, p, shape_numel(n->out_shape), 0, t_fwd(net, i));
            break;
        }
        if (n->in >= 0)
            touch(p, p->act[n->in], t_fwd(net, i));
        if (n->skip >= 0)
            touch(p, p->act[n->skip], t_fwd(net, i));
        if (n->op == OP_CONV)
            np->conv_id = p->n_convs++;
        for (int k = 0; k < OP_MAX_SCRATCH; k++) {
            int64_t per_sample, fixed;
            op_scratch_floats(n, k, &per_sample, &fixed);
            if (per_sample || fixed)
                np->scratch[k] = new_storage(a, p, per_sample, fixed, t_fwd(net, i));
        }
    }

    /* Gradients, walking backward: a node's output gradient exists from its
     * first writer (the last consumer in forward order) to this node. */
    for (int i = nn - 1; i >= 0; i--) {
        const Node *n = &net->nodes[i];
        const NodePlan *np = &p->nodes[i];
        int t = t_bwd(net, i);
        /* what backward reads of the forward pass */
        if (np->fused_into < 0) { /* a fused activation's reads are its product's */
            switch (op_backward_reads(n)) {
            case READS_NOTHING: break;
            case READS_INPUT: touch(p, p->act[n->in], t); break;
            case READS_OUTPUT: touch(p, p->act[n->out], t); break;
            case READS_OUTPUT_IF_SLOPE_POSITIVE: /* op_backward_reads resolves it to one of the two above */
                fprintf(stderr, "ddpc: internal error: plan.c: what %s's backward reads is unresolved\n", n->name);
                abort();
            }
        }
        if (np->fused_act >= 0 && np->mask_in_pool < 0) /* the activation's y, which is where its product wrote */
            touch(p, p->act[n->out], t);
        if (np->masks_for >= 0) /* the pool's own output: its sign is the relu's mask */
            touch(p, p->act[n->out], t);
        for (int k = 0; k < OP_MAX_SCRATCH; k++)
            touch(p, np->scratch[k], t);
        touch(p, p->grad[n->out], t);

        /* the gradient of this node's input(s) */
        int inputs[2] = {n->in, n->skip};
        for (int k = 0; k < 2; k++) {
            int v = inputs[k];
            if (v < 0 || !p->carries_grad[v] || op_facts(n->op)->output == OUT_DATA)
                continue; /* the data, or a value before any parameter: no gradient */
            if (p->grad[v] < 0) {
                bool passes = op_facts(n->op)->gradient_passes && !np->flatten_permutes;
                bool alias = consumers[v] == 1 && (passes || np->fused_into >= 0) && k == 0 && p->grad[n->out] >= 0;
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
        if (op_facts(n->op)->output == OUT_LOSS) { /* d logits is written at the loss's forward */
            touch(p, p->grad[n->in], t_fwd(net, i));
        }
    }
    free(consumers);
    plan_place(p);
}
