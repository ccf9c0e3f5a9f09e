/*
 * Tests of the process group (runtime/pg.c, pg_mpi.c, pg_nccl_cpu.c).
 *
 * A world of one rank in this process: every collective leaves its data as a
 * single rank's would be (an average of one value is the value), whatever
 * backend was asked for, and nothing of MPI starts. Then the MPI backend
 * across real ranks: tests/mpi/pg_helper.c, built here against
 * build/libddprt.a and run under `mpirun -np 2` (and 3), checks its own
 * results on every rank; these tests read its verdicts, its timing, and its
 * messages. Skipped, with a note, where mpicc or mpirun is missing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pg.h"  // ddp_pg_*
#include "testutil.h"

static DdpTopology one_rank(void)
{
    DdpTopology t = {.rank = 0, .world_size = 1, .local_rank = 0, .local_world_size = 1, .launch = DDP_LAUNCH_NONE};
    return t;
}

static void test_world_of_one(void)
{
    static const DdpPgBackend backends[] = {DDP_PG_NONE, DDP_PG_MPI, DDP_PG_NCCL};
    for (int k = 0; k < 3; k++) {
        DdpTopology t = one_rank();
        DdpProcessGroup *pg = NULL;
        CU_ASSERT_EQUAL_FATAL(ddp_pg_create(&pg, backends[k], &t, NULL, NULL, 600), DDP_OK);
        CU_ASSERT_EQUAL(ddp_pg_rank(pg), 0);
        CU_ASSERT_EQUAL(ddp_pg_size(pg), 1);
        CU_ASSERT_EQUAL(ddp_pg_backend(pg), DDP_PG_NONE);

        float f[5] = {1.5f, -2.0f, 3.25f, 1e-30f, 7.0f};
        const float want[5] = {1.5f, -2.0f, 3.25f, 1e-30f, 7.0f};
        CU_ASSERT_EQUAL(ddp_pg_broadcast(pg, f, 5, DDP_F32, 0), DDP_OK);
        CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, f, 5, DDP_F32, DDP_SUM), DDP_OK);
        CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, f, 5, DDP_F32, DDP_AVG), DDP_OK);
        CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, f, 5, DDP_F32, DDP_MAX), DDP_OK);
        CU_ASSERT_EQUAL(memcmp(f, want, sizeof f), 0);
        double d[2] = {0.1, -0.3};
        CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, d, 2, DDP_F64, DDP_AVG), DDP_OK);
        CU_ASSERT(d[0] == 0.1 && d[1] == -0.3);
        int64_t l[2] = {5, -6};
        CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, l, 2, DDP_I64, DDP_SUM), DDP_OK);
        CU_ASSERT(l[0] == 5 && l[1] == -6);

        int64_t send[3] = {1, 2, 3}, recv[3] = {0};
        CU_ASSERT_EQUAL(ddp_pg_allgather(pg, send, recv, 3, DDP_I64), DDP_OK);
        CU_ASSERT(recv[0] == 1 && recv[1] == 2 && recv[2] == 3);
        CU_ASSERT_EQUAL(ddp_pg_allgather(pg, recv, recv, 3, DDP_I64), DDP_OK); /* in place */
        CU_ASSERT(recv[0] == 1 && recv[2] == 3);
        CU_ASSERT_EQUAL(ddp_pg_barrier(pg), DDP_OK);

        DdpWork *w = (DdpWork *)&w; /* must be overwritten */
        CU_ASSERT_EQUAL(ddp_pg_allreduce_start(pg, f, 5, DDP_F32, DDP_AVG, "bucket 0", &w), DDP_OK);
        CU_ASSERT_PTR_NULL(w);
        CU_ASSERT_EQUAL(ddp_pg_wait(pg, w), DDP_OK);
        CU_ASSERT_EQUAL(memcmp(f, want, sizeof f), 0);
        CU_ASSERT_EQUAL(ddp_pg_status(pg), DDP_OK);
        if (k == 2)
            ddp_pg_abort(pg);
        else
            ddp_pg_destroy(pg);
    }
    ddp_pg_destroy(NULL);
    ddp_pg_abort(NULL);
}

static void test_checks(void)
{
    DdpTopology t = one_rank();
    DdpProcessGroup *pg = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_pg_create(&pg, DDP_PG_NONE, &t, NULL, NULL, 600), DDP_OK);
    int64_t l[2] = {1, 2};
    CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, l, 2, DDP_I64, DDP_AVG), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "internal error: all-reduce averaging int64s"));
    unsigned char u[2] = {1, 2};
    CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, u, 2, DDP_U8, DDP_MAX), DDP_OK);
    CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, u, 2, DDP_U8, DDP_AVG), DDP_FAIL);
    CU_ASSERT_EQUAL(ddp_pg_broadcast(pg, l, 2, DDP_I64, 1), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "internal error: broadcast from rank 1 in a world of 1"));
    CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, l, 2, (DdpPgType)9, DDP_SUM), DDP_FAIL);
    CU_ASSERT_EQUAL(ddp_pg_allreduce(pg, l, 2, DDP_I64, (DdpPgOp)9), DDP_FAIL);
    CU_ASSERT_EQUAL(ddp_pg_barrier(NULL), DDP_FAIL);
    ddp_pg_destroy(pg);

    CU_ASSERT_EQUAL(ddp_pg_create(&pg, DDP_PG_NONE, &t, NULL, NULL, 0), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "internal error: a process group timeout of"));
    CU_ASSERT_PTR_NULL(pg);
    t.rank = 1;
    CU_ASSERT_EQUAL(ddp_pg_create(&pg, DDP_PG_NONE, &t, NULL, NULL, 600), DDP_FAIL);
    CU_ASSERT_PTR_NULL(pg);
}

static void test_backends_refused(void)
{
    DdpTopology t = {.rank = 1, .world_size = 2, .local_rank = 1, .local_world_size = 2,
                     .master_addr = "127.0.0.1", .master_port = 29500, .launch = DDP_LAUNCH_TORCHRUN};
    DdpProcessGroup *pg = NULL;
    /* a CPU build has no NCCL */
    CU_ASSERT_EQUAL(ddp_pg_create(&pg, DDP_PG_NCCL, &t, NULL, NULL, 600), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "this program was built for CPUs; NCCL needs --target cuda"));
    CU_ASSERT_PTR_NULL(pg);
    /* MPI needs mpirun's ranks: refused before MPI starts (nothing to finalise here) */
    CU_ASSERT_EQUAL(ddp_pg_create(&pg, DDP_PG_MPI, &t, NULL, NULL, 600), DDP_BAD_INPUT);
#ifdef DDP_HAVE_MPI
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "--backend mpi needs the ranks started by mpirun"));
#else
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "built without MPI"));
#endif
    CU_ASSERT_PTR_NULL(pg);
    /* several ranks need a backend */
    CU_ASSERT_EQUAL(ddp_pg_create(&pg, DDP_PG_NONE, &t, NULL, NULL, 600), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "a run of 2 ranks needs a communication backend"));
}

/* ---- the MPI backend under mpirun ------------------------------------------------ */

/* Builds tests/mpi/pg_helper.c once; its path, or NULL (said why) when MPI is missing. */
static const char *helper(void)
{
    static TestMpiHelper built;
    return test_mpi_helper(&built, "/tmp/ddp_pg_test.XXXXXX");
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs the helper's MODE on NP ranks (under valgrind when VALGRIND); its output,
 * exit status and seconds taken. */
static char *run_helper(int np, const char *mode, int valgrind, int *rc, double *seconds)
{
    const char *h = helper();
    if (!h)
        return NULL;
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "OMPI_MCA_btl_vader_single_copy_mechanism=none timeout 120 mpirun --allow-run-as-root --oversubscribe "
             "-np %d %s %s %s",
             np,
             valgrind ? "valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=9 "
                        "--suppressions=/usr/share/openmpi/openmpi-valgrind.supp "
                        "--suppressions=tests/mpi/openmpi.supp"
                      : "",
             h, mode);
    char *out = NULL;
    double t0 = now();
    *rc = test_run(cmd, &out);
    *seconds = now() - t0;
    return out;
}

/* Every one of NP ranks says "rank R: PASS MODE", none FAIL, and the run exits 0. */
static void expect_pass(int np, const char *mode, int valgrind)
{
    int rc = -1;
    double seconds = 0;
    char *out = run_helper(np, mode, valgrind, &rc, &seconds);
    if (!out)
        return;
    int ok = rc == 0 && !strstr(out, "FAIL");
    for (int r = 0; r < np; r++) {
        char want[64];
        snprintf(want, sizeof want, "rank %d: PASS %s", r, mode);
        ok = ok && strstr(out, want);
    }
    char what[160];
    snprintf(what, sizeof what, "pg_helper %s on %d ranks%s: exit %d", mode, np, valgrind ? " under valgrind" : "", rc);
    CU_assertImplementation(ok, __LINE__, what, __FILE__, "", CU_FALSE);
    if (!ok)
        fprintf(stderr, "\n%s\n", out);
    free(out);
}

static void test_mpi_collectives(void) { expect_pass(2, "collectives", 0); }

static void test_mpi_determinism(void)
{
    expect_pass(2, "determinism", 0);
    expect_pass(3, "determinism", 0);
}

static void test_mpi_timeout(void)
{
    static const char *const kinds[] = {"bucket", "broadcast"};
    static const char *const messages[] = {"all-reduce of bucket 3 did not finish within 1 s",
                                           "broadcast from rank 0 did not finish within 1 s"};
    for (int k = 0; k < 2; k++) {
        char mode[32];
        snprintf(mode, sizeof mode, "timeout %s", kinds[k]);
        int rc = -1;
        double seconds = 0;
        char *out = run_helper(2, mode, 0, &rc, &seconds);
        if (!out)
            return;
        /* rank 0 fails in about 1 s with the message and exits; mpirun then ends rank 1 */
        char pass[64];
        snprintf(pass, sizeof pass, "rank 0: PASS %s", mode);
        int ok = rc != 0 && strstr(out, pass) && strstr(out, messages[k]) &&
                 strstr(out, "an earlier collective failed") && seconds < 20;
        char what[160];
        snprintf(what, sizeof what, "timeout %s: exit %d after %.1f s", kinds[k], rc, seconds);
        CU_assertImplementation(ok, __LINE__, what, __FILE__, "", CU_FALSE);
        if (!ok)
            fprintf(stderr, "\n%s\n", out);
        free(out);
    }
}

static void test_mpi_abort(void)
{
    int rc = -1;
    double seconds = 0;
    char *out = run_helper(2, "abort", 0, &rc, &seconds);
    if (!out)
        return;
    /* rank 0 waits in an all-reduce with a 60 s timeout: the abort must end it at once */
    int ok = rc != 0 && strstr(out, "rank 1: failing") && !strstr(out, "the all-reduce returned") && seconds < 20;
    char what[160];
    snprintf(what, sizeof what, "abort: exit %d after %.1f s", rc, seconds);
    CU_assertImplementation(ok, __LINE__, what, __FILE__, "", CU_FALSE);
    if (!ok)
        fprintf(stderr, "\n%s\n", out);
    free(out);
}

/* Ranks that start different collectives: both stop at once, before MPI
 * moves any data (it used to write the bucket into the 3-double buffer),
 * each naming both sides. */
static void test_mpi_mismatch(void)
{
    int rc = -1;
    double seconds = 0;
    char *out = run_helper(2, "mismatch", 0, &rc, &seconds);
    if (!out)
        return;
    int ok = rc != 0 && strstr(out, "rank 0: PASS mismatch") && strstr(out, "rank 1: PASS mismatch") &&
             !strstr(out, "FAIL") && seconds < 20;
    char what[160];
    snprintf(what, sizeof what, "mismatch: exit %d after %.1f s", rc, seconds);
    CU_assertImplementation(ok, __LINE__, what, __FILE__, "", CU_FALSE);
    if (!ok)
        fprintf(stderr, "\n%s\n", out);
    free(out);
}

static void test_mpi_valgrind(void)
{
    if (test_run("command -v valgrind && test -f /usr/share/openmpi/openmpi-valgrind.supp", NULL) != 0) {
        fputs("\n  (skipped: no valgrind or no Open MPI suppressions)", stderr);
        return;
    }
    expect_pass(2, "collectives", 1);
}

void suite_pg(void)
{
    static const TestCase cases[] = {
        {"a world of one: every collective leaves the data as it is", test_world_of_one},
        {"bad calls are internal errors, a bad timeout too (the flags refuse it first)", test_checks},
        {"NCCL on a CPU build, MPI without mpirun: refused with a message", test_backends_refused},
        {"MPI, 2 ranks: broadcast, all-reduce, all-gather, barrier, buckets", test_mpi_collectives},
        {"MPI, 2 and 3 ranks: every rank gets the same bits", test_mpi_determinism},
        {"MPI: a collective one rank never calls fails within the timeout", test_mpi_timeout},
        {"MPI: a rank that aborts ends the job at once", test_mpi_abort},
        {"MPI: ranks that start different collectives both stop at once, naming both", test_mpi_mismatch},
        {"MPI, 2 ranks under valgrind: no error of ours", test_mpi_valgrind},
        {NULL, NULL},
    };
    test_add_suite("pg [mpirun, valgrind]", cases);
}
