/*
 * Channels-last programs (ddpc --layout nhwc) against NCHW ones: the same
 * net built both ways takes the same steps to the bit on the CPU, where a
 * channels-last conv transposes around the NCHW one and every generated
 * kernel adds the same terms in the same order. Each net is emitted twice
 * for the CPU, each source compiled into tests/layout/steps_digest.cpp
 * (which includes it, as gradcheck.cpp does) and run; the two digests of
 * parameters, running statistics, scores and losses must match. Finite
 * differences check the channels-last backward on its own
 * (test_gradcheck.c); this test pins it to the NCHW program.
 *
 * Together the nets cover every kernel that reads a value's layout: convs
 * with and without a bias or a generated activation kernel, pools that
 * tile, overlap or pad (tests/golden/good/pool_paths.net: K over 4),
 * batchnorm in 2-D and 1-D, global average pooling, residuals, dropout on
 * C x H x W values, flattens that permute, and data with one channel
 * (the same floats in both layouts) and with three (permuted on the way in).
 */
#include "steps_digest_build.h"  // steps_digest_build, steps_digest_assert_same
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const nets[] = {
    "examples/mnist.net",
    "examples/cifar10.net",
    "examples/resnet.net",
    "tests/golden/good/everything.net",
    "tests/golden/good/pool_paths.net",
    "tests/gradcheck/relu_pools.net",
    "tests/gradcheck/smooth_mse.net",
    "tests/layout/channels_last.net",
};

static void test_channels_last_takes_the_same_steps(void)
{
    char *build = steps_digest_build("$d/$layout.cu", "", "$d/$layout");
    CU_ASSERT_PTR_NOT_NULL_FATAL(build);
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        char *cmd, *out = NULL;
        CU_ASSERT_FATAL(
            asprintf(&cmd,
                     "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; "
                     "for layout in nchw nhwc; do "
                     "  %s %s --emit cu --target cpu --layout $layout > $d/$layout.cu; "
                     "  %s; "
                     "  $d/$layout 2 > $d/$layout.digest; "
                     "done; "
                     /* the flag took: a channels-last source, not the NCHW one again */
                     "grep -q 'stored channels-last (NHWC)' $d/nhwc.cu; "
                     "if grep -q 'stored channels-last (NHWC)' $d/nchw.cu; then echo 'the NCHW source is channels-last'; exit 1; fi; "
                     "cat $d/nchw.digest; cmp $d/nchw.digest $d/nhwc.digest && echo SAME || cat $d/nhwc.digest",
                     test_ddpc(), nets[i], build) > 0);
        int rc = test_run(cmd, &out);
        char what[256];
        snprintf(what, sizeof what, "%s: NCHW and channels-last digests (exit %d)", nets[i], rc);
        steps_digest_assert_same(rc, out, what, __FILE__, __LINE__);
        free(out);
        free(cmd);
    }
    free(build);
}

/* --layout takes nchw, nhwc or auto; anything else is bad usage, exit 2. */
static void test_layout_flag(void)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "%s examples/mnist.net --layout chw --emit cu", test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 2);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "ddpc: error: --layout must be nchw, nhwc or auto, not 'chw'"));
    free(out);
    free(cmd);
    /* auto: channels-last on GPUs for a net whose convs run on tensor cores
     * (everything.net: bf16), whose data's three channels are then
     * permuted on the way in (input_forward in the launch table); NCHW on
     * CPUs, and for fp32 (mnist.net: its flatten a view, no kernel) */
    CU_ASSERT_FATAL(asprintf(&cmd,
                             "for t in cuda cpu; do %s tests/golden/good/everything.net --emit plan --target $t "
                             "| grep -c ' input_forward '; done; "
                             "%s examples/mnist.net --emit plan --target cuda | grep -c ' flatten1_forward '",
                             test_ddpc(), test_ddpc()) > 0);
    out = NULL;
    test_run(cmd, &out);
    CU_ASSERT_STRING_EQUAL(out ? out : "", "1\n0\n0\n");
    free(out);
    free(cmd);
}

/* --summary's layout line says what was asked; a net that makes no
 * C x H x W value has no layout to change, asked or not (mlp.net); auto
 * takes tf32's tensor cores as it takes bf16's. */
static void test_layout_said(void)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
                             "D=%s; $D --summary --layout nhwc examples/mnist.net | grep '^layout:'; "
                             "$D --summary --layout nhwc examples/mlp.net | grep -c '^layout:'; "
                             "$D --emit cu --target cpu --layout nhwc examples/mlp.net | grep -c 'CHANNELS_LAST = 1'; "
                             "sed 's/^  seed 0$/  seed 0; precision tf32/' examples/mnist.net | "
                             "$D - --emit plan --target cuda | grep -c ' flatten1_forward '",
                             test_ddpc()) > 0);
    test_run(cmd, &out);
    CU_ASSERT_STRING_EQUAL(out ? out : "", "layout:       NHWC (channels-last), as --layout asks\n0\n0\n1\n");
    free(out);
    free(cmd);
}

/* A checkpoint of a channels-last program resumes only in a channels-last
 * program: the trainer hands the program's layout (DdpNet.channels_last)
 * to the checkpoint, not the NumPy flag of a like name. */
static void test_resume_keeps_the_layout(void)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
                             "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; "
                             "for l in nchw nhwc; do %s examples/mnist.net --target cpu --layout $l -o $d/$l > /dev/null; done; "
                             "data=/usr/share/datasets/fashion-mnist; "
                             "$d/nhwc --data $data --max-steps 2 --save $d/ck --save-every 2 --quiet; "
                             "$d/nhwc --data $data --max-steps 3 --save $d/ck --resume --quiet; echo same=$?; "
                             "set +e; $d/nchw --data $data --max-steps 4 --save $d/ck --resume --quiet 2>&1; "
                             "echo other=$?",
                             test_ddpc()) > 0);
    int rc = test_run(cmd, &out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "same=0"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "made by a program built with ddpc --layout nhwc, this one was built "
                                              "with --layout nchw"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "other=2"));
    if (!out || !strstr(out, "other=2"))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

/* The start-up memory check counts the library ops' scratch: on a CPU a
 * channels-last conv copies its input and output to NCHW at the planned
 * batch, for a conv 1->4096 k1 on 1x28x28 (1 + 4096) x 784 floats a sample,
 * 717.95 GiB at the 60,000 samples of Fashion-MNIST's training set (the
 * most a step holds at any larger --batch-size), and a few hundred KiB a
 * thread for im2col (an NCHW program needs only these). */
static void test_memory_check_counts_scratch(void)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
                             "d=$(mktemp -d); trap 'rm -rf $d' EXIT; "
                             "printf 'net wide1\\ninput 1x28x28\\nconv 1->4096 k1\\nrelu\\nglobal_avgpool\\nflatten\\n"
                             "linear 10\\nloss cross_entropy\\n' > $d/wide1.net; "
                             "for l in nchw nhwc; do %s $d/wide1.net --target cpu --layout $l -o $d/$l > /dev/null; "
                             "$d/$l --max-steps 1 --batch-size 1048576 --quiet 2>&1; echo $l=$?; done",
                             test_ddpc()) > 0);
    test_run(cmd, &out);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "GiB of it activations, 0.0 GiB the layers' scratch), but the CPU"));
    CU_ASSERT(out && (strstr(out, "GiB of it activations, 718.0 GiB the layers' scratch), but the CPU") ||
                      strstr(out, "GiB of it activations, 718.1 GiB the layers' scratch), but the CPU")));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "nchw=2") && strstr(out, "nhwc=2"));
    if (!out || !strstr(out, "718.0 GiB the layers' scratch"))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

void suite_layout(void)
{
    static const TestCase cases[] = {
        {"channels-last programs take the NCHW programs' steps, bit for bit", test_channels_last_takes_the_same_steps},
        {"--layout: its words, and auto keeps NCHW on CPUs", test_layout_flag},
        {"--summary says the layout asked; nothing to change without C x H x W values; auto in tf32",
         test_layout_said},
        {"a channels-last program's checkpoint resumes only channels-last", test_resume_keeps_the_layout},
        {"the start-up memory check counts a channels-last conv's NCHW copies", test_memory_check_counts_scratch},
        {NULL, NULL},
    };
    test_add_suite("layout [g++]", cases);
}
