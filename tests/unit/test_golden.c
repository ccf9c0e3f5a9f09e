/*
 * Golden tests: ddpc's output pinned exactly (the jq tests/jq.test habit).
 *
 *   tests/golden/bad/NAME.net    -> NAME.expected: `ddpc --check NAME.net`'s messages; exit 2
 *   tests/golden/good/NAME.net   -> NAME.summary:  `ddpc --summary NAME.net`; exit 0
 *   examples/NAME.net            -> tests/golden/good/NAME.summary
 *   tests/golden/plan/NAME.net   -> NAME.plan:     `ddpc --emit plan NAME.net` (buckets by cap)
 *   examples/, tests/parity/, tests/gradcheck/, tests/golden/good/ NAME.net
 *                                -> tests/golden/cu/NAME.cu: `ddpc --emit cu --target cpu`,
 *                                   less its "// ddpc-build:" line (this machine's paths)
 *   tests/layout/NAME.net        -> tests/golden/nhwc/NAME.cu: the same, channels-last
 *                                   (`--layout nhwc`)
 *
 * tests/golden/update.sh rewrites the pinned files from the current ddpc;
 * a change to them is a change to what users see, reviewed in the diff.
 */
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The line of a generated program that names this machine's compiler and
 * paths; the goldens leave it out (update.sh drops it the same way). */
static const char build_line[] = "// ddpc-build: ";

/* Removes, in place, every line of TEXT that starts with build_line. */
static void drop_build_lines(char *text)
{
    char *to = text;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, build_line, sizeof build_line - 1) != 0) {
            memmove(to, line, len);
            to += len;
        }
        line += len;
    }
    *to = '\0';
}

/* Shows, on stderr, the first line where GOT and EXPECTED (or a missing
 * file) part, and update.sh's name. */
static void show_first_difference(const char *name, const char *got, const char *expected)
{
    if (!expected) {
        fprintf(stderr, "\n--- %s: no pinned file (run tests/golden/update.sh)\n", name);
        return;
    }
    int line = 1;
    const char *g = got, *x = expected;
    for (; *g && *g == *x; g++, x++)
        line += *g == '\n';
    while (g > got && g[-1] != '\n') /* back to the line's start in both */
        g--, x--;
    fprintf(stderr, "\n--- %s: line %d differs (tests/golden/update.sh re-pins; review the diff)\n"
                    "    got:      %.*s\n    expected: %.*s\n",
            name, line, (int)strcspn(g, "\n"), g, (int)strcspn(x, "\n"), x);
}

/* Runs ddpc FLAG on every .net of DIR (from inside DIR, so messages name the
 * bare file) and compares with DIR/EXPECT_DIR/NAME.EXT, less the build line
 * when DROP_BUILD_LINE. Returns how many ran. */
static int check_dir_as(const char *dir, const char *flag, const char *expect_dir, const char *ext, int want_rc,
                        int drop_build_line)
{
    DIR *d = opendir(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, ".net"))
            continue;
        char *cmd, *expect_path, *out = NULL;
        int stem = (int)(strlen(e->d_name) - 4);
        if (asprintf(&cmd, "cd %s && %s %s %s", dir, test_ddpc(), flag, e->d_name) < 0 ||
            asprintf(&expect_path, "%s/%s/%.*s.%s", dir, expect_dir, stem, e->d_name, ext) < 0)
            CU_FAIL_FATAL("out of memory");
        int rc = test_run(cmd, &out);
        if (out && drop_build_line)
            drop_build_lines(out);
        char *expected = test_read_file(expect_path, NULL);
        char what[512];
        snprintf(what, sizeof what, "%s/%s: exit status %d, expected %d", dir, e->d_name, rc, want_rc);
        CU_assertImplementation(rc == want_rc, __LINE__, what, __FILE__, "", CU_FALSE);
        snprintf(what, sizeof what, "%s/%s: output differs from %s", dir, e->d_name, expect_path);
        int same = expected && out && strcmp(expected, out) == 0;
        CU_assertImplementation(same, __LINE__, what, __FILE__, "", CU_FALSE);
        if (!same && out && drop_build_line) /* a whole program is too long to show */
            show_first_difference(e->d_name, out, expected);
        else if (!same && out)
            fprintf(stderr, "\n--- %s: got:\n%s--- expected:\n%s", e->d_name, out, expected ? expected : "(missing)\n");
        free(cmd);
        free(expect_path);
        free(out);
        free(expected);
        count++;
    }
    closedir(d);
    return count;
}

static int check_dir(const char *dir, const char *flag, const char *expect_dir, const char *ext, int want_rc)
{
    return check_dir_as(dir, flag, expect_dir, ext, want_rc, 0);
}

static void test_bad_files(void)
{
    int n = check_dir("tests/golden/bad", "--check", ".", "expected", 2);
    CU_ASSERT(n >= 40);
}

static void test_good_summaries(void)
{
    int n = check_dir("tests/golden/good", "--summary", ".", "summary", 0);
    CU_ASSERT(n >= 3);
}

static void test_example_summaries(void)
{
    int n = check_dir("examples", "--summary", "../tests/golden/good", "summary", 0);
    CU_ASSERT(n >= 3);
}

static void test_bucket_plans(void)
{
    int n = check_dir("tests/golden/plan", "--emit plan", ".", "plan", 0);
    CU_ASSERT(n >= 3);
}

/* The generated program of every example, parity, gradcheck and good net, pinned,
 * so that each change to the emitted code shows in review. */
static void test_generated_programs(void)
{
    const char *flag = "--emit cu --target cpu";
    int n = check_dir_as("examples", flag, "../tests/golden/cu", "cu", 0, 1) +
            check_dir_as("tests/parity", flag, "../golden/cu", "cu", 0, 1) +
            check_dir_as("tests/gradcheck", flag, "../golden/cu", "cu", 0, 1) +
            check_dir_as("tests/golden/good", flag, "../cu", "cu", 0, 1);
    CU_ASSERT(n >= 11);
    /* and no pinned program of a net that is gone */
    int pinned = 0;
    DIR *d = opendir("tests/golden/cu");
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    for (struct dirent *e; (e = readdir(d));)
        pinned += ends_with(e->d_name, ".cu");
    closedir(d);
    CU_ASSERT_EQUAL(pinned, n);
}

/* The channels-last kernels' text, pinned as the NCHW ones are. */
static void test_channels_last_programs(void)
{
    int n = check_dir_as("tests/layout", "--emit cu --target cpu --layout nhwc", "../golden/nhwc", "cu", 0, 1);
    CU_ASSERT(n >= 1);
}

/* One source for both targets: the CUDA program's text is the CPU one's but
 * for its build line (in one layout: --layout auto may choose NHWC for a
 * GPU, for tf32 and bf16, not for resnet.net's fp32). */
static void test_one_source_for_both_targets(void)
{
    if (access("build/libddprt_cuda.a", F_OK) != 0) { /* built without nvcc, cuDNN or NCCL */
        fputs("\n  (skipped: no build/libddprt_cuda.a)", stderr);
        return;
    }
    char *cpu = NULL, *cuda = NULL, *cmd;
    if (asprintf(&cmd, "%s examples/resnet.net --emit cu --target cpu", test_ddpc()) < 0)
        CU_FAIL_FATAL("out of memory");
    CU_ASSERT_EQUAL(test_run(cmd, &cpu), 0);
    free(cmd);
    if (asprintf(&cmd, "%s examples/resnet.net --emit cu --target cuda", test_ddpc()) < 0)
        CU_FAIL_FATAL("out of memory");
    CU_ASSERT_EQUAL(test_run(cmd, &cuda), 0);
    free(cmd);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cpu);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cuda);
    CU_ASSERT_PTR_NOT_NULL(strstr(cpu, build_line));
    CU_ASSERT_PTR_NOT_NULL(strstr(cuda, build_line));
    drop_build_lines(cpu);
    drop_build_lines(cuda);
    CU_ASSERT_STRING_EQUAL(cpu, cuda);
    free(cpu);
    free(cuda);
}

void suite_golden(void)
{
    static const TestCase cases[] = {
        {"bad .net files give their pinned messages and exit 2", test_bad_files},
        {"good .net files give their pinned summaries", test_good_summaries},
        {"examples give their pinned summaries", test_example_summaries},
        {"bucket plans for several caps are pinned", test_bucket_plans},
        {"generated programs are pinned (tests/golden/cu)", test_generated_programs},
        {"channels-last programs are pinned (tests/golden/nhwc)", test_channels_last_programs},
        {"one generated source for the CPU and the GPU", test_one_source_for_both_targets},
        {NULL, NULL},
    };
    test_add_suite("golden", cases);
}
