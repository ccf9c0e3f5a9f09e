/*
 * The generated kernels' arithmetic on CPUs is the source's, wherever the
 * compiler puts it in vector lanes: ddpc's flags (DDPC_CPU_CXXFLAGS, with
 * -ffp-contract=off) and runtime/lane_math.h's erf, exp and tanh, which run
 * in lanes where glibc's ran one value at a time.
 *
 *  - lane_math.h against double's erf, exp and tanh, its special values, and the
 *    same bits in a vector loop, its tail and a scalar loop
 *    (tests/lane_math/check.cpp, compiled as ddpc compiles a program);
 *  - a program's steps, built as ddpc builds it and again with
 *    -fno-tree-vectorize, take the same bits (tests/layout/steps_digest.cpp
 *    on nets with GELU in both forms, sigmoid, tanh, batchnorm, pools and
 *    residuals): a compiler that leaves a loop scalar, on another CPU or
 *    at another version, changes nothing.
 */
#include "config.h"              // DDPC_CPU_CXX: what make builds a CPU program with
#include "ddpc.h"                // DDPC_CPU_CXXFLAGS: and the flags ddpc gives it
#include "steps_digest_build.h"  // steps_digest_build, steps_digest_assert_same
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_lane_math(void)
{
    char *out = NULL;
    int rc = test_run("set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; "
                      DDPC_CPU_CXX " " DDPC_CPU_CXXFLAGS " -Werror -Iruntime tests/lane_math/check.cpp -x none "
                      "-o $d/check -lm; $d/check",
                      &out);
    int ok = rc == 0 && out && strstr(out, "lane_math: ok\n");
    CU_assertImplementation(ok, __LINE__, "tests/lane_math/check.cpp passes", __FILE__, "", CU_FALSE);
    if (!ok && out)
        fprintf(stderr, "\n%s\n", out);
    free(out);
}

static const char *const nets[] = {
    "examples/mlp.net",                 /* GELU (erf), dropout, linear layers */
    "examples/resnet.net",              /* batchnorm, residuals, leaky_relu, pools */
    "tests/golden/good/everything.net", /* sigmoid, tanh, GELU in both forms */
};

static void test_vectorised_or_not(void)
{
    char *build = steps_digest_build("$d/net.cu", "$extra", "$d/$how");
    CU_ASSERT_PTR_NOT_NULL_FATAL(build);
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        char *cmd, *out = NULL;
        CU_ASSERT_FATAL(asprintf(&cmd,
                                 "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; "
                                 "%s %s --emit cu --target cpu > $d/net.cu; "
                                 "for how in vectorised scalar; do "
                                 "  extra=; [ $how = scalar ] && extra=-fno-tree-vectorize; "
                                 "  %s; "
                                 "  $d/$how 2 > $d/$how.digest; "
                                 "done; "
                                 "cat $d/vectorised.digest; "
                                 "cmp $d/vectorised.digest $d/scalar.digest && echo SAME || cat $d/scalar.digest",
                                 test_ddpc(), nets[i], build) > 0);
        int rc = test_run(cmd, &out);
        char what[256];
        snprintf(what, sizeof what, "%s: the same steps vectorised and not (exit %d)", nets[i], rc);
        steps_digest_assert_same(rc, out, what, __FILE__, __LINE__);
        free(out);
        free(cmd);
    }
    free(build);
}

void suite_lanes(void)
{
    static const TestCase cases[] = {
        {"lane_math.h: erf, exp and tanh within their bound, special values, the same bits in any lane", test_lane_math},
        {"a program's steps are the same bits built with -fno-tree-vectorize", test_vectorised_or_not},
        {NULL, NULL},
    };
    test_add_suite("lanes [g++]", cases);
}
