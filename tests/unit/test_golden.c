/*
 * Golden tests: ddpc's output pinned exactly (the jq tests/jq.test habit).
 *
 *   tests/golden/bad/NAME.net    -> NAME.expected: `ddpc --check NAME.net`'s messages; exit 2
 *   tests/golden/good/NAME.net   -> NAME.summary:  `ddpc --summary NAME.net`; exit 0
 *   examples/NAME.net            -> tests/golden/good/NAME.summary
 *   tests/golden/plan/NAME.net   -> NAME.plan:     `ddpc --emit plan NAME.net` (buckets by cap)
 *
 * tests/golden/update.sh rewrites the pinned files from the current ddpc;
 * a change to them is a change to what users see, reviewed in the diff.
 */
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Runs ddpc FLAG on every .net of DIR (from inside DIR, so messages name the
 * bare file) and compares with DIR/EXPECT_DIR/NAME.EXT. Returns how many ran. */
static int check_dir(const char *dir, const char *flag, const char *expect_dir, const char *ext, int want_rc)
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
        char *expected = test_read_file(expect_path, NULL);
        char what[512];
        snprintf(what, sizeof what, "%s/%s: exit status %d, expected %d", dir, e->d_name, rc, want_rc);
        CU_assertImplementation(rc == want_rc, __LINE__, what, __FILE__, "", CU_FALSE);
        snprintf(what, sizeof what, "%s/%s: output differs from %s", dir, e->d_name, expect_path);
        int same = expected && out && strcmp(expected, out) == 0;
        CU_assertImplementation(same, __LINE__, what, __FILE__, "", CU_FALSE);
        if (!same && out)
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

void suite_golden(void)
{
    static const TestCase cases[] = {
        {"bad .net files give their pinned messages and exit 2", test_bad_files},
        {"good .net files give their pinned summaries", test_good_summaries},
        {"examples give their pinned summaries", test_example_summaries},
        {"bucket plans for several caps are pinned", test_bucket_plans},
        {NULL, NULL},
    };
    test_add_suite("golden", cases);
}
