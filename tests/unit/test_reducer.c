/*
 * Tests of runtime/reducer.c: the bucket plan it takes from a net, the
 * per-step bookkeeping and its checks, in a world of one rank here; then
 * across real ranks under mpirun (tests/mpi/pg_helper.c's reducer mode:
 * ranks announcing gradients in different orders, exact sums, no_sync,
 * overlap, the checks; also under valgrind).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"     // ddp_launch_free_port
#include "reducer.h"      // ddp_reducer_*
#include "store.h"        // the store the places go through
#include "testutil.h"
#include "whereabouts.h"  // ddp_whereabouts_*

/* mnist.net's parameters as ddpc lays them out: trainable ones last layer first, each on
 * 4 floats (buckets.h: 2 floats after linear2.bias) */
static DdpParamInfo params[] = {
    {.name = "conv1.weight", .ndim = 4, .shape = {32, 1, 5, 5}, .numel = 800, .trainable = 1, .offset = 183788},
    {.name = "conv1.bias", .ndim = 1, .shape = {32}, .numel = 32, .trainable = 1, .offset = 183756},
    {.name = "conv2.weight", .ndim = 4, .shape = {64, 32, 5, 5}, .numel = 51200, .trainable = 1, .offset = 132556},
    {.name = "conv2.bias", .ndim = 1, .shape = {64}, .numel = 64, .trainable = 1, .offset = 132492},
    {.name = "bn.running_mean", .ndim = 1, .shape = {64}, .numel = 64, .trainable = 0, .offset = 0},
    {.name = "linear1.weight", .ndim = 2, .shape = {128, 1024}, .numel = 131072, .trainable = 1, .offset = 1420},
    {.name = "linear1.bias", .ndim = 1, .shape = {128}, .numel = 128, .trainable = 1, .offset = 1292},
    {.name = "linear2.weight", .ndim = 2, .shape = {10, 128}, .numel = 1280, .trainable = 1, .offset = 12},
    {.name = "linear2.bias", .ndim = 1, .shape = {10}, .numel = 10, .trainable = 1, .offset = 0},
};
enum { N_PARAMS = 9, N_FLOATS = 184588 };
/* the generated backward's order of announcements (weight, then bias) */
static const int backward[8] = {7, 8, 5, 6, 2, 3, 0, 1};

static DdpNet mnist_net(void)
{
    DdpNet net = {.name = "mnist", .params = params, .n_params = N_PARAMS, .n_param_floats = N_FLOATS,
                  .n_buffer_floats = 64, .grad_bytes = sizeof(DdpGrad)};
    net.train.bucket_cap_bytes = 25 << 20;
    net.train.first_bucket_bytes = 1 << 20;
    return net;
}

static DdpProcessGroup *one_rank(void)
{
    DdpTopology t = {.rank = 0, .world_size = 1, .local_world_size = 1};
    DdpProcessGroup *pg = NULL;
    CU_ASSERT_EQUAL(ddp_pg_create(&pg, DDP_PG_NONE, &t, NULL, NULL, 600), DDP_OK);
    return pg;
}

static void test_plan_from_net(void)
{
    DdpProcessGroup *pg = one_rank();
    static DdpGrad grads[N_FLOATS];
    DdpNet net = mnist_net();
    DdpReducer *r = NULL;
    int n = 0;
    /* the net's caps: 25 MB, first 1 MB: one bucket */
    CU_ASSERT_EQUAL_FATAL(ddp_reducer_create(&r, pg, &net, grads, -1), DDP_OK);
    const DdpBucket *b = ddp_reducer_buckets(r, &n);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT(b[0].offset == 0 && b[0].count == N_FLOATS && b[0].n_params == 8);
    ddp_reducer_destroy(r);
    /* --bucket-cap-mb 0.1: every cap 0.1 MB, the first one's too */
    CU_ASSERT_EQUAL_FATAL(ddp_reducer_create(&r, pg, &net, grads, 0.1), DDP_OK);
    b = ddp_reducer_buckets(r, &n);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT(b[0].count == 132492 && b[1].offset == 132492 && b[1].count == 51264 && b[2].count == 832);
    ddp_reducer_destroy(r);
    /* a cap below any parameter (the least --bucket-cap-mb takes, 4 bytes): a bucket per parameter */
    CU_ASSERT_EQUAL_FATAL(ddp_reducer_create(&r, pg, &net, grads, DDP_BUCKET_LEAST_BYTES / 1048576.0), DDP_OK);
    b = ddp_reducer_buckets(r, &n);
    CU_ASSERT_EQUAL(n, 8);
    CU_ASSERT(b[7].offset == 183788 && b[7].count == 800);
    ddp_reducer_destroy(r);
    /* a net that sets no caps (written by hand) gets DDP's */
    net.train.bucket_cap_bytes = net.train.first_bucket_bytes = 0;
    CU_ASSERT_EQUAL_FATAL(ddp_reducer_create(&r, pg, &net, grads, -1), DDP_OK);
    ddp_reducer_buckets(r, &n);
    CU_ASSERT_EQUAL(n, 1);
    ddp_reducer_destroy(r);
    ddp_reducer_destroy(NULL);
    ddp_pg_destroy(pg);
}

static void test_layout_checked(void)
{
    DdpProcessGroup *pg = one_rank();
    static DdpGrad grads[N_FLOATS];
    DdpNet net = mnist_net();
    DdpParamInfo bad[N_PARAMS];
    memcpy(bad, params, sizeof bad);
    bad[7].offset = 0; /* linear2.weight over linear2.bias */
    net.params = bad;
    DdpReducer *r = NULL;
    CU_ASSERT_EQUAL(ddp_reducer_create(&r, pg, &net, grads, -1), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(ddp_error_message(), "internal error: the gradient of linear2.weight lies at float 0"));
    CU_ASSERT_PTR_NULL(r);
    /* packed back to back, as a .cu from an older ddpc lays them out */
    bad[7].offset = 10;
    CU_ASSERT_EQUAL(ddp_reducer_create(&r, pg, &net, grads, -1), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "linear2.weight lies at float 10, not 12"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "generate it again"));
    CU_ASSERT_PTR_NULL(r);
    net.params = params;
    net.n_param_floats = N_FLOATS + 1;
    CU_ASSERT_EQUAL(ddp_reducer_create(&r, pg, &net, grads, -1), DDP_FAIL);
    CU_ASSERT_PTR_NULL(r);
    /* gradients neither floats nor order-free sums */
    net.n_param_floats = N_FLOATS;
    net.grad_bytes = 2;
    CU_ASSERT_EQUAL(ddp_reducer_create(&r, pg, &net, grads, -1), DDP_FAIL);
    CU_ASSERT_STRING_EQUAL(ddp_error_message(), "internal error: gradients of 2 bytes (a float or two doubles only)");
    CU_ASSERT_PTR_NULL(r);
    ddp_pg_destroy(pg);
}

static void test_steps_and_checks(void)
{
    DdpProcessGroup *pg = one_rank();
    static DdpGrad grads[N_FLOATS];
    for (int i = 0; i < N_FLOATS; i++)
        grads[i] = (DdpGrad){i * 0.5, i * 0.25};
    DdpNet net = mnist_net();
    DdpReducer *r = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_reducer_create(&r, pg, &net, grads, 0), DDP_OK); /* 8 buckets */
    DdpCtx ctx = {.grad_ready = ddp_reducer_grad_ready, .reducer = r};

    for (int overlap = 1; overlap >= 0; overlap--) {
        ddp_reducer_set_overlap(r, overlap);
        /* backward's order, parameter order (every bucket held for the one before) */
        for (int k = 0; k < 8; k++)
            ctx.grad_ready(&ctx, backward[k]);
        CU_ASSERT_EQUAL(ddp_reducer_finish(r), DDP_OK);
        for (int k = 7; k >= 0; k--)
            ctx.grad_ready(&ctx, backward[k]);
        CU_ASSERT_EQUAL(ddp_reducer_finish(r), DDP_OK);
    }
    int same = 1;
    for (int i = 0; i < N_FLOATS; i++)
        same &= grads[i].hi == i * 0.5 && grads[i].lo == i * 0.25;
    CU_ASSERT(same); /* the sum over one rank */

    /* a no_sync step, then a synced one */
    ddp_reducer_skip(r);
    for (int k = 0; k < 8; k++)
        ctx.grad_ready(&ctx, backward[k]);
    CU_ASSERT_EQUAL(ddp_reducer_finish(r), DDP_OK);
    for (int k = 0; k < 8; k++)
        ctx.grad_ready(&ctx, backward[k]);
    CU_ASSERT_EQUAL(ddp_reducer_finish(r), DDP_OK);

    /* a gradient missing: named; the next step is clean again */
    for (int k = 0; k < 8; k++)
        if (backward[k] != 0)
            ctx.grad_ready(&ctx, backward[k]);
    CU_ASSERT_EQUAL(ddp_reducer_finish(r), DDP_FAIL);
    CU_ASSERT_STRING_EQUAL(ddp_error_message(), "internal error: parameter conv1.weight got no gradient this step");
    for (int k = 0; k < 8; k++)
        ctx.grad_ready(&ctx, backward[k]);
    CU_ASSERT_EQUAL(ddp_reducer_finish(r), DDP_OK);

    /* twice, a buffer, a parameter that does not exist */
    for (int k = 0; k < 8; k++)
        ctx.grad_ready(&ctx, backward[k]);
    ctx.grad_ready(&ctx, 3);
    CU_ASSERT_EQUAL(ddp_reducer_finish(r), DDP_FAIL);
    CU_ASSERT_STRING_EQUAL(ddp_error_message(),
                           "internal error: parameter conv2.bias got its gradient twice this step");
    for (int k = 0; k < 8; k++)
        ctx.grad_ready(&ctx, backward[k]);
    ctx.grad_ready(&ctx, 4);
    CU_ASSERT_EQUAL(ddp_reducer_finish(r), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "parameter 4, which is not a trainable one"));
    for (int k = 0; k < 8; k++)
        ctx.grad_ready(&ctx, backward[k]);
    ctx.grad_ready(&ctx, 99);
    CU_ASSERT_EQUAL(ddp_reducer_finish(r), DDP_FAIL);
    for (int k = 0; k < 8; k++)
        ctx.grad_ready(&ctx, backward[k]);
    CU_ASSERT_EQUAL(ddp_reducer_finish(r), DDP_OK);

    double exposed = ddp_reducer_exposed_seconds(r);
    CU_ASSERT(exposed >= 0 && exposed < 1);
    ddp_reducer_destroy(r);
    ddp_pg_destroy(pg);

    /* a context without a reducer: grad_ready does nothing */
    DdpCtx bare = {.grad_ready = ddp_reducer_grad_ready};
    bare.grad_ready(&bare, 0);
}

/* ---- across ranks ---------------------------------------------------------------- */

/* Builds tests/mpi/pg_helper.c once; its path, or NULL (said why) when MPI is missing. */
static const char *helper(void)
{
    static TestMpiHelper built;
    return test_mpi_helper(&built, "/tmp/ddp_reducer_test.XXXXXX");
}

static void expect_pass(int np, int valgrind)
{
    const char *h = helper();
    if (!h)
        return;
    if (valgrind && test_run("command -v valgrind && test -f /usr/share/openmpi/openmpi-valgrind.supp", NULL) != 0) {
        fputs("\n  (skipped: no valgrind or no Open MPI suppressions)", stderr);
        return;
    }
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "OMPI_MCA_btl_vader_single_copy_mechanism=none timeout 120 mpirun --allow-run-as-root --oversubscribe "
             "-np %d %s %s reducer",
             np,
             valgrind ? "valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=9 "
                        "--suppressions=/usr/share/openmpi/openmpi-valgrind.supp "
                        "--suppressions=tests/mpi/openmpi.supp"
                      : "",
             h);
    int rc = test_run(cmd, &out);
    int ok = rc == 0 && out && !strstr(out, "FAIL");
    for (int r = 0; r < np; r++) {
        char want[64];
        snprintf(want, sizeof want, "rank %d: PASS reducer", r);
        ok = ok && strstr(out, want);
    }
    char what[128];
    snprintf(what, sizeof what, "pg_helper reducer on %d ranks%s: exit %d", np, valgrind ? " under valgrind" : "", rc);
    CU_assertImplementation(ok, __LINE__, what, __FILE__, "", CU_FALSE);
    if (!ok)
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
}

/* ---- the places it notes (whereabouts.h) ------------------------------------------- */

static DdpTopology two_ranks(int rank, int port)
{
    DdpTopology t = {.rank = rank, .world_size = 2, .local_rank = rank, .local_world_size = 2,
                     .master_port = port, .launch = DDP_LAUNCH_FLAGS};
    snprintf(t.master_addr, sizeof t.master_addr, "127.0.0.1");
    return t;
}

/* Rank 1 of a store's two, at step 7: in backward past linear2 (one
 * gradient announced), then in the gradient all-reduce waiting for its last
 * bucket, as the trainer and its reducer note them; the barriers let rank 0
 * read each. 0 if every call went well. */
static int rank1_notes_places(DdpStore *s, DdpWhereabouts *w)
{
    DdpProcessGroup *pg = NULL;
    DdpTopology alone = {.rank = 0, .world_size = 1, .local_world_size = 1};
    static DdpGrad grads[N_FLOATS];
    DdpNet net = mnist_net();
    DdpReducer *r = NULL;
    if (ddp_pg_create(&pg, DDP_PG_NONE, &alone, NULL, NULL, 600) != DDP_OK ||
        ddp_reducer_create(&r, pg, &net, grads, 0) != DDP_OK || ddp_reducer_note_places(r, w) != DDP_OK)
        return 1;
    DdpCtx ctx = {.grad_ready = ddp_reducer_grad_ready, .reducer = r};
    ddp_whereabouts_note(w, 7, "backward");
    ctx.grad_ready(&ctx, backward[0]);
    int bad = ddp_store_barrier(s, "noted") != DDP_OK || ddp_store_barrier(s, "read") != DDP_OK;
    for (int k = 1; k < 8; k++)
        ctx.grad_ready(&ctx, backward[k]);
    ddp_whereabouts_note(w, 7, "the gradient all-reduce");
    bad |= ddp_reducer_finish(r) != DDP_OK;
    bad |= ddp_store_barrier(s, "noted again") != DDP_OK || ddp_store_barrier(s, "read again") != DDP_OK;
    ddp_reducer_destroy(r);
    ddp_pg_destroy(pg);
    return bad;
}

/* What rank 0 says of the others once it says WANT (rank 1's publisher
 * writes ten times a second at most), or after 10 s. */
static void others_once_they_say(DdpWhereabouts *w, const char *want, char *buf, size_t len)
{
    for (int tries = 0; tries < 200; tries++) {
        ddp_whereabouts_others(w, buf, len);
        if (strstr(buf, want))
            return;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void test_places_noted(void)
{
    int port = ddp_launch_free_port();
    CU_ASSERT_FATAL(port > 0);
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        DdpTopology t = two_ranks(1, port);
        DdpStore *s = NULL;
        DdpWhereabouts *w = NULL;
        int bad = ddp_store_open(&s, &t, 10) != DDP_OK || ddp_whereabouts_open(&w, &t) != DDP_OK ||
                  rank1_notes_places(s, w);
        ddp_whereabouts_close(w);
        ddp_store_close(s);
        _exit(bad);
    }
    DdpTopology t = two_ranks(0, port);
    DdpStore *s = NULL;
    DdpWhereabouts *w = NULL;
    char said[1024] = "", said_again[1024] = "";
    const char *want = "rank 1 is in backward, past linear2 (step 7)";
    const char *want_again = "rank 1 is in the gradient all-reduce, bucket 7 (step 7)";
    if (ddp_store_open(&s, &t, 10) == DDP_OK && ddp_whereabouts_open(&w, &t) == DDP_OK &&
        ddp_store_barrier(s, "noted") == DDP_OK) {
        others_once_they_say(w, want, said, sizeof said);
        if (ddp_store_barrier(s, "read") == DDP_OK && ddp_store_barrier(s, "noted again") == DDP_OK)
            others_once_they_say(w, want_again, said_again, sizeof said_again);
        ddp_store_barrier(s, "read again");
    }
    int status = -1;
    waitpid(child, &status, 0);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!strstr(said, want) || !strstr(said_again, want_again))
        fprintf(stderr, "\n  rank 0 said \"%s\", then \"%s\"; wanted \"%s\", then \"%s\"", said, said_again, want,
                want_again);
    CU_ASSERT_PTR_NOT_NULL(strstr(said, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(said_again, want_again));
    ddp_whereabouts_close(w);
    ddp_store_close(s);
}

static void test_mpi_reducer(void)
{
    expect_pass(2, 0);
    expect_pass(3, 0);
}

static void test_mpi_reducer_valgrind(void) { expect_pass(2, 1); }

void suite_reducer(void)
{
    static const TestCase cases[] = {
        {"buckets from the net's caps, --bucket-cap-mb, or DDP's defaults", test_plan_from_net},
        {"a gradient layout the buckets cannot use is refused", test_layout_checked},
        {"steps in any order, no_sync, and the checks of each step", test_steps_and_checks},
        {"its places, as another rank reads them: the layer backward is past, the bucket the all-reduce waits for",
         test_places_noted},
        {"MPI, 2 and 3 ranks: buckets in order, exact sums, overlap", test_mpi_reducer},
        {"MPI, 2 ranks under valgrind: no error of ours", test_mpi_reducer_valgrind},
        {NULL, NULL},
    };
    test_add_suite("reducer [mpirun, valgrind]", cases);
}
