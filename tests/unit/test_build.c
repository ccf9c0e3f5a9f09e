/*
 * ddpc -o and --rebuild: the generated source compiles cleanly for both
 * targets, a CPU program links no BLAS, and the build line recorded in it
 * rebuilds it.
 *
 * The CUDA programs cannot run here, but every example must compile and link
 * with nvcc (sm_90 code and PTX) with no warning from the generated code.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const examples[] = {"examples/mnist.net", "examples/mlp.net", "examples/resnet.net"};

static int have_nvcc(void)
{
    return test_run("test -x build/libddprt_cuda.a || test -f build/libddprt_cuda.a", NULL) == 0 &&
           test_run("command -v nvcc || test -x /usr/local/cuda/bin/nvcc", NULL) == 0;
}

static void build_example(const char *net, const char *target)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; %s %s --target %s -o $d/prog; "
                                   "test -x $d/prog; grep -q '^// ddpc-build: ' $d/prog.cu; "
                                   "if ldd $d/prog 2>/dev/null | grep -Eqi 'lib(open)?blas|libmkl|libblis'; then "
                                   "echo LINKS_A_BLAS; fi; echo BUILT",
                             test_ddpc(), net, target) > 0);
    int rc = test_run(cmd, &out);
    char what[512];
    snprintf(what, sizeof what, "%s --target %s: exit %d", net, target, rc);
    CU_assertImplementation(rc == 0 && out && strstr(out, "BUILT"), __LINE__, what, __FILE__, "", CU_FALSE);
    /* A CPU program's products are its own (runtime/gemm_cpu.h): a BLAS
     * linked in would be dead weight, and a BLAS call a broken promise. (A
     * CUDA program links cuBLAS, which the pattern leaves out.) */
    snprintf(what, sizeof what, "%s --target %s: links a BLAS", net, target);
    CU_assertImplementation(out && !strstr(out, "LINKS_A_BLAS"), __LINE__, what, __FILE__, "", CU_FALSE);
    snprintf(what, sizeof what, "%s --target %s: the compiler warned", net, target);
    CU_assertImplementation(out && !strstr(out, "warning"), __LINE__, what, __FILE__, "", CU_FALSE);
    if (rc != 0 || (out && strstr(out, "warning")))
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(cmd);
}

static void test_cpu_programs_build(void)
{
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++)
        build_example(examples[i], "cpu");
}

static void test_cuda_programs_build(void)
{
    if (!have_nvcc()) {
        fputs("\n  (skipped: no nvcc or no build/libddprt_cuda.a)", stderr);
        return;
    }
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++)
        build_example(examples[i], "cuda");
}

static void test_cuda_source_has_ptx_and_sm90(void)
{
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd, "%s examples/mnist.net --emit cu --target cuda | head -5", test_ddpc()) > 0);
    if (!have_nvcc()) {
        free(cmd);
        return;
    }
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "code=sm_90"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "code=compute_90"));
    free(out);
    free(cmd);
}

static void test_rebuild_after_edit(void)
{
    char *cmd, *out = NULL;
    /* a hand edit (a comment) and a rebuild; then a broken edit must fail with status 1 */
    CU_ASSERT_FATAL(asprintf(&cmd,
                             "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; %s examples/mlp.net --target cpu -o $d/p; "
                             "rm $d/p; echo '// tuned by hand' >> $d/p.cu; %s --rebuild $d/p.cu; test -x $d/p; "
                             "echo 'this is not C' >> $d/p.cu; set +e; %s --rebuild $d/p.cu; echo \"rebuild=$?\"; "
                             "%s --rebuild /nonexistent.cu; echo \"missing=$?\"; echo 'int x;' > $d/q.cu; "
                             "%s --rebuild $d/q.cu; echo \"foreign=$?\"",
                             test_ddpc(), test_ddpc(), test_ddpc(), test_ddpc(), test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "rebuild=1"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "the build failed"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "missing=2"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "foreign=2"));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "no '// ddpc-build:' line"));
    free(out);
    free(cmd);
}

void suite_build(void)
{
    static const TestCase cases[] = {
        {"every example builds for the CPU without warnings, and links no BLAS", test_cpu_programs_build},
        {"every example builds for CUDA (sm_90 + PTX) without warnings", test_cuda_programs_build},
        {"the CUDA build line asks for sm_90 code and PTX", test_cuda_source_has_ptx_and_sm90},
        {"--rebuild runs the recorded line; failures are reported", test_rebuild_after_edit},
        {NULL, NULL},
    };
    test_add_suite("build", cases);
}
