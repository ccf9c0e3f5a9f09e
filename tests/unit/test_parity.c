/*
 * Parity with PyTorch: the generated CPU program and the PyTorch module of
 * `ddpc --emit torch` take the same optimizer steps from the same weights on
 * the same batches, and end with the same weights as PyTorch in float64
 * (tests/parity/run.sh, tools/compare_weights.py): after one step within
 * 1e-3 of the update, after 5 within 1e-4, each plus the float32 rounding of
 * the weights and an envelope the float64 reference computes itself (as many
 * times as there are steps, how far one float32 rounding of the starting
 * weights carries it), plus twice PyTorch float32's own error at each
 * element (compare_weights.py --float32-reference says why: Adam's first
 * step on mlp.net needs it). That term depends on the machine's kernels, as
 * PyTorch's float32 does, but only ever widens the allowance, so no kernel
 * can fail the test through it; the faults tried (a 1% gradient error in a
 * layer, Adam's eps misplaced) fail with it as without it. The nets together
 * cover every layer, loss, optimizer and schedule: the examples and the nets
 * of tests/parity. Skipped without a Python with torch or without the
 * Fashion-MNIST data the runs read.
 *
 * The initial weights come from seed 5. At a ReLU input within float32
 * rounding of zero, or a max-pool window whose top two inputs are as close,
 * float32 and float64 legitimately take different branches; the kinks
 * envelope (tests/parity/run.sh) allows for each such input the float64 run
 * meets, whatever the seed.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const nets[] = {
    "examples/mnist.net",  "examples/mlp.net",          "examples/resnet.net",
    "tests/parity/mix.net", "tests/parity/adam_mse.net", "tests/parity/pool_residual.net",
};

static void same_steps_as_pytorch(int steps)
{
    if (!test_python_with_torch() || test_run("test -e /usr/share/datasets/fashion-mnist", NULL) != 0) {
        fputs("\n  (skipped: no python3 with torch, or no Fashion-MNIST)", stderr);
        return;
    }
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        char *cmd, *out = NULL;
        CU_ASSERT_FATAL(asprintf(&cmd, "DDPC=%s PYTHON=%s tests/parity/run.sh %s %d 16 5", test_ddpc(),
                                 test_python_with_torch(), nets[i], steps) > 0);
        int rc = test_run(cmd, &out);
        char what[256];
        snprintf(what, sizeof what, "%s, %d steps: parity run exit status %d", nets[i], steps, rc);
        CU_assertImplementation(rc == 0 && out && strstr(out, "compare: OK"), __LINE__, what, __FILE__, "", CU_FALSE);
        const char *verdict = out ? strstr(out, "compare:") : NULL;
        fprintf(stderr, "\n    %s, %d step%s: %.*s", nets[i], steps, steps > 1 ? "s" : "",
                verdict ? (int)strcspn(verdict, "\n") : 0, verdict ? verdict : "");
        if (rc != 0 && out)
            fprintf(stderr, "\n%s\n", out);
        free(out);
        free(cmd);
    }
}

static void test_one_step(void) { same_steps_as_pytorch(1); }

/* The worst error that compare_weights.py reported ("worst 3.4e-03 of the
 * update"), or -1. */
static double worst_of(const char *out)
{
    const char *w = out ? strstr(out, "compare: ") : NULL;
    w = w ? strstr(w, "worst ") : NULL;
    return w ? strtod(w + 6, NULL) : -1;
}

/* One step in tf32 and in bf16 against PyTorch float64 whose convs and
 * linear layers round their operands alike (torch_ref.py --precision), on
 * the SGD nets (Adam's first step, nearly lr x sign(g), turns any
 * difference in a gradient near zero into a whole update).
 *
 * The tolerance, PRECISION_TOL of the update: float32 parity ends within
 * 3.6e-3 of the update on these nets at one step (mnist.net's worst, a kink
 * the envelope allows). Rounding to a coarser grid adds boundary cases: an
 * operand whose float32 and float64 values straddle a rounding boundary
 * rounds one ulp of the precision apart (2^-8 of itself in bf16, 2^-11 in
 * tf32), where float32 differs by 2^-24. Few operands do, but each moves
 * its gradients by that much: measured, 2.3e-5 to 3.8e-3 of the update.
 * 1e-2 holds them with room, and is well below what leaving the rounding
 * out costs, which the second run of each pair measures: the same program
 * against float64 that does not round, at least UNROUNDED_FACTOR times
 * further away (measured 7.4 to 1,480 times). A program that rounds
 * nothing fails that. One call that leaves one operand as it is moves the
 * worst less (the weight gradients' dy unrounded: mnist.net's bf16 worst
 * 4.6e-3 against 3.4e-3): test_precision.c's per-call checks find it. */
#define PRECISION_TOL "1e-2"
enum { UNROUNDED_FACTOR = 4 };

static void test_precisions_one_step(void)
{
    if (!test_python_with_torch() || test_run("test -e /usr/share/datasets/fashion-mnist", NULL) != 0) {
        fputs("\n  (skipped: no python3 with torch, or no Fashion-MNIST)", stderr);
        return;
    }
    static const char *const sgd_nets[] = {"examples/mnist.net", "tests/parity/mix.net",
                                           "tests/parity/pool_residual.net"};
    static const char *const precisions[] = {"tf32", "bf16"};
    for (size_t p = 0; p < 2; p++)
        for (size_t i = 0; i < sizeof sgd_nets / sizeof *sgd_nets; i++) {
            double worst[2];
            for (int unrounded = 0; unrounded < 2; unrounded++) {
                char *cmd, *out = NULL;
                CU_ASSERT_FATAL(asprintf(&cmd, "PRECISION=%s REFERENCE_PRECISION=%s TOL=%s DDPC=%s PYTHON=%s "
                                               "tests/parity/run.sh %s 1 16 5",
                                         precisions[p], unrounded ? "fp32" : precisions[p], PRECISION_TOL, test_ddpc(),
                                         test_python_with_torch(), sgd_nets[i]) > 0);
                int rc = test_run(cmd, &out);
                worst[unrounded] = worst_of(out);
                if (!unrounded) {
                    char what[256];
                    snprintf(what, sizeof what, "%s in %s: parity run exit status %d", sgd_nets[i], precisions[p], rc);
                    CU_assertImplementation(rc == 0 && out && strstr(out, "compare: OK"), __LINE__, what, __FILE__, "",
                                            CU_FALSE);
                    if (rc != 0 && out)
                        fprintf(stderr, "\n%s\n", out);
                }
                free(out);
                free(cmd);
            }
            fprintf(stderr, "\n    %s, %s: worst %.2e of the update against float64 rounded alike, %.2e against "
                            "float64 unrounded", sgd_nets[i], precisions[p], worst[0], worst[1]);
            CU_ASSERT(worst[0] >= 0 && worst[1] >= UNROUNDED_FACTOR * worst[0]);
        }
}
static void test_five_steps(void) { same_steps_as_pytorch(5); }

/* A self-test of the tools under tests/parity: SCRIPT, given the ddpc under
 * test as $DDPC, must exit 0 and its output hold each of the N lines of
 * WANT (printed whole where not); skipped without a Python with torch. */
static void tool_self_test(const char *script, const char *const *want, int n)
{
    if (!test_python_with_torch()) {
        fputs("\n  (skipped: no python3 with torch)", stderr);
        return;
    }
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "DDPC=%s %s %s", test_ddpc(), test_python_with_torch(), script) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    int all = out != NULL;
    for (int i = 0; i < n; i++) {
        const int has = out && strstr(out, want[i]) != NULL;
        CU_assertImplementation(has, __LINE__, want[i], __FILE__, "", CU_FALSE);
        all &= has;
    }
    if (!all)
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

/* The kinks' max-pool near-ties (tests/parity/kinks_max_pool.py): found
 * alone, not an exact tie; flipped, the runner-up's value and gradient; in
 * disjoint windows, and in overlapping, padded ones. */
static void test_kinks_at_max_pools(void)
{
    static const char *const want[] = {
        "MaxPool2d(2): the gradient reaches the runner-up, not the top: ok",
        "MaxPool2d(3, stride=1, padding=1): the near-tie's windows alone found ([4, 5, 8, 9, 12, 13]): ok",
        "MaxPool2d(3, stride=1, padding=1): the gradient reaches the runner-up, not the top: ok",
    };
    tool_self_test("tests/parity/kinks_max_pool.py", want, 3);
}

/* The comparison itself (tests/parity/compare_small_update.py): one step's
 * small update on larger weights, within its tolerance plus float32
 * rounding, passes; every update 0.3% or 1% off fails, as an absolute floor
 * on the allowance let a 1% error in mnist.net's linear1 gradient pass. */
static void test_compare_holds_small_updates(void)
{
    static const char *const want[] = {"the float32 rounding of the reference: OK\n", "every update 0.3% off: FAILED\n",
                                       "every update 1% off: FAILED\n"};
    tool_self_test("tests/parity/compare_small_update.py", want, 3);
}

/* The comparison's verdict on weights that match nothing
 * (tests/parity/compare_verdicts.py): a NaN or an infinity in any file it
 * reads fails the tensor, which the summary names; a NaN passed every
 * allowance by comparison, and the suite above takes the verdict. A step
 * count of another dtype (F32 40.0 for I64 40) fails, as --init refuses it. */
static void test_compare_fails_faults(void)
{
    static const char *const want[] = {"the files as written pass: ok\n", "compare's verdicts: ", " cases ok\n"};
    tool_self_test("tests/parity/compare_verdicts.py", want, 3);
}

/* The tools of tools/ on mistakes (tests/parity/tools_bad_input.py): a
 * malformed safetensors file of each kind, a missing --module, files of
 * other tensors than the reference's, arguments a tool does not take: exit
 * 2, a message naming the file or argument, no traceback; --help exits 0;
 * each tool with a #! line executable. torch_ref.py refuses the --init files
 * and the nets' inputs the program refuses, in the program's words. */
static void test_tools_refuse_bad_input(void)
{
    static const char *const want[] = {" cases ok\n"};
    tool_self_test("tests/parity/tools_bad_input.py", want, 1);
}

/* A generated program's optimizers store a subnormal momentum as zero
 * (tests/parity/momentum_flushed.py: SGD's and Adam's, in checkpoints after
 * 300 steps), but for Adam with an eps below 1e-12, which keeps PyTorch's. */
static void test_momentum_flushed(void)
{
    const char *python = test_python_with_torch(); /* tools/torch_ref.py reads the checkpoints */
    if (!python) {
        fputs("\n  (skipped: no python3 with torch)", stderr);
        return;
    }
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "DDPC=%s %s tests/parity/momentum_flushed.py", test_ddpc(), python) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    static const char *const want[] = {"SGD, momentum 0.6: ok\n", "Adam, eps 1e-8: ok\n", "Adam, eps 1e-14: ok\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, want[i]) : NULL);
    test_show_lines(out);
    free(out);
    free(cmd);
}

void suite_parity(void)
{
    static const TestCase cases[] = {
        {"1 step of every example and parity net: PyTorch float64's, within 1e-3 of the update + envelope",
         test_one_step},
        {"5 steps: PyTorch float64's, within 1e-4 of the update + the envelope float64 computes", test_five_steps},
        {"the comparison: a small update on large weights passes within its tolerance, 0.3% off fails",
         test_compare_holds_small_updates},
        {"the comparison: a NaN or an infinity in any file, a step count of another dtype fail, named",
         test_compare_fails_faults},
        {"the kinks' max-pool near-ties: found alone, flipped to the runner-up's value and gradient",
         test_kinks_at_max_pools},
        {"the tools on a malformed file or a wrong command: one line naming it, exit 2, no traceback",
         test_tools_refuse_bad_input},
        {"a subnormal momentum stored as zero (SGD, Adam), kept by Adam with eps below 1e-12",
         test_momentum_flushed},
        {"1 step in tf32 and bf16: PyTorch float64's rounding alike, within 1e-2 of the update + envelope; "
         "several times further from float64's unrounded", test_precisions_one_step},
        {NULL, NULL},
    };
    test_add_suite("parity [python, bash]", cases);
}
