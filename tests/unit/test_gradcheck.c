/*
 * Gradient checks of the generated code against finite differences, for
 * every layer type and loss: the examples, tests/golden/good/everything.net
 * and the nets of tests/gradcheck/ together use each of them. Each net is
 * emitted for the CPU, compiled into tests/gradcheck/gradcheck.cpp (which
 * includes it) and run; see that file for the method and tolerances. The
 * spatial nets are checked again channels-last (--layout nhwc), whose
 * kernels index every C x H x W value otherwise. The same program checks
 * that a NaN in the data reaches the loss. tests/gradcheck/large_logits.cpp
 * checks cross entropy at logits of 2^20 the same way.
 */
#include "config.h"  // DDPC_IMAGE_LIBS, DDPC_CPU_LIBS: what make links a CPU program with
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *net, *flags;
} nets[] = {
    {"examples/mnist.net", ""},
    {"examples/mlp.net", ""},
    {"examples/resnet.net", ""},
    {"tests/golden/good/everything.net", ""},
    {"tests/gradcheck/smooth_mse.net", ""},
    {"tests/gradcheck/dropout_residual.net", ""},
    {"tests/gradcheck/relu_pools.net", ""},
    {"tests/gradcheck/late_params.net", ""},
    {"tests/gradcheck/nan_pools.net", ""},
    {"tests/layout/channels_last.net", ""},
    {"tests/golden/good/everything.net", "--layout nhwc"},
    {"tests/gradcheck/smooth_mse.net", "--layout nhwc"},
    {"tests/gradcheck/relu_pools.net", "--layout nhwc"},
    {"tests/gradcheck/late_params.net", "--layout nhwc"},
    {"tests/gradcheck/nan_pools.net", "--layout nhwc"},
    {"tests/layout/channels_last.net", "--layout nhwc"},
};

/* Emits NET (with FLAGS) for the CPU, compiles PROGRAM, which includes it,
 * and runs it with ARGS: it must exit 0 and print "WHAT: OK". */
static void check_program(const char *program, const char *net, const char *flags, const char *what_ok,
                          const char *args)
{
    /* make passes its CPU_LIBS; run by hand, the libraries ddpc gives a CPU
     * program (build/config.h), the image ones from their copies in build/ */
    const char *libs = getenv("CPU_LIBS");
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
                             "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; "
                             "%s %s %s --emit cu --target cpu > $d/net.cu; "
                             "g++ -x c++ -std=c++17 -O1 -fopenmp -Wall -Wextra -Werror -Iruntime "
                             "-DDDP_NET_SOURCE=\\\"$d/net.cu\\\" %s -x none -o $d/check "
                             "build/libddprt.a %s; $d/check %s",
                             test_ddpc(), net, flags, program,
                             libs ? libs
                                  : "$(for a in " DDPC_IMAGE_LIBS "; do printf 'build/%s ' $a; done) " DDPC_CPU_LIBS,
                             args)
                    > 0);
    int rc = test_run(cmd, &out);
    char what[256], ok[64];
    snprintf(what, sizeof what, "%s %s: %s exit status %d", net, flags, what_ok, rc);
    snprintf(ok, sizeof ok, "%s: OK", what_ok);
    CU_assertImplementation(rc == 0 && out && strstr(out, ok), __LINE__, what, __FILE__, "", CU_FALSE);
    if (rc != 0 && out)
        fprintf(stderr, "\n%s\n", out);
    free(out);
    free(cmd);
}

static void test_gradients_match_finite_differences(void)
{
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++)
        check_program("tests/gradcheck/gradcheck.cpp", nets[i].net, nets[i].flags, "gradcheck", "10");
}

/* The loss at logits of 2^20: tests/gradcheck/large_logits.cpp's check. */
static void test_loss_exact_at_large_logits(void)
{
    check_program("tests/gradcheck/large_logits.cpp", "tests/gradcheck/nan_pools.net", "", "large_logits", "");
}

void suite_gradcheck(void)
{
    static const TestCase cases[] = {
        {"backward matches finite differences for every layer and loss", test_gradients_match_finite_differences},
        {"cross entropy's loss and gradient exact at logits of 2^20", test_loss_exact_at_large_logits},
        {NULL, NULL},
    };
    test_add_suite("gradcheck [g++]", cases);
}
