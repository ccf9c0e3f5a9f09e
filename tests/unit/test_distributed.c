/*
 * Data parallel on the CPU under mpirun, end to end (tests/distributed/).
 *
 * R ranks x batch B against 1 rank x batch R*B from the same weights: the same
 * global batches (DistributedSampler deals every R-th sample of one shuffled
 * order), so the same 20 steps, within 1e-4 of the update; and the program
 * itself checks at the end that all ranks hold identical weights.
 *
 * On CPUs the runs in fact agree to the bit ("worst 0.00e+00" in the output):
 * each sample's forward and backward are the same floats in any batch
 * (ops_cpu.c: GEMM_ROWS), gradients and batchnorm sums are summed in double
 * across ranks too and rounded once (ops.h: DdpGrad), and the loss gradient
 * is over the global batch, so no division by the world size follows the sum.
 * Without these, float summation order alone moved resnet.net 1.3e-2 of the
 * update away in 20 steps (relu kinks after batchnorm, Adam's division by
 * sqrt(v) + eps), as far as PyTorch's own float32 is from float64 there.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int have_mpirun(void) { return test_run("command -v mpirun", NULL) == 0; }

static void equivalent(const char *net, int ranks, int steps, const char *flags)
{
    char *cmd, *out = NULL, identical[64];
    CU_ASSERT_FATAL(asprintf(&cmd, "RANKS=%d DDPC=%s PYTHON=%s tests/distributed/equivalence.sh %s %d 16 1e-4 %s", ranks,
                             test_ddpc(), test_python_with_torch() ? test_python_with_torch() : "/usr/bin/python3", net,
                             steps, flags) > 0);
    int rc = test_run(cmd, &out);
    char what[256];
    snprintf(what, sizeof what, "%s %s, %d ranks, %d steps: exit %d", net, flags, ranks, steps, rc);
    CU_assertImplementation(rc == 0 && out && strstr(out, "compare: OK"), __LINE__, what, __FILE__, "", CU_FALSE);
    /* beyond the 1e-4 asked for: the same bits, which is what README promises */
    CU_assertImplementation(out && strstr(out, "compare: OK worst 0.00e+00 "), __LINE__, what, __FILE__, "", CU_FALSE);
    snprintf(identical, sizeof identical, "weights identical on all %d ranks", ranks);
    CU_assertImplementation(out && strstr(out, identical), __LINE__, what, __FILE__, "", CU_FALSE);
    const char *verdict = out ? strstr(out, "compare:") : NULL;
    fprintf(stderr, "\n    %s %s%d ranks, %d steps: %.*s", net, flags, ranks, steps,
            verdict ? (int)strcspn(verdict, "\n") : 0, verdict ? verdict : "");
    if (rc != 0 && out)
        fprintf(stderr, "\n%s\n", out);
    free(out);
    free(cmd);
}

static void test_two_ranks_equal_one_rank_double_batch(void)
{
    if (!have_mpirun() || test_run("test -e /usr/share/datasets/fashion-mnist", NULL) != 0) {
        fputs("\n  (skipped: no mpirun or no Fashion-MNIST)", stderr);
        return;
    }
    equivalent("examples/mnist.net", 2, 20, "");
    equivalent("examples/resnet.net", 2, 20, "");
    equivalent("examples/mlp.net", 2, 20, "");
    /* a world size that is not a power of two: 3 x 16 against 1 x 48 */
    equivalent("examples/resnet.net", 3, 20, "");
    /* no_sync: each rank accumulates 2 batches, the sum is all-reduced once,
     * as one rank accumulating 2 double batches; several buckets this time */
    equivalent("examples/mnist.net", 2, 20, "--no-sync-every 2 --bucket-cap-mb 0.1 ");
}

static void test_nproc_per_node_and_mismatch(void)
{
    if (!have_mpirun() || test_run("test -e /usr/share/datasets/fashion-mnist", NULL) != 0)
        return;
    char *cmd, *out = NULL;
    /* --nproc-per-node 2 starts the ranks itself; ranks that disagree on
     * their settings stop with a message naming the rank. */
    CU_ASSERT_FATAL(asprintf(&cmd,
                             "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; %s examples/mlp.net --target cpu -o $d/p; "
                             "$d/p --nproc-per-node 2 --max-steps 5; echo spawned=$?; set +e; "
                             "mpirun --allow-run-as-root --oversubscribe -np 1 $d/p --max-steps 5 --quiet --batch-size 8 : "
                             "-np 1 $d/p --max-steps 5 --quiet --batch-size 16; echo mismatch=$?; "
                             "mpirun --allow-run-as-root --oversubscribe -np 1 $d/p --max-steps 5 --quiet : "
                             "-np 1 $d/p --max-steps 5 --quiet --data /nonexistent; echo failed=$?",
                             test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "spawned=0"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "weights identical on all 2 ranks"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "rank 1's settings differ from rank 0's (batch 16/8"));
    CU_ASSERT_PTR_NULL(out && strstr(out, "mismatch=0"));
    /* one rank fails: it says why, and the rank ended because of it says so too */
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "p: rank 1: error: /nonexistent"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "p: rank 0: stopping: the launcher ended this rank"));
    CU_ASSERT_PTR_NULL(out && strstr(out, "failed=0"));
    if (!out || !strstr(out, "spawned=0"))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

void suite_distributed(void)
{
    static const TestCase cases[] = {
        {"N ranks x B take the steps of 1 rank x N*B, bit for bit (2 and 3 ranks, mpirun)",
         test_two_ranks_equal_one_rank_double_batch},
        {"--nproc-per-node 2; other settings refused; a failing rank ends the others, each says why",
         test_nproc_per_node_and_mismatch},
        {NULL, NULL},
    };
    test_add_suite("distributed", cases);
}
