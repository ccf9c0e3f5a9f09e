/*
 * pg_helper.c: the MPI process group and the reducer across real ranks.
 *
 * The unit tests (test_pg.c, test_reducer.c) build this program against
 * build/libddprt.a and run it under `mpirun -np N`; every rank checks its own
 * results and says "rank R: PASS MODE" or "rank R: FAIL: why". The modes:
 *
 *   collectives   broadcast, all-reduce (SUM/AVG/MAX on F32/F64/I64), all-gather
 *                 (also in place), barrier, many bucket all-reduces in flight,
 *                 rank 0's texts to every rank (ddp_dist_broadcast_text)
 *   determinism   random floats of mixed magnitudes: every rank gets the same
 *                 bits, run after run (and the exact sum with two ranks)
 *   reducer       buckets launched in order although ranks announce gradients
 *                 in different orders; sums exact (doubles, and floats as on
 *                 GPUs); no_sync; overlap (a bucket
 *                 is reduced while the trainer goes on); the step's checks
 *   timeout KIND  rank 0 calls a collective (bucket: an all-reduce of "bucket 3";
 *                 broadcast) that rank 1 never calls: it must fail within the
 *                 1 s timeout with the message, and later calls at once
 *   abort         rank 1 fails and aborts while rank 0 waits in an all-reduce
 *                 (60 s timeout): mpirun must end the job at once
 *   mismatch      rank 0 starts an evaluation all-reduce of 3 doubles where
 *                 rank 1 starts a gradient bucket of 184586 doubles: both fail
 *                 at once, before any data moves, naming both sides
 *
 * The topology is read from mpirun's environment here, not with
 * ddp_topology_read, so that this tests the process group alone.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "distributed.h"  // ddp_dist_broadcast_text
#include "pg.h"       // ddp_pg_*
#include "reducer.h"  // ddp_reducer_*

static int rank_, size_, failures;

#define CHECK(cond, ...)                                  \
    do {                                                  \
        if (!(cond)) {                                    \
            printf("rank %d: FAIL: line %d: ", rank_, __LINE__); \
            printf(__VA_ARGS__);                          \
            printf("\n");                                 \
            fflush(stdout);                               \
            failures++;                                   \
        }                                                 \
    } while (0)

#define OK(call) CHECK((call) == DDP_OK, "%s: %s", #call, ddp_error_message())

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int env_int(const char *name)
{
    const char *v = getenv(name);
    return v ? atoi(v) : -1;
}

static DdpProcessGroup *open_group(double timeout_s)
{
    DdpTopology t = {.rank = env_int("OMPI_COMM_WORLD_RANK"),
                     .world_size = env_int("OMPI_COMM_WORLD_SIZE"),
                     .local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK"),
                     .local_world_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE"),
                     .launch = DDP_LAUNCH_MPIRUN};
    rank_ = t.rank;
    size_ = t.world_size;
    DdpProcessGroup *pg = NULL;
    if (ddp_pg_create(&pg, DDP_PG_MPI, &t, NULL, NULL, timeout_s) != DDP_OK) {
        printf("rank %d: FAIL: ddp_pg_create: %s\n", rank_, ddp_error_message());
        exit(1);
    }
    return pg;
}

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3u;
    return h;
}

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* Rank R's I-th value: mixed signs and magnitudes (1e-3 .. 1e3), so that the
 * order of a sum changes its rounding. */
static float value(int r, size_t i)
{
    uint64_t h = splitmix(((uint64_t)r << 40) ^ i);
    double u = (double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    static const double scale[] = {1e-3, 1.0, 1e3, 0.37};
    return (float)(u * scale[(h >> 3) & 3]);
}

/* ---- collectives ---------------------------------------------------------------- */

/* ddp_dist_broadcast_text over PG: rank 0's texts of 0 to 300 bytes, the
 * word boundaries among them, whole on every rank. */
static void broadcast_texts(DdpProcessGroup *pg)
{
    DdpDist d;
    memset(&d, 0, sizeof d);
    d.pg = pg, d.rank = rank_, d.world = size_;
    static const int lengths[] = {0, 1, 7, 8, 9, 300};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
        char want[301], text[302];
        for (int j = 0; j < lengths[i]; j++)
            want[j] = (char)('a' + (j * 7 + (int)i) % 26);
        want[lengths[i]] = '\0';
        snprintf(text, sizeof text, "%s", rank_ == 0 ? want : "stale text of another length, longer than some");
        OK(ddp_dist_broadcast_text(&d, text, sizeof text));
        CHECK(strcmp(text, want) == 0, "broadcast text of %d bytes: got '%.40s'", lengths[i], text);
    }
}

static void mode_collectives(DdpProcessGroup *pg)
{
    const int W = size_, r = rank_;
    CHECK(ddp_pg_rank(pg) == r && ddp_pg_size(pg) == W, "rank/size %d/%d", ddp_pg_rank(pg), ddp_pg_size(pg));
    CHECK(ddp_pg_backend(pg) == DDP_PG_MPI, "backend %d", (int)ddp_pg_backend(pg));

    float f[1000];
    for (int i = 0; i < 1000; i++)
        f[i] = r == 0 ? (float)i * 0.5f : -1.0f;
    OK(ddp_pg_broadcast(pg, f, 1000, DDP_F32, 0));
    int bad = 0;
    for (int i = 0; i < 1000; i++)
        bad += f[i] != (float)i * 0.5f;
    CHECK(!bad, "broadcast F32 from 0: %d wrong", bad);

    int64_t l[5];
    for (int i = 0; i < 5; i++)
        l[i] = r == W - 1 ? ((int64_t)1 << 50) + i : 0;
    OK(ddp_pg_broadcast(pg, l, 5, DDP_I64, W - 1));
    CHECK(l[0] == (int64_t)1 << 50 && l[4] == ((int64_t)1 << 50) + 4, "broadcast I64 from %d", W - 1);

    double d[3] = {r == 1 ? 1.25 : 0, r == 1 ? -2.5 : 0, r == 1 ? 1e300 : 0};
    OK(ddp_pg_broadcast(pg, d, 3, DDP_F64, 1));
    CHECK(d[0] == 1.25 && d[1] == -2.5 && d[2] == 1e300, "broadcast F64 from 1");

    unsigned char u[6] = "-----";
    if (r == 0)
        memcpy(u, "hello", 6);
    OK(ddp_pg_broadcast(pg, u, 6, DDP_U8, 0));
    CHECK(memcmp(u, "hello", 6) == 0, "broadcast U8: %s", u);

    /* all-reduce: small integers, so sums and averages are exact */
    for (int i = 0; i < 1000; i++)
        f[i] = (float)(r + i);
    OK(ddp_pg_allreduce(pg, f, 1000, DDP_F32, DDP_SUM));
    bad = 0;
    for (int i = 0; i < 1000; i++)
        bad += f[i] != (float)(W * i + W * (W - 1) / 2);
    CHECK(!bad, "all-reduce SUM F32: %d wrong", bad);

    for (int i = 0; i < 1000; i++)
        f[i] = (float)((r + 1) * i);
    OK(ddp_pg_allreduce(pg, f, 1000, DDP_F32, DDP_AVG));
    bad = 0;
    for (int i = 0; i < 1000; i++)
        bad += f[i] != (float)i * (float)(W + 1) / 2.0f;
    CHECK(!bad, "all-reduce AVG F32: %d wrong (f[3] = %g)", bad, (double)f[3]);

    double dd[4] = {r * 1.0, r * 2.0, -r * 4.0, 1e-300};
    OK(ddp_pg_allreduce(pg, dd, 4, DDP_F64, DDP_AVG));
    CHECK(dd[0] == (W - 1) / 2.0 && dd[1] == (W - 1) * 1.0 && dd[2] == -(W - 1) * 2.0 && dd[3] == 1e-300,
          "all-reduce AVG F64: %g %g %g %g", dd[0], dd[1], dd[2], dd[3]);

    int64_t m[3] = {r * 10, -r, ((int64_t)1 << 40) + r};
    OK(ddp_pg_allreduce(pg, m, 3, DDP_I64, DDP_MAX));
    CHECK(m[0] == (W - 1) * 10 && m[1] == 0 && m[2] == ((int64_t)1 << 40) + W - 1, "all-reduce MAX I64");
    int64_t s[2] = {((int64_t)1 << 40) + r, 1};
    OK(ddp_pg_allreduce(pg, s, 2, DDP_I64, DDP_SUM));
    CHECK(s[0] == ((int64_t)W << 40) + W * (W - 1) / 2 && s[1] == W, "all-reduce SUM I64");
    float mx[2] = {(float)r, -(float)r};
    OK(ddp_pg_allreduce(pg, mx, 2, DDP_F32, DDP_MAX));
    CHECK(mx[0] == (float)(W - 1) && mx[1] == 0.0f, "all-reduce MAX F32");
    CHECK(ddp_pg_allreduce(pg, l, 5, DDP_I64, DDP_AVG) == DDP_FAIL && strstr(ddp_error_message(), "internal error"),
          "AVG of int64 must be refused: %s", ddp_error_message());

    /* all-gather, apart and in place */
    double send[5], recv[5 * 16];
    for (int i = 0; i < 5; i++)
        send[i] = r * 100 + i;
    OK(ddp_pg_allgather(pg, send, recv, 5, DDP_F64));
    bad = 0;
    for (int k = 0; k < W; k++)
        for (int i = 0; i < 5; i++)
            bad += recv[k * 5 + i] != k * 100 + i;
    CHECK(!bad, "all-gather F64: %d wrong", bad);
    memset(recv, 0, sizeof recv);
    for (int i = 0; i < 5; i++)
        recv[r * 5 + i] = r * 100 + i;
    OK(ddp_pg_allgather(pg, recv + r * 5, recv, 5, DDP_F64));
    bad = 0;
    for (int k = 0; k < W; k++)
        for (int i = 0; i < 5; i++)
            bad += recv[k * 5 + i] != k * 100 + i;
    CHECK(!bad, "all-gather F64 in place: %d wrong", bad);
    unsigned char me = (unsigned char)('a' + r), all[16] = {0};
    OK(ddp_pg_allgather(pg, &me, all, 1, DDP_U8));
    CHECK(all[0] == 'a' && all[W - 1] == 'a' + W - 1, "all-gather U8");

    /* nothing to do */
    OK(ddp_pg_allreduce(pg, NULL, 0, DDP_F32, DDP_SUM));
    OK(ddp_pg_broadcast(pg, NULL, 0, DDP_F32, 0));

    /* barrier: nobody leaves before rank 0, which arrives 1 s late; each
     * rank's clock starts when it left the last collective, which on a busy
     * machine can be a few hundred ms after rank 0 left it */
    double t0 = now();
    if (r == 0)
        sleep_s(1.0);
    OK(ddp_pg_barrier(pg));
    CHECK(now() - t0 > 0.5, "left the barrier after %.3f s, before rank 0 arrived", now() - t0);

    /* many bucket all-reduces in flight, waited for in order, and a large one */
    enum { NB = 40, NF = 1000 };
    static float bufs[NB][NF];
    DdpWork *works[NB];
    for (int b = 0; b < NB; b++) {
        for (int i = 0; i < NF; i++)
            bufs[b][i] = (float)((r + 1) * (b + i));
        char what[16];
        snprintf(what, sizeof what, "bucket %d", b);
        OK(ddp_pg_allreduce_start(pg, bufs[b], NF, DDP_F32, DDP_AVG, what, &works[b]));
    }
    for (int b = 0; b < NB; b++)
        OK(ddp_pg_wait(pg, works[b]));
    bad = 0;
    for (int b = 0; b < NB; b++)
        for (int i = 0; i < NF; i++)
            bad += bufs[b][i] != (float)(b + i) * (float)(W + 1) / 2.0f;
    CHECK(!bad, "%d buckets in flight: %d wrong", NB, bad);

    size_t n = (size_t)3 << 20;
    float *big = malloc(n * sizeof *big);
    for (size_t i = 0; i < n; i++)
        big[i] = (float)((i % 1000) * (size_t)(r + 1));
    DdpWork *w = NULL;
    OK(ddp_pg_allreduce_start(pg, big, n, DDP_F32, DDP_SUM, "bucket 0", &w));
    OK(ddp_pg_wait(pg, w));
    bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += big[i] != (float)((i % 1000) * (size_t)(W * (W + 1) / 2));
    CHECK(!bad, "all-reduce of 12 MB: %d wrong", bad);
    free(big);
    broadcast_texts(pg);
    OK(ddp_pg_status(pg));
}

/* ---- determinism -------------------------------------------------------------------- */

static void mode_determinism(DdpProcessGroup *pg)
{
    static const size_t sizes[] = {1, 7, 1000, 65539, (1 << 20) + 5, 4 << 20};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        size_t n = sizes[c];
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        for (int op = 0; op < 2; op++) {
            DdpPgOp o = op ? DDP_AVG : DDP_SUM;
            uint64_t h[2];
            for (int run = 0; run < 2; run++) {
                for (size_t i = 0; i < n; i++)
                    x[i] = value(rank_, i);
                if (run == 0) {
                    OK(ddp_pg_allreduce(pg, x, n, DDP_F32, o));
                } else {
                    DdpWork *w = NULL;
                    OK(ddp_pg_allreduce_start(pg, x, n, DDP_F32, o, "bucket 0", &w));
                    OK(ddp_pg_wait(pg, w));
                }
                h[run] = fnv1a(x, n * sizeof *x);
            }
            CHECK(h[0] == h[1], "%zu floats, %s: the blocking and the bucket all-reduce differ", n, op ? "AVG" : "SUM");
            int64_t mine = (int64_t)h[0], all[16];
            OK(ddp_pg_allgather(pg, &mine, all, 1, DDP_I64));
            int differ = 0;
            for (int k = 0; k < size_; k++)
                differ += all[k] != mine;
            CHECK(!differ, "%zu floats, %s: %d ranks got other bits than this one", n, op ? "AVG" : "SUM", differ);

            /* against the sum made here: exact with two ranks (one rounding), close otherwise */
            size_t wrong = 0;
            double worst = 0;
            for (size_t i = 0; i < n; i++) {
                float s = 0;
                for (int k = 0; k < size_; k++)
                    s += value(k, i);
                if (op)
                    s /= (float)size_;
                y[i] = s;
                double err = fabs((double)x[i] - (double)y[i]);
                double tol = 1e-6 * size_ * 1e3;
                if (size_ == 2 ? x[i] != y[i] : err > tol)
                    wrong++;
                if (err > worst)
                    worst = err;
            }
            CHECK(!wrong, "%zu floats, %s: %zu differ from the sum made here (worst %g)", n, op ? "AVG" : "SUM",
                  wrong, worst);
        }
        free(x);
        free(y);
    }
}

/* ---- reducer ------------------------------------------------------------------------ */

/* mnist's parameters; trainable ones laid out last first, each on 4 floats,
 * as ddpc does (buckets.h) */
static DdpParamInfo params[8] = {
    {.name = "conv1.weight", .numel = 800},   {.name = "conv1.bias", .numel = 32},
    {.name = "conv2.weight", .numel = 51200}, {.name = "conv2.bias", .numel = 64},
    {.name = "linear1.weight", .numel = 131072}, {.name = "linear1.bias", .numel = 128},
    {.name = "linear2.weight", .numel = 1280}, {.name = "linear2.bias", .numel = 10},
};
enum { NFLOATS = 184588 }; /* 184586 elements, and 2 floats after linear2.bias */

static DdpNet make_net(int64_t cap, int64_t first)
{
    int64_t off = 0;
    for (int i = 7; i >= 0; i--) {
        params[i].trainable = 1;
        params[i].ndim = 1;
        params[i].shape[0] = params[i].numel;
        params[i].offset = (off + 3) / 4 * 4;
        off = params[i].offset + params[i].numel;
    }
    DdpNet net = {.name = "mnist", .params = params, .n_params = 8, .n_param_floats = NFLOATS,
                  .grad_bytes = sizeof(DdpGrad)};
    net.train.bucket_cap_bytes = cap;
    net.train.first_bucket_bytes = first;
    return net;
}

/* This rank's gradient (the HI of an order-free sum, as on CPUs; LO is a
 * quarter of it): small multiples of 1/4, so that sums are exact. */
static double grad(int r, size_t i) { return (r + 1) * (double)(i % 97) * 0.25; }

/* The sum over ranks of (r + 1) v: the reducer sums (each rank's gradient is
 * already of the global batch's mean loss). */
static double summed(size_t i) { return (double)(i % 97) * 0.25 * (size_ * (size_ + 1) / 2); }

static int check_grads(const DdpGrad *g, double times, const char *what)
{
    /* times TIMES accumulated steps, both halves of each sum */
    size_t bad = 0;
    for (size_t i = 0; i < NFLOATS; i++)
        bad += g[i].hi != times * summed(i) || g[i].lo != times * summed(i) / 4;
    CHECK(!bad, "%s: %zu gradients are not the sum", what, bad);
    return bad == 0;
}

static void fill(DdpGrad *g, int add)
{
    for (size_t i = 0; i < NFLOATS; i++) {
        g[i].hi = add ? g[i].hi + grad(rank_, i) : grad(rank_, i);
        g[i].lo = add ? g[i].lo + grad(rank_, i) / 4 : grad(rank_, i) / 4;
    }
}

/* the generated backward's order (last layer first, weight before bias) */
static const int backward_order[8] = {6, 7, 4, 5, 2, 3, 0, 1};
/* parameter order: the last bucket completes first, every bucket must wait */
static const int forward_order[8] = {0, 1, 2, 3, 4, 5, 6, 7};

static void announce(DdpCtx *ctx, const int *order, double pause)
{
    for (int k = 0; k < 8; k++) {
        ctx->grad_ready(ctx, order[k]);
        if (pause > 0)
            sleep_s(pause);
    }
}

static void mode_reducer(DdpProcessGroup *pg)
{
    DdpGrad *g = calloc(NFLOATS, sizeof *g);
    /* 4 KB buckets: {linear2}, {linear1}, {conv2}, {conv1}, in that order */
    DdpNet net = make_net(4096, 4096);
    DdpReducer *r = NULL;
    OK(ddp_reducer_create(&r, pg, &net, g, -1));
    int nb = 0;
    const DdpBucket *b = ddp_reducer_buckets(r, &nb);
    CHECK(nb == 4 && b[0].count == 1292 && b[1].count == 131200 && b[2].count == 51264 && b[3].count == 832,
          "bucket plan: %d buckets", nb);
    DdpCtx ctx = {.grad_ready = ddp_reducer_grad_ready, .reducer = r};

    /* ranks announce in different orders; rank 1 completes the last bucket first */
    for (int overlap = 1; overlap >= 0; overlap--) {
        ddp_reducer_set_overlap(r, overlap);
        for (int step = 0; step < 3; step++) {
            fill(g, 0);
            announce(&ctx, rank_ % 2 ? forward_order : backward_order, rank_ == 0 ? 0.002 : 0);
            OK(ddp_reducer_finish(r));
            char what[64];
            snprintf(what, sizeof what, "overlap %d, step %d", overlap, step);
            check_grads(g, 1, what);
        }
    }
    ddp_reducer_set_overlap(r, 1);

    /* no_sync: the skipped step keeps the local gradients, the next carries both */
    fill(g, 0);
    ddp_reducer_skip(r);
    announce(&ctx, backward_order, 0);
    OK(ddp_reducer_finish(r));
    size_t local = 0;
    for (size_t i = 0; i < NFLOATS; i++)
        local += g[i].hi == grad(rank_, i) && g[i].lo == grad(rank_, i) / 4;
    CHECK(local == NFLOATS, "no_sync step: %zu of %d gradients left local", local, NFLOATS);
    fill(g, 1);
    announce(&ctx, backward_order, 0);
    OK(ddp_reducer_finish(r));
    check_grads(g, 2, "the step after no_sync");

    /* overlap: bucket 0 is reduced while this thread goes on, before finish */
    fill(g, 0);
    ctx.grad_ready(&ctx, 6);
    ctx.grad_ready(&ctx, 7);
    double t0 = now();
    int reduced = 0;
    while (!reduced && now() - t0 < 5) {
        reduced = 1;
        for (size_t i = 0; i < 1292 && reduced; i++)
            reduced = ((volatile DdpGrad *)g)[i].hi == summed(i);
        if (!reduced)
            sleep_s(0.001);
    }
    CHECK(reduced, "bucket 0 was not reduced before finish (no overlap)");
    for (int k = 2; k < 8; k++)
        ctx.grad_ready(&ctx, backward_order[k]);
    OK(ddp_reducer_finish(r));
    check_grads(g, 1, "overlap");

    /* the step's checks: a gradient missing, a gradient twice; then steps go on */
    fill(g, 0);
    for (int k = 0; k < 7; k++)
        ctx.grad_ready(&ctx, backward_order[k]); /* conv1.bias never */
    CHECK(ddp_reducer_finish(r) == DDP_FAIL &&
              strstr(ddp_error_message(), "internal error: parameter conv1.bias got no gradient this step"),
          "missing gradient: %s", ddp_error_message());
    fill(g, 0);
    announce(&ctx, backward_order, 0);
    ctx.grad_ready(&ctx, 7);
    CHECK(ddp_reducer_finish(r) == DDP_FAIL && strstr(ddp_error_message(), "linear2.bias got its gradient twice"),
          "gradient twice: %s", ddp_error_message());
    fill(g, 0);
    announce(&ctx, backward_order, 0);
    OK(ddp_reducer_finish(r));
    check_grads(g, 1, "after the failed checks");
    double exposed = ddp_reducer_exposed_seconds(r);
    CHECK(exposed >= 0 && exposed < 60, "exposed %g s", exposed);
    ddp_reducer_destroy(r);

    /* --bucket-cap-mb 0.1: every cap 0.1 MB, three buckets; and the net's caps */
    OK(ddp_reducer_create(&r, pg, &net, g, 0.1));
    b = ddp_reducer_buckets(r, &nb);
    CHECK(nb == 3 && b[0].count == 132492 && b[2].count == 832, "0.1 MB: %d buckets", nb);
    ctx.reducer = r;
    fill(g, 0);
    announce(&ctx, rank_ % 2 ? forward_order : backward_order, 0);
    OK(ddp_reducer_finish(r));
    check_grads(g, 1, "0.1 MB buckets");
    ddp_reducer_destroy(r);
    free(g);

    /* float gradients, as the GPU build's: the same buckets and sums, 4-byte elements */
    float *f = calloc(NFLOATS, sizeof *f);
    net.grad_bytes = sizeof(float);
    OK(ddp_reducer_create(&r, pg, &net, f, -1));
    ctx.reducer = r;
    for (size_t i = 0; i < NFLOATS; i++)
        f[i] = (float)grad(rank_, i);
    announce(&ctx, rank_ % 2 ? forward_order : backward_order, 0);
    OK(ddp_reducer_finish(r));
    size_t bad = 0;
    for (size_t i = 0; i < NFLOATS; i++)
        bad += f[i] != (float)summed(i);
    CHECK(!bad, "float gradients: %zu are not the sum", bad);
    ddp_reducer_destroy(r);
    free(f);
}

/* ---- failures --------------------------------------------------------------------- */

static void mode_timeout(DdpProcessGroup *pg, const char *kind)
{
    /* large enough that no MPI sends it eagerly: the broadcast needs rank 1 */
    enum { N = 1 << 18 };
    float *x = calloc(N, sizeof *x);
    if (rank_ != 0) {
        sleep_s(30); /* never calls: mpirun ends this rank when rank 0 exits */
        return;
    }
    double t0 = now();
    DdpStatus st;
    if (strcmp(kind, "bucket") == 0) {
        DdpWork *w = NULL;
        OK(ddp_pg_allreduce_start(pg, x, 1290, DDP_F32, DDP_AVG, "bucket 3", &w));
        st = ddp_pg_wait(pg, w);
    } else {
        st = ddp_pg_broadcast(pg, x, N, DDP_F32, 0);
    }
    double took = now() - t0;
    printf("rank 0: failed after %.2f s: %s\n", took, ddp_error_message());
    CHECK(st == DDP_FAIL, "the collective did not fail");
    CHECK(took > 0.9 && took < 5, "failed after %.2f s, not about 1 s", took);
    t0 = now();
    st = ddp_pg_barrier(pg);
    printf("rank 0: then: %s\n", ddp_error_message());
    CHECK(st == DDP_FAIL && now() - t0 < 0.5, "a later collective must fail at once");
    CHECK(ddp_pg_status(pg) == DDP_FAIL, "status after a timeout");
    printf("rank %d: %s timeout %s\n", rank_, failures ? "FAIL" : "PASS", kind);
    fflush(stdout);
    ddp_pg_abort(pg);
    exit(failures ? 1 : 3);
}

static void mode_abort(DdpProcessGroup *pg)
{
    float x[10] = {0};
    if (rank_ == 1) {
        printf("rank 1: failing\n");
        fflush(stdout);
        ddp_pg_abort(pg);
        exit(1);
    }
    DdpStatus st = ddp_pg_allreduce(pg, x, 10, DDP_F32, DDP_SUM);
    printf("rank %d: the all-reduce returned %d: %s\n", rank_, (int)st, ddp_error_message());
}

static void mode_mismatch(DdpProcessGroup *pg)
{
    enum { N = 184586 };
    double *x = calloc(N, sizeof *x);
    double t0 = now();
    DdpStatus st;
    if (rank_ == 0) {
        ddp_pg_purpose(pg, DDP_PG_FOR_EVAL_STATS);
        st = ddp_pg_allreduce(pg, x, 3, DDP_F64, DDP_SUM);
    } else {
        DdpWork *w = NULL;
        OK(ddp_pg_allreduce_start(pg, x, N, DDP_F64, DDP_SUM, "bucket 0", &w));
        st = ddp_pg_wait(pg, w);
    }
    printf("rank %d: failed after %.2f s: %s\n", rank_, now() - t0, ddp_error_message());
    CHECK(st == DDP_FAIL, "the mismatched collective did not fail");
    CHECK(now() - t0 < 5, "the mismatch took %.2f s to find", now() - t0);
    CHECK(strstr(ddp_error_message(), "rank 1 started the gradient all-reduce (184586 doubles) where rank 0 "
                                      "started the evaluation all-reduce (3 doubles), as collective 0") != NULL,
          "the message names both sides");
    CHECK(ddp_pg_barrier(pg) == DDP_FAIL, "a later collective must fail");
    printf("rank %d: %s mismatch\n", rank_, failures ? "FAIL" : "PASS");
    fflush(stdout);
    ddp_pg_abort(pg);
    free(x);
    exit(failures ? 1 : 3);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    int is_timeout = strcmp(mode, "timeout") == 0, is_abort = strcmp(mode, "abort") == 0;
    DdpProcessGroup *pg = open_group(is_timeout ? 1.0 : is_abort ? 60.0 : 30.0);
    if (strcmp(mode, "collectives") == 0)
        mode_collectives(pg);
    else if (strcmp(mode, "determinism") == 0)
        mode_determinism(pg);
    else if (strcmp(mode, "reducer") == 0)
        mode_reducer(pg);
    else if (is_timeout)
        mode_timeout(pg, argc > 2 ? argv[2] : "bucket");
    else if (is_abort)
        mode_abort(pg);
    else if (strcmp(mode, "mismatch") == 0)
        mode_mismatch(pg);
    else {
        printf("usage: pg_helper collectives|determinism|reducer|timeout [bucket|broadcast]|abort|mismatch\n");
        return 2;
    }
    printf("rank %d: %s %s\n", rank_, failures ? "FAIL" : "PASS", mode);
    ddp_pg_destroy(pg);
    return failures ? 1 : 0;
}
