/*
 * The one test runner: every CUnit suite of the files in tests/unit, found by the
 * Makefile (each `void suite_NAME(void)` at the start of a line registers its
 * own suite and tests). One runner, one summary: CI reads its last lines.
 *
 * Tests that run programs (ddpc, the generated trainers, python3-torch) find
 * them through the environment that `make test` sets: DDPC, PYTHON.
 *
 * A failed run lists its failed tests once more just above the summary line
 * (list_failures), so that the last lines say what failed. A test that runs
 * past its limit is stopped and failed by name (watchdog.c), so that a hang
 * cannot hold the run.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"  // the suites' declarations
#include "watchdog.h"  // watchdog_start, watchdog_arm, watchdog_disarm

/* Each failed test again (a suite that could not start too: no test then),
 * after CUnit's summary: CI shows only the last lines of a run, and CUnit
 * prints a failure where its test ran, often hundreds of lines earlier.
 * Each test with its first LISTED_PER_TEST failed assertions and a count of
 * the rest, at most LISTED_TESTS tests and a count of the rest, so that one
 * test failing in a loop cannot push the others out of those lines. */
enum { LISTED_TESTS = 20, LISTED_PER_TEST = 2 };

static void count_rest_of_test(unsigned failures)
{
    if (failures > LISTED_PER_TEST)
        printf("        (and %u more in this test)\n", failures - LISTED_PER_TEST);
}

static void list_failures(void)
{
    unsigned tests = 0, in_test = 0;
    CU_pFailureRecord prev = NULL;
    for (CU_pFailureRecord f = CU_get_failure_list(); f; prev = f, f = f->pNext) {
        if (!prev || prev->pSuite != f->pSuite || prev->pTest != f->pTest) { /* a test's first failure */
            if (tests <= LISTED_TESTS) /* the test before, if listed */
                count_rest_of_test(in_test);
            in_test = 0;
            if (++tests <= LISTED_TESTS)
                printf("FAILED  %s: %s\n", f->pSuite ? f->pSuite->pName : "?",
                       f->pTest ? f->pTest->pName : "(the suite itself)");
        }
        if (tests <= LISTED_TESTS && in_test < LISTED_PER_TEST)
            printf("        %s:%u: %s\n", f->strFileName ? f->strFileName : "?", f->uiLineNumber,
                   f->strCondition ? f->strCondition : "?");
        in_test++;
    }
    if (tests <= LISTED_TESTS)
        count_rest_of_test(in_test);
    else
        printf("... and %u more failed tests (above, where they ran)\n", tests - LISTED_TESTS);
}

/* Whether NAME picks SUITE: its function name contains NAME. */
static int picks(const char *suite, const char *name) { return strstr(suite, name) != NULL; }

/* `unit_tests NAME...` runs only the suites some NAME picks; with none, every suite. */
static int chosen(const char *suite, int argc, char **argv)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++)
        if (picks(suite, argv[i]))
            return 1;
    return 0;
}

/* Whether NAME picks at least one suite: a misspelt name in ONLY or make
 * check's list must not quietly run nothing. */
static int picks_a_suite(const char *name)
{
#define SUITE(suite) \
    if (picks(#suite, name)) \
        return 1;
#include "suites.inc"
#undef SUITE
    return 0;
}

/* The run's last lines: its failed tests again, then the summary line. A
 * test still running is one the watchdog ends the run in, stuck: it is
 * listed last, and counted as failed. */
static void print_ending(void)
{
    CU_pTest stuck = CU_get_current_test();
    CU_pSuite suite = CU_get_current_suite();
    unsigned run = CU_get_number_of_tests_run(), failed = CU_get_number_of_tests_failed();
    if (CU_get_number_of_failure_records())
        list_failures();
    if (stuck)
        printf("FAILED  %s: %s\n        stuck: the watchdog ended the run in it\n", suite ? suite->pName : "?",
               stuck->pName);
    printf("\n%u passed, %u failed\n", run - failed, failed + (stuck != NULL));
}

/* Every test runs between the watchdog's arm and disarm: its suite's
 * per-test setup and teardown, which no suite sets for itself. */
static int watch_every_test(void)
{
    for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext) {
        if (s->pSetUpFunc || s->pTearDownFunc) {
            fprintf(stderr, "unit_tests: suite '%s' has a per-test setup or teardown of its own, which the "
                            "watchdog's would replace\n", s->pName);
            return -1;
        }
        s->pSetUpFunc = watchdog_arm;
        s->pTearDownFunc = watchdog_disarm;
    }
    return 0;
}

/* UNIT_TEST=TEXT runs only the chosen suites' tests whose description
 * contains TEXT, for a break-check of one test of a slow suite; the others
 * are inactive (counted so in CUnit's summary, not failed). None matching
 * is a misspelling: status 2, as for a suite's name. */
static int pick_tests(const char *text)
{
    if (!text || !*text)
        return 0;
    unsigned matched = 0;
    for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext)
        for (CU_pTest t = s->pTest; t; t = t->pNext) {
            int match = strstr(t->pName, text) != NULL;
            matched += (unsigned)match;
            CU_set_test_active(t, match ? CU_TRUE : CU_FALSE);
        }
    CU_set_fail_on_inactive(CU_FALSE);
    if (matched == 0) {
        fprintf(stderr, "unit_tests: no test of the chosen suites has '%s' in its description (UNIT_TEST)\n", text);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!picks_a_suite(argv[i])) {
            fprintf(stderr, "unit_tests: no suite's name contains '%s' (the suites are the tests/unit/*.c functions suite_NAME)\n", argv[i]);
            return 2;
        }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
#define SUITE(name) \
    if (chosen(#name, argc, argv)) \
        name();
#include "suites.inc"
#undef SUITE
    if (pick_tests(getenv("UNIT_TEST")) != 0 || watch_every_test() != 0 || watchdog_start(print_ending) != 0)
        return 2;
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    int registry_failed = CU_get_error() != CUE_SUCCESS;
    print_ending();
    CU_cleanup_registry();
    return failed || registry_failed ? 1 : 0;
}
