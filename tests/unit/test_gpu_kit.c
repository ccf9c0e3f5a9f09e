/*
 * Tests of the GPU kit (make gpu-kit, .gpu/) and of tests/gpu/run.sh
 * --dry-run, which checks it without a GPU: the kit a GPU node receives must
 * pass the dry run, and a kit that would fail there must fail it here, each
 * break named by its own check.
 *
 * The kit is built (make gpu-kit, a minute or two on two cores) when .gpu/
 * is missing or was built from other sources (tests/gpu/digest.sh), so a
 * clean clone tests what it would ship. Skipped, with a note, where nvcc,
 * cuDNN or NCCL are missing (make gpu-kit says so) or Fashion-MNIST is.
 * The broken kits are copies, in a directory of their own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"  // test_run, test_make_tmpdir, test_tmp_path

static int kit_state; /* 0: not tried; 1: ready; -1: cannot be built here (said why) */

/* Whether .gpu/ is built from these sources, building it if not. */
static int kit_ready(void)
{
    if (kit_state)
        return kit_state > 0;
    kit_state = -1;
    if (test_run("test -d /usr/share/datasets/fashion-mnist", NULL) != 0) {
        fputs("\n    (skipped: no Fashion-MNIST; make deps installs it)", stderr);
        return 0;
    }
    if (test_run("test \"$(sed -n 's/^digest //p' .gpu/kit.txt 2>/dev/null)\" = \"$(bash tests/gpu/digest.sh)\"",
                 NULL) != 0) {
        char *out = NULL;
        int rc = test_run("make -s gpu-kit 2>&1", &out);
        if (rc != 0 && out && strstr(out, "make gpu-kit needs")) {
            fputs("\n    (skipped: make gpu-kit needs nvcc, cuDNN and NCCL)", stderr);
            free(out);
            return 0;
        }
        if (rc != 0)
            fprintf(stderr, "\n$ make gpu-kit\nexit %d:\n%s", rc, out ? out : "");
        free(out);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
    }
    kit_state = 1;
    return 1;
}

/* Runs the dry run on KIT (NULL: .gpu/) with its output folder in DIR;
 * returns its exit status and, in *SUMMARY, its summary.txt (malloc'd).
 * Shows the output of a failure unless EXPECT_FAILURE. */
static int dry_run(const char *kit, const char *dir, char **summary, int expect_failure)
{
    char command[1024];
    snprintf(command, sizeof command, "bash tests/gpu/run.sh --dry-run --out %s/out%s%s", dir, kit ? " --kit " : "",
             kit ? kit : "");
    char *out = NULL;
    int rc = test_run(command, &out);
    *summary = test_read_file(test_tmp_path(dir, "out/summary.txt"), NULL);
    if (!*summary)
        *summary = strdup("");
    if (rc != 0 && !expect_failure)
        fprintf(stderr, "\n$ %s\nexit %d:\n%s", command, rc, out ? out : "");
    free(out);
    char rm[512];
    snprintf(rm, sizeof rm, "rm -rf %s/out", dir);
    test_run(rm, NULL);
    return rc;
}

static void test_kit_passes_dry_run(void)
{
    if (!kit_ready())
        return;
    char dir[64], *summary = NULL;
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddp_gpukit_XXXXXX");
    CU_ASSERT_EQUAL(dry_run(NULL, dir, &summary, 0), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(summary, " 0 failed"));
    CU_ASSERT_PTR_NOT_NULL(strstr(summary, "OK       kit binaries need no MPI"));
    CU_ASSERT_PTR_NOT_NULL(strstr(summary, "OK       fallback: mnist rebuilt here"));
    CU_ASSERT_PTR_NULL(strstr(summary, "FAILED"));
    free(summary);
    test_remove_tmpdir(dir);
}

/* A copy of the kit in DIR/kit, broken by BREAK_IT (a shell command run in
 * the copy); the dry run must fail, the summary saying "FAILED   CHECK" and,
 * unless NULL, DETAIL. */
static void expect_broken(const char *dir, const char *break_it, const char *check, const char *detail)
{
    char command[2048];
    snprintf(command, sizeof command, "rm -rf %s/kit && cp -a .gpu %s/kit && cd %s/kit && %s", dir, dir, dir, break_it);
    CU_ASSERT_EQUAL_FATAL(test_run(command, NULL), 0);
    char *summary = NULL;
    char expected[256];
    snprintf(expected, sizeof expected, "FAILED   %s", check);
    int rc = dry_run(test_tmp_path(dir, "kit"), dir, &summary, 1);
    CU_ASSERT_NOT_EQUAL(rc, 0);
    const char *line = strstr(summary, expected);
    const char *end = line ? strchr(line, '\n') : NULL;
    if (!line || (detail && (!strstr(line, detail) || (end && strstr(line, detail) > end)))) {
        fprintf(stderr, "\nafter %s: no '%s'%s%s in the summary:\n%s", break_it, expected, detail ? " naming " : "",
                detail ? detail : "", summary);
        CU_FAIL("the break is not named by its check");
    }
    free(summary);
}

static void test_broken_kits_fail_dry_run(void)
{
    if (!kit_ready())
        return;
    char dir[64], *summary = NULL;
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddp_gpukit_XXXXXX");
    /* the intact copy passes, elsewhere than where it was built */
    char command[512];
    snprintf(command, sizeof command, "cp -a .gpu %s/kit", dir);
    CU_ASSERT_EQUAL_FATAL(test_run(command, NULL), 0);
    CU_ASSERT_EQUAL(dry_run(test_tmp_path(dir, "kit"), dir, &summary, 0), 0);
    free(summary);

    /* a program that needs libmpi (a stub of that name) */
    char evil[1024];
    snprintf(evil, sizeof evil,
             "echo 'int MPI_Init(int *c, char ***v) { (void)c; (void)v; return 0; }' > %s/mpi.c && "
             "cc -shared -fPIC -Wl,-soname,libmpi.so.40 -o %s/libmpi.so.40 %s/mpi.c && "
             "echo 'int MPI_Init(int *, char ***); int main(int c, char **v) { return MPI_Init(&c, &v); }' > %s/evil.c && "
             "cc -o bin/evil %s/evil.c -L%s -l:libmpi.so.40",
             dir, dir, dir, dir, dir, dir);
    expect_broken(dir, evil, "kit binaries need no MPI", "bin/evil needs libmpi.so.40");
    /* over 48 MiB (a sparse file: its size is what counts) */
    expect_broken(dir, "truncate -s 40M data/extra && truncate -s 9M gpu/extra", "kit size", NULL);
    /* a program missing */
    expect_broken(dir, "rm gpu/resnet", "kit complete", "missing: gpu/resnet");
    /* built from other sources */
    expect_broken(dir, "sed -i 's/^digest .*/digest 0000000000000000/' kit.txt", "kit built from these sources", NULL);
    /* a program whose recorded build line is gone: the fallback cannot rebuild it */
    expect_broken(dir, "sed -i '/^\\/\\/ ddpc-build: /d' gpu/mnist.cu", "fallback: mnist rebuilt here", NULL);
    test_remove_tmpdir(dir);
}

void suite_gpu_kit(void)
{
    static const TestCase cases[] = {
        {"make gpu-kit's .gpu/ passes tests/gpu/run.sh --dry-run", test_kit_passes_dry_run},
        {"a kit with a libmpi program, over 48 MiB, incomplete or stale fails the dry run", test_broken_kits_fail_dry_run},
        {NULL, NULL},
    };
    test_add_suite("gpu_kit [bash, nvcc]", cases);
}
