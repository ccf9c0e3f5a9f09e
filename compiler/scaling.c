/*
 * scaling.c: scaling on paper (`ddpc --emit plan --world N --link GBPS`).
 *
 * Predicts a training step at N ranks from the net's FLOPs and its gradient
 * buckets, before anyone pays for N GPUs:
 *
 *  - compute: forward is the summary's FLOPs per sample times a rank's batch
 *    at the rate given (--tflops, what one rank achieves, not its peak).
 *    Backward walks the layers in reverse: a conv or linear layer costs its
 *    forward twice (the weight gradient, and the input gradient unless its
 *    input is the data), any other layer once. On CPUs each part of a weight
 *    gradient's order-free sum (exact_sum.h) costs some FLOPs' time more.
 *  - buckets: a bucket is ready when the backward of the last of its
 *    parameters' layers is done (buckets fill in reverse order, as the
 *    reducer launches them). Its ring all-reduce takes 2(N-1) hops of the
 *    link's latency plus 2(N-1)/N of its bytes at the link's bandwidth (each
 *    rank sends and receives that much, reduce-scatter then all-gather). The
 *    all-reduces run one at a time, in order, each starting when its bucket
 *    is ready and the one before it is done.
 *  - exposed communication: what the last all-reduce runs past the end of
 *    backward. Scaling efficiency: samples/s at N ranks over N times those of
 *    one rank (which has no all-reduce), each with its own batch a rank (the
 *    same, or the global batch's share with `batch N global`).
 *
 * Left out, and said so in the output: the optimizer, the data loader, and
 * the link's sharing with compute (on CPUs the all-reduce runs on the cores
 * backward uses; on GPUs NCCL takes some SMs). The ring runs every hop at the
 * one link's speed, as a ring across nodes does at the network's (inside a
 * node NVLink is faster, so this errs on the slow side).
 */
#include "ddpc.h"

enum { MS_PER_S = 1000 };

/* The backward FLOPs of node N, per sample, with the cost of its order-free
 * weight-gradient parts where the target has them (ScalingModel). A layer
 * computes its input's gradient only where one is carried (plan.c), and a
 * layer without parameters before the first that has some has no backward. */
static double backward_flops(const Plan *plan, const ScalingModel *m, const Node *n)
{
    if (!op_facts(n->op)->library_product) /* backward: one op of forward's cost, where a gradient reaches it */
        return n->out < 0 || plan->carries_grad[n->out] ? (double)n->flops : 0; /* the loss (no value) starts it */
    bool dx = plan->carries_grad[n->in];
    /* a linear layer's parts are its products; a conv's, each sample's
     * product (summed over the image) per weight */
    double parts = n->op == OP_LINEAR ? (double)n->flops / 2 : (double)n->params;
    return (double)n->flops * (dx ? 2 : 1) + parts * m->flops_per_exact_part;
}

/* Forward and backward of a rank's batch, and when each bucket is ready. */
static void step_compute(Arena *a, const Net *net, const Plan *plan, const ScalingModel *m, ScalingStep *p)
{
    double flops_per_s = m->tflops * 1e12;
    double batch = (double)p->batch;
    p->forward_s = (double)net->total_flops * batch / flops_per_s;
    /* each parameter's gradient is ready when its layer's backward is done */
    double *param_ready = arena_alloc(a, sizeof *param_ready * (size_t)(net->n_params + 1));
    double t = 0;
    for (int i = net->n_nodes - 1; i >= 0; i--) {
        const Node *n = &net->nodes[i];
        t += backward_flops(plan, m, n) * batch / flops_per_s;
        for (int q = n->first_param; q < n->first_param + n->n_params; q++)
            param_ready[q] = t;
    }
    p->backward_s = t;
    for (int b = 0; b < plan->n_buckets; b++) {
        const DdpBucket *k = &plan->buckets[b];
        double ready = 0;
        for (int j = k->first; j < k->first + k->n_params; j++)
            if (param_ready[plan->bucket_param[j]] > ready)
                ready = param_ready[plan->bucket_param[j]];
        p->buckets[b].ready_s = ready;
    }
}

double scaling_ring_allreduce_s(const ScalingLink *link, int64_t world, double bytes)
{
    if (world <= 1)
        return 0;
    double hops = 2.0 * (double)(world - 1);
    double bytes_per_s = link->gbit_per_s * 1e9 / 8;
    return hops * link->hop_latency_s + hops / (double)world * bytes / bytes_per_s;
}

bool scaling_predict(Arena *a, const Net *net, const Plan *plan, const ScalingModel *m, int64_t world,
                     ScalingStep *p)
{
    const TrainConfig *t = &net->train;
    *p = (ScalingStep){.world = world, .batch = t->batch_global ? t->batch / world : t->batch};
    if (t->batch_global && t->batch % world != 0)
        return false;
    p->buckets = arena_alloc(a, sizeof *p->buckets * (size_t)(plan->n_buckets + 1));
    step_compute(a, net, plan, m, p);
    double done = 0;
    for (int b = 0; b < plan->n_buckets; b++) {
        ScalingBucket *k = &p->buckets[b];
        k->bytes = (double)plan->buckets[b].count * m->bytes_per_gradient;
        k->start_s = k->ready_s > done ? k->ready_s : done;
        k->allreduce_s = scaling_ring_allreduce_s(&m->link, world, k->bytes);
        done = k->done_s = k->start_s + k->allreduce_s;
        p->allreduce_s += k->allreduce_s;
    }
    p->exposed_s = done > p->backward_s ? done - p->backward_s : 0;
    p->step_s = p->forward_s + p->backward_s + p->exposed_s;
    p->samples_per_s = p->step_s > 0 ? (double)(p->batch * world) / p->step_s : 0;
    return true;
}

static void print_timeline(FILE *out, const Plan *plan, const ScalingStep *p)
{
    fprintf(out, "\nworld %lld, batch %lld a rank: forward %.3f ms, backward %.3f ms\n"
                 "bucket       bytes   ready_ms   start_ms  allreduce_ms   done_ms\n",
            (long long)p->world, (long long)p->batch, p->forward_s * MS_PER_S, p->backward_s * MS_PER_S);
    for (int b = 0; b < plan->n_buckets; b++) {
        const ScalingBucket *k = &p->buckets[b];
        fprintf(out, "%6d  %10.0f  %9.3f  %9.3f  %12.3f  %8.3f\n", b, k->bytes, k->ready_s * MS_PER_S,
                k->start_s * MS_PER_S, k->allreduce_s * MS_PER_S, k->done_s * MS_PER_S);
    }
}

static void print_row(FILE *out, const ScalingStep *p, double efficiency)
{
    fprintf(out, "%6lld  %10.3f  %12.3f  %10.3f  %12.0f  %9.1f%%\n", (long long)p->world, p->step_s * MS_PER_S,
            p->allreduce_s * MS_PER_S, p->exposed_s * MS_PER_S, p->samples_per_s, 100 * efficiency);
}

void scaling_print(Arena *a, FILE *out, const Net *net, const Plan *plan, const ScalingModel *m)
{
    fprintf(out, "\nscaling on paper: a ring all-reduce over %.6g Gb/s links (--link), %.6g us a hop (--hop-us); "
                 "%.6g TFLOP/s a rank (--tflops); gradients of %d bytes on the wire (--target %s)\n",
            m->link.gbit_per_s, m->link.hop_latency_s * 1e6, m->tflops, m->bytes_per_gradient, m->target);
    fprintf(out, "not counted: the optimizer, the data loader, the all-reduce's share of the compute, and NCCL's "
                 "trees for small messages; every hop at --link's speed, also inside a node\n");
    ScalingStep one, *at = arena_alloc(a, sizeof *at * (size_t)(m->n_worlds + 1));
    scaling_predict(a, net, plan, m, 1, &one); /* one rank takes any batch */
    bool *divides = arena_alloc(a, sizeof *divides * (size_t)(m->n_worlds + 1));
    for (int i = 0; i < m->n_worlds; i++) {
        divides[i] = scaling_predict(a, net, plan, m, m->worlds[i], &at[i]);
        if (divides[i])
            print_timeline(out, plan, &at[i]);
        else
            fprintf(out, "\nworld %lld: the global batch of %lld does not divide among %lld ranks\n",
                    (long long)m->worlds[i], (long long)net->train.batch, (long long)m->worlds[i]);
    }
    fprintf(out, "\n world     step_ms  allreduce_ms  exposed_ms     samples/s  efficiency\n");
    print_row(out, &one, 1);
    for (int i = 0; i < m->n_worlds; i++)
        if (divides[i] && m->worlds[i] != 1) /* one rank is the first row */
            print_row(out, &at[i], at[i].samples_per_s / ((double)m->worlds[i] * one.samples_per_s));
}
