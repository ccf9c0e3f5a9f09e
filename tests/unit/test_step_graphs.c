/*
 * Tests of runtime/graph_cpu.c, the CPU's twin of a CUDA graph, and of
 * runtime/step_graphs.c, the training step's graphs per batch shape.
 *
 * The twin's promise (graph.h): what a replay sees is what the capture saw,
 * as on a GPU, so a value the host passes instead of writing it to device
 * memory goes stale on a CPU too, where every test runs. And step_graphs
 * makes one graph per shape (batch size, accumulate, sync), replays it for
 * the same shape, and runs plainly when off or full.
 */
#include <stdlib.h>
#include <string.h>

#include "graph.h"        // ddp_graph_capture, _launch, _destroy
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

static void test_one_graph_per_shape(void)
{
    memset(&calls, 0, sizeof calls);
    DdpStepGraphs *g = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_step_graphs_create(&g, 1, NULL, NULL, NULL, NULL), DDP_OK);
    DdpStepWork w = work(7, 16, 0, 1);
    CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK);
    CU_ASSERT(calls.trains == 1 && calls.optimizer_steps == 1 && calls.seed_seen == 7 && calls.n_seen == 16);
    CU_ASSERT_EQUAL(ddp_step_graphs_count(g), 1);
    w = work(8, 16, 0, 1); /* the same shape: replayed as captured */
    CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK);
    CU_ASSERT(calls.trains == 2 && calls.seed_seen == 7);
    CU_ASSERT_EQUAL(ddp_step_graphs_count(g), 1);
    w = work(9, 12, 0, 1); /* an epoch's last, smaller batch */
    CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK);
    CU_ASSERT(calls.seed_seen == 9 && calls.n_seen == 12);
    w = work(10, 16, 1, 0); /* accumulating, no all-reduce, no optimizer step */
    CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK);
    CU_ASSERT(calls.seed_seen == 10 && calls.accumulate_seen == 1 && calls.optimizer_steps == 3);
    w = work(11, 16, 1, 1); /* accumulating, then the all-reduce and the step */
    CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK);
    CU_ASSERT(calls.seed_seen == 11 && calls.optimizer_steps == 4);
    CU_ASSERT_EQUAL(ddp_step_graphs_count(g), 4);
    w = work(12, 12, 0, 1);
    CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK);
    CU_ASSERT(calls.seed_seen == 9 && calls.n_seen == 12);
    CU_ASSERT_EQUAL(ddp_step_graphs_count(g), 4);
    ddp_step_graphs_destroy(g);
}

static void test_off_and_full(void)
{
    memset(&calls, 0, sizeof calls);
    DdpStepGraphs *g = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_step_graphs_create(&g, 0, NULL, NULL, NULL, NULL), DDP_OK);
    for (uint64_t s = 1; s <= 3; s++) {
        DdpStepWork w = work(s, 16, 0, 1);
        CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK);
        CU_ASSERT_EQUAL(calls.seed_seen, s); /* off: every step as it comes */
    }
    CU_ASSERT_EQUAL(ddp_step_graphs_count(g), 0);
    ddp_step_graphs_destroy(g);

    CU_ASSERT_EQUAL_FATAL(ddp_step_graphs_create(&g, 1, NULL, NULL, NULL, NULL), DDP_OK);
    int shapes = 0;
    for (int n = 1; n <= 12; n++) {
        DdpStepWork w = work(100 + (uint64_t)n, n, 0, 1);
        CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK);
        w.ctx.seed += 1000; /* again: a replay for the first ones, plain beyond the cap */
        CU_ASSERT_EQUAL(ddp_step_graphs_run(g, &w), DDP_OK);
        shapes = ddp_step_graphs_count(g);
        CU_ASSERT_EQUAL(calls.seed_seen, shapes == n ? 100 + (uint64_t)n : 1100 + (uint64_t)n);
    }
    CU_ASSERT_EQUAL(shapes, DDP_STEP_GRAPHS_MOST);
    ddp_step_graphs_destroy(g);
    ddp_step_graphs_destroy(NULL);
}

void suite_step_graphs(void)
{
    static const TestCase cases[] = {
        {"the CPU twin of a CUDA graph: capture runs nothing, each replay sees the capture's argument",
         test_twin_keeps_capture},
        {"one graph per batch size, accumulate and sync, replayed for the same shape", test_one_graph_per_shape},
        {"off: every step plainly; past the cap of shapes: plainly", test_off_and_full},
        {NULL, NULL},
    };
    test_add_suite("step_graphs", cases);
}
