/*
 * The test runner's own promise (README, tests/unit/main.c): a failed run
 * lists its failures again after CUnit's summary, just above its last line,
 * "N passed, M failed", at most 20 of them, so that the last lines of a CI
 * log say what failed. Checked on a runner built from tests/unit/main.c as
 * make builds the real one, but over one made-up suite (its own suites.inc)
 * whose tests fail on purpose.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* The made-up suite: one test fails two assertions, one passes, one fails
 * 25 times in a loop (past the list's 20). */
static const char demo_suite[] =
    "#include \"testutil.h\"\n"
    "static void fails_twice(void) { CU_ASSERT(1 == 2); CU_ASSERT_EQUAL(3, 4); }\n"
    "static void passes(void) { CU_ASSERT(1); }\n"
    "static void fails_in_a_loop(void) { for (int i = 0; i < 25; i++) CU_ASSERT(i < 0); }\n"
    "void suite_demo(void)\n"
    "{\n"
    "    static const TestCase cases[] = {{\"fails twice\", fails_twice}, {\"passes\", passes},\n"
    "                                     {\"fails in a loop\", fails_in_a_loop}, {NULL, NULL}};\n"
    "    test_add_suite(\"demo\", cases);\n"
    "}\n"
    /* testutil.c's, which the real runner links with the rest of the tests */
    "void test_add_suite(const char *name, const TestCase *cases)\n"
    "{\n"
    "    CU_pSuite suite = CU_add_suite(name, NULL, NULL);\n"
    "    for (const TestCase *c = cases; suite && c->name; c++)\n"
    "        CU_add_test(suite, c->name, c->fn);\n"
    "}\n";

static void test_failures_listed_last(void)
{
    char dir[64], cmd[1024];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddp_runner_XXXXXX");
    FILE *f = fopen(test_tmp_path(dir, "demo.c"), "w");
    CU_ASSERT_FATAL(f != NULL);
    fputs(demo_suite, f);
    fclose(f);
    f = fopen(test_tmp_path(dir, "suites.inc"), "w");
    CU_ASSERT_FATAL(f != NULL);
    fputs("SUITE(suite_demo)\n", f);
    fclose(f);
    /* DIR first, so that testutil.h takes the made-up suites.inc */
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -D_GNU_SOURCE -Wall -Werror -I%s -Itests/unit tests/unit/main.c %s/demo.c -lcunit -o %s/runner",
             dir, dir, dir);
    char *out = NULL;
    int built = test_run(cmd, &out);
    CU_ASSERT_EQUAL(built, 0);
    if (built != 0)
        fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "%s/runner", dir);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 1); /* a test failed */
    CU_ASSERT_FATAL(out != NULL);
    const char *summary = strstr(out, "Run Summary");
    const char *listed = summary ? strstr(summary, "FAILED  demo: fails twice\n") : NULL;
    CU_ASSERT_PTR_NOT_NULL(listed); /* after CUnit's summary */
    if (listed) {
        /* each of its two assertions, file:line and condition */
        CU_ASSERT_PTR_NOT_NULL(strstr(listed, "demo.c:2: 1 == 2\n"));
        CU_ASSERT_PTR_NOT_NULL(strstr(listed, "demo.c:2: CU_ASSERT_EQUAL(3,4)\n"));
        /* then the loop's first 18, and the rest counted */
        int loop = 0;
        for (const char *p = listed; (p = strstr(p, "FAILED  demo: fails in a loop\n")); p++)
            loop++;
        CU_ASSERT_EQUAL(loop, 18);
        CU_ASSERT_PTR_NOT_NULL(strstr(listed, "\n... and 7 more failures (above, where their tests ran)\n"));
        CU_ASSERT_PTR_NULL(strstr(listed, "FAILED  demo: passes"));
    }
    /* and the summary is the last line */
    size_t len = strlen(out);
    const char *last = "\n1 passed, 2 failed\n";
    CU_ASSERT(len >= strlen(last) && strcmp(out + len - strlen(last), last) == 0);
    if (!listed)
        fprintf(stderr, "\n%s\n", out);
    free(out);
    test_remove_tmpdir(dir);
}

void suite_runner(void)
{
    static const TestCase cases[] = {
        {"a failed run lists its failures (at most 20) after CUnit's summary, above its last line",
         test_failures_listed_last},
        {NULL, NULL},
    };
    test_add_suite("runner", cases);
}
