/*
 * Tests of runtime/graph_cpu.c, the CPU's twin of a CUDA graph, and of
 * runtime/step_graphs.c, the training step's graphs per batch shape.
 *
 * The twin's promise (graph.h): what a replay sees is what the capture saw,
 * as on a GPU, so a value the host passes instead of writing it to device
 * memory goes stale on a CPU too, where every test runs. And step_graphs
 * makes one graph per shape (batch size, accumulate, sync), on the shape's
 * second step, replays it for the same shape, runs plainly when off or
 * full, and handles a capture the device refuses (which a CPU never does:
 * a stand-in capture refuses here).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"        // ddp_graph_capture, _launch, _destroy
#include "ops.h"          // a failure kept by the library ops, for a refused capture
#include "step_graphs.h"  // ddp_step_graphs_*, DdpStepWork
#include "testutil.h"

typedef struct {
    int value;    /* a per-step value passed by the host */
    int *seen;    /* where the work writes what it saw: memory, as a kernel's output */
    int runs;     /* the work's own count, in its argument */
} CountArg;

static DdpStatus count_work(void *arg)
{
    CountArg *a = arg;
    a->runs++;
    *a->seen = a->value * 100 + a->runs;
    return a->value < 0 ? DDP_ERR(DDP_FAIL, "negative") : DDP_OK;
}

static void test_twin_keeps_capture(void)
{
    int seen = 0;
    CountArg arg = {.value = 1, .seen = &seen};
    DdpGraph *g = NULL;
    char why[64] = "x";
    CU_ASSERT_EQUAL_FATAL(ddp_graph_capture(&g, NULL, count_work, &arg, sizeof arg, why, sizeof why), DDP_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_STRING_EQUAL(why, "");
    CU_ASSERT_EQUAL(seen, 0); /* capture runs nothing */
    arg.value = 2;            /* the host's next step: the graph keeps 1 */
    CU_ASSERT_EQUAL(ddp_graph_launch(g, NULL), DDP_OK);
    CU_ASSERT_EQUAL(seen, 101);
    CU_ASSERT_EQUAL(ddp_graph_launch(g, NULL), DDP_OK);
    CU_ASSERT_EQUAL(seen, 101); /* each replay from the capture's copy, not the last replay's */
    CU_ASSERT_EQUAL(arg.runs, 0);
    ddp_graph_destroy(g);

    arg.value = -1; /* the work's failure comes back from each launch */
    CU_ASSERT_EQUAL_FATAL(ddp_graph_capture(&g, NULL, count_work, &arg, sizeof arg, why, sizeof why), DDP_OK);
    CU_ASSERT_EQUAL(ddp_graph_launch(g, NULL), DDP_FAIL);
    CU_ASSERT_STRING_EQUAL(ddp_error_message(), "negative");
    ddp_graph_destroy(g);
    ddp_graph_destroy(NULL);
}

/* A net whose step functions note what they were given. */
static struct {
    int trains, optimizer_steps;
    uint64_t seed_seen; /* ctx.seed, standing for any per-step value in the context */
    int n_seen, accumulate_seen;
} calls;

static void fake_train_step(DdpCtx *ctx, int n)
{
    calls.trains++;
    calls.seed_seen = ctx->seed;
    calls.n_seen = n;
    calls.accumulate_seen = ctx->accumulate;
}

static void fake_optimizer_step(DdpCtx *ctx)
{
    (void)ctx;
    calls.optimizer_steps++;
}

static const DdpNet fake_net = {.name = "fake", .train_step = fake_train_step, .optimizer_step = fake_optimizer_step};

static DdpStepWork work(uint64_t seed, int n, int accumulate, int sync)
{
    static DdpStepTimes times;
    DdpStepWork w = {.net = &fake_net, .times = &times, .n = n, .sync = sync};
    w.ctx.seed = seed;
    w.ctx.accumulate = accumulate;
    return w;
}

/* A step of SEED's shape (N, ACCUMULATE, SYNC), and the seed the net saw. */
static uint64_t run(DdpStepGraphs *g, uint64_t seed, int n, int accumulate, int sync)
{
    DdpStepWork w = work(seed, n, accumulate, sync);
    CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK);
    return calls.seed_seen;
}

static void test_one_graph_per_shape(void)
{
    memset(&calls, 0, sizeof calls);
    DdpStepGraphs *g = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_step_graphs_create(&g, 1, NULL, NULL), DDP_OK);
    /* a shape's first step runs as it comes, its second is captured, the rest replay the second */
    CU_ASSERT_EQUAL(run(g, 7, 16, 0, 1), 7);
    CU_ASSERT_EQUAL(ddp_step_graphs_count(g), 0);
    CU_ASSERT_EQUAL(run(g, 8, 16, 0, 1), 8);
    CU_ASSERT_EQUAL(ddp_step_graphs_count(g), 1);
    CU_ASSERT_EQUAL(run(g, 9, 16, 0, 1), 8);
    CU_ASSERT(calls.trains == 3 && calls.optimizer_steps == 3 && calls.n_seen == 16);
    /* each of batch size, accumulate and sync a shape of its own */
    CU_ASSERT_EQUAL(run(g, 10, 12, 0, 1), 10); /* an epoch's last, smaller batch */
    CU_ASSERT_EQUAL(run(g, 11, 12, 0, 1), 11);
    CU_ASSERT_EQUAL(run(g, 12, 12, 0, 1), 11);
    CU_ASSERT_EQUAL(calls.n_seen, 12);
    CU_ASSERT_EQUAL(run(g, 13, 16, 1, 0), 13); /* accumulating: no all-reduce, no optimizer step */
    CU_ASSERT_EQUAL(run(g, 14, 16, 1, 0), 14);
    CU_ASSERT_EQUAL(run(g, 15, 16, 1, 0), 14);
    CU_ASSERT(calls.accumulate_seen == 1 && calls.optimizer_steps == 6);
    CU_ASSERT_EQUAL(run(g, 16, 16, 1, 1), 16); /* accumulating, then the all-reduce and the step */
    CU_ASSERT_EQUAL(run(g, 17, 16, 1, 1), 17);
    CU_ASSERT_EQUAL(run(g, 18, 16, 1, 1), 17);
    CU_ASSERT_EQUAL(calls.optimizer_steps, 9);
    CU_ASSERT_EQUAL(run(g, 19, 16, 0, 1), 8);
    CU_ASSERT_EQUAL(ddp_step_graphs_count(g), 4);
    ddp_step_graphs_destroy(g);
}

static void test_off_and_full(void)
{
    memset(&calls, 0, sizeof calls);
    DdpStepGraphs *g = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_step_graphs_create(&g, 0, NULL, NULL), DDP_OK);
    for (uint64_t s = 1; s <= 3; s++)
        CU_ASSERT_EQUAL(run(g, s, 16, 0, 1), s); /* off: every step as it comes */
    CU_ASSERT_EQUAL(ddp_step_graphs_count(g), 0);
    ddp_step_graphs_destroy(g);

    CU_ASSERT_EQUAL_FATAL(ddp_step_graphs_create(&g, 1, NULL, NULL), DDP_OK);
    for (int n = 1; n <= 12; n++) {
        uint64_t seed = 100 * (uint64_t)n;
        run(g, seed, n, 0, 1);
        run(g, seed + 1, n, 0, 1);
        /* replayed for the first shapes; past the cap, plainly */
        CU_ASSERT_EQUAL(run(g, seed + 2, n, 0, 1), n <= DDP_STEP_GRAPHS_MOST ? seed + 1 : seed + 2);
    }
    CU_ASSERT_EQUAL(ddp_step_graphs_count(g), DDP_STEP_GRAPHS_MOST);
    ddp_step_graphs_destroy(g);
    ddp_step_graphs_destroy(NULL);
}

/* A capture the device refuses, as graph_cuda.cu reports one: no graph, a
 * reason; a library call inside it kept its failure (a bad product's
 * sizes stand for the call the capture refused). Counted. */
static int refusals;

static DdpStatus refusing_capture(DdpGraph **graph, void *stream, DdpGraphWork step, const void *arg,
                                  size_t arg_bytes, char *why, size_t why_len)
{
    (void)stream, (void)step, (void)arg_bytes;
    const DdpStepWork *w = arg;
    refusals++;
    float x = 0;
    ddp_gemm(w->ctx.ops, 0, 0, -1, 1, 1, 1.0f, &x, 1, &x, 1, 0.0f, &x, 1);
    *graph = NULL;
    snprintf(why, why_len, "cudaStreamEndCapture: cudaErrorStreamCaptureInvalidated");
    return DDP_OK;
}

/* A capture that ends well although a library call inside it failed (and
 * kept its failure): the graph lacks the call. */
static DdpStatus capture_missing_a_call(DdpGraph **graph, void *stream, DdpGraphWork step, const void *arg,
                                        size_t arg_bytes, char *why, size_t why_len)
{
    const DdpStepWork *w = arg;
    refusals++;
    float x = 0;
    ddp_gemm(w->ctx.ops, 0, 0, -1, 1, 1, 1.0f, &x, 1, &x, 1, 0.0f, &x, 1);
    return ddp_graph_capture(graph, stream, step, arg, arg_bytes, why, why_len);
}

static void test_refused(void)
{
    DdpOps *ops = NULL;
    CU_ASSERT_FATAL(ddp_ops_create(&ops, NULL) == DDP_OK && ddp_ops_finalize(ops) == DDP_OK);
    /* one rank: a warning, the ops' failure forgotten, graphs off for the run, the step made plainly */
    memset(&calls, 0, sizeof calls);
    refusals = 0;
    DdpStepGraphs *g = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_step_graphs_create(&g, 1, NULL, NULL), DDP_OK);
    ddp_step_graphs_capture_with(g, refusing_capture);
    DdpStepWork w = work(1, 16, 0, 1);
    w.ctx.ops = ops;
    CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK); /* the first step: plainly */
    w.ctx.seed = 2;
    CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK); /* the second: capture refused, made plainly */
    CU_ASSERT(calls.trains == 2 && calls.seed_seen == 2);
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    w.ctx.seed = 3;
    CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK); /* no capture again */
    CU_ASSERT(calls.trains == 3 && calls.seed_seen == 3 && ddp_step_graphs_count(g) == 0 && refusals == 1);
    ddp_step_graphs_destroy(g);

    /* a library call failed inside a capture that ended well: refused alike, not replayed without the call */
    memset(&calls, 0, sizeof calls);
    refusals = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_step_graphs_create(&g, 1, NULL, NULL), DDP_OK);
    ddp_step_graphs_capture_with(g, capture_missing_a_call);
    for (uint64_t seed = 1; seed <= 3; seed++) {
        w.ctx.seed = seed;
        CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK);
    }
    CU_ASSERT(calls.trains == 3 && calls.seed_seen == 3 && refusals == 1);
    CU_ASSERT_EQUAL(ddp_step_graphs_count(g), 0);
    CU_ASSERT_EQUAL(ddp_ops_status(ops), DDP_OK);
    ddp_step_graphs_destroy(g);

    /* a process group: the run ends, naming the refused call and --no-cuda-graph */
    int group = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_step_graphs_create(&g, 1, (DdpProcessGroup *)&group, NULL), DDP_OK);
    ddp_step_graphs_capture_with(g, refusing_capture);
    CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK);
    CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_FAIL);
    const char *m = ddp_error_message();
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "could not be captured (internal error: ddp_gemm("));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "run with --no-cuda-graph"));
    ddp_step_graphs_destroy(g);
    ddp_ops_destroy(ops);
}

void suite_step_graphs(void)
{
    static const TestCase cases[] = {
        {"the CPU twin of a CUDA graph: capture runs nothing, each replay sees the capture's argument",
         test_twin_keeps_capture},
        {"one graph per batch size, accumulate and sync, captured on its second step and replayed after",
         test_one_graph_per_shape},
        {"off: every step plainly; past the cap of shapes: plainly", test_off_and_full},
        {"a refused capture, or one a library call failed inside: one rank goes on call by call, a process "
         "group ends the run", test_refused},
        {NULL, NULL},
    };
    test_add_suite("step_graphs", cases);
}
