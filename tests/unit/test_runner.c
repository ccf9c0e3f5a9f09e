/*
 * The test runner's own promises (README, tests/unit/main.c), checked on
 * runners built with cc from tests/unit/main.c and watchdog.c, as make
 * builds the real one, each over one made-up suite whose tests fail on
 * purpose:
 *  - a failed run lists its failed tests again after CUnit's summary, just
 *    above its last line, "N passed, M failed": each with its first two
 *    failed assertions and a count of the rest, at most 20 tests and a count
 *    of the rest, so that the last lines of a CI log say what failed;
 *  - a test that runs past UNIT_TEST_LIMIT_S fails, named, and the run goes
 *    on: the processes it started get SIGTERM, then SIGKILL; one stuck in the
 *    runner itself ends the run with its summary line (watchdog.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>  // opendir
#include <limits.h>  // PATH_MAX
#include <signal.h>  // kill
#include <unistd.h>  // access, readlink

#include "testutil.h"

/* The made-up suite: a test that fails two assertions, one that passes, 18
 * that fail once, one that fails 25 times in a loop (the list's 20th failed
 * test), and 2 more that fail once (22 failed tests). */
static const char demo_suite[] =
    "#include <stdio.h>\n"
    "#include \"testutil.h\"\n"
    "static void fails_twice(void) { CU_ASSERT(1 == 2); CU_ASSERT_EQUAL(3, 4); }\n"
    "static void passes(void) { CU_ASSERT(1); }\n"
    "static void fails_in_a_loop(void) { for (int i = 0; i < 25; i++) CU_ASSERT(i < 0); }\n"
    "static void fails_once(void) { CU_ASSERT(0 > 1); }\n"
    "void suite_demo(void)\n"
    "{\n"
    "    static TestCase cases[24] = {{\"fails twice\", fails_twice}, {\"passes\", passes}};\n"
    "    static char names[20][16]; /* CUnit refuses two tests of one name */\n"
    "    for (int i = 0, at = 2; i < 20; i++, at++) {\n"
    "        if (i == 18)\n"
    "            cases[at++] = (TestCase){\"fails in a loop\", fails_in_a_loop};\n"
    "        snprintf(names[i], sizeof names[i], \"fails once %d\", i);\n"
    "        cases[at] = (TestCase){names[i], fails_once};\n"
    "    }\n"
    "    test_add_suite(\"demo\", cases);\n"
    "}\n";

/* testutil.c's, which the real runner links with the rest of the tests */
static const char made_up_add_suite[] = "void test_add_suite(const char *name, const TestCase *cases)\n"
                                        "{\n"
                                        "    CU_pSuite suite = CU_add_suite(name, NULL, NULL);\n"
                                        "    for (const TestCase *c = cases; suite && c->name; c++)\n"
                                        "        CU_add_test(suite, c->name, c->fn);\n"
                                        "}\n";

/* What the runner must list after CUnit's summary: first, then last (after
 * 17 more tests that fail once, a line each). */
static const char listed_first[] = "FAILED  demo: fails twice\n"
                                   "        demo.c:3: 1 == 2\n"
                                   "        demo.c:3: CU_ASSERT_EQUAL(3,4)\n"
                                   "FAILED  demo: fails once 0\n"
                                   "        demo.c:6: 0 > 1\n";
static const char listed_last[] = "FAILED  demo: fails once 17\n"
                                  "        demo.c:6: 0 > 1\n"
                                  "FAILED  demo: fails in a loop\n"
                                  "        demo.c:5: i < 0\n"
                                  "        demo.c:5: i < 0\n"
                                  "        (and 23 more in this test)\n"
                                  "... and 2 more failed tests (above, where they ran)\n"
                                  "\n"
                                  "1 passed, 22 failed\n";

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_FATAL(f != NULL);
    fputs(text, f);
    fclose(f);
}

/* Builds DIR/runner over the made-up suite SUITE (C source, whose
 * registration function is suite_demo). */
static void build_runner(const char *dir, const char *suite)
{
    char cmd[1024], *source = NULL;
    CU_ASSERT_FATAL(asprintf(&source, "%s%s", suite, made_up_add_suite) > 0);
    write_file(test_tmp_path(dir, "demo.c"), source);
    free(source);
    write_file(test_tmp_path(dir, "suites.inc"), "SUITE(suite_demo)\n");
    /* built in DIR (the failures' file: demo.c), with -I DIR and not the
     * build folder: testutil.h takes DIR's suites.inc */
    snprintf(cmd, sizeof cmd,
             "r=$PWD && cd %s && cc -std=c11 -D_GNU_SOURCE -Wall -Werror -I. -I$r/tests/unit -I$r/runtime $r/tests/unit/main.c "
             "$r/tests/unit/watchdog.c demo.c -lcunit -pthread -o runner",
             dir);
    char *out = NULL;
    int built = test_run(cmd, &out);
    CU_ASSERT_EQUAL(built, 0);
    if (built != 0)
        test_show_lines(out);
    free(out);
}

static void test_failures_listed_last(void)
{
    char dir[64], cmd[1024];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddp_runner_XXXXXX");
    build_runner(dir, demo_suite);
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "%s/runner", dir);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 1); /* tests failed */
    CU_ASSERT_FATAL(out != NULL);

    const char *summary = strstr(out, "Run Summary");
    const char *listed = summary ? strstr(summary, listed_first) : NULL;
    CU_ASSERT_PTR_NOT_NULL(listed); /* after CUnit's summary */
    /* the 18 that fail once a line each, and the output's last lines */
    int once = 0;
    for (const char *p = listed; p && (p = strstr(p, "FAILED  demo: fails once ")); p++)
        once++;
    CU_ASSERT_EQUAL(once, 18);
    size_t len = strlen(out), last = strlen(listed_last);
    int ends = len >= last && strcmp(out + len - last, listed_last) == 0;
    CU_ASSERT(ends);
    if (!listed || !ends)
        test_show_lines(out);
    free(out);
    test_remove_tmpdir(dir);
}

/* The watchdog's made-up suite: a test that passes; one whose program, a
 * shell script, never ends, and cleans up when it gets SIGTERM (it writes
 * the file "cleaned"); one whose program dies of SIGTERM, leaving a child
 * that ignores it (re-parented: it writes the file "escaper", and holds no
 * pipe of the runner's, so that it cannot hold this test); one that goes on
 * to a second program once its first is stopped (no pipe held either); and
 * one stuck in the runner itself. All run in the runner's folder, where
 * none may be left (left_running). */
static const char hanging_suite[] =
    "#include <stdlib.h>\n"
    "#include <unistd.h>\n"
    "#include \"testutil.h\"\n"
    "static void passes(void) { CU_ASSERT(1); }\n"
    "static void cleans_up(void) { CU_ASSERT(system(\"trap 'echo > cleaned; exit 3' TERM; sleep 1000 & wait\") == 0); }\n"
    "static void escapes(void)\n"
    "{\n"
    "    CU_ASSERT(system(\"sh -c 'trap \\\"\\\" TERM; touch escaper; exec sleep 1000 > /dev/null 2>&1' & wait\") == 0);\n"
    "}\n"
    "static void runs_on(void)\n"
    "{\n"
    "    CU_ASSERT(system(\"sleep 1000\") == 0);\n"
    "    usleep(700000); /* past the watchdog's first kill, well before its last (LIMIT s after the first) */\n"
    "    CU_ASSERT(system(\"exec sleep 1001 > /dev/null 2>&1\") == 0);\n"
    "}\n"
    "static void stuck(void) { for (;;) pause(); }\n"
    "void suite_demo(void)\n"
    "{\n"
    "    static const TestCase cases[] = {{\"passes\", passes}, {\"cleans up\", cleans_up},\n"
    "        {\"escapes\", escapes}, {\"runs on\", runs_on}, {\"stuck\", stuck}, {\"never runs\", passes}, {NULL, NULL}};\n"
    "    test_add_suite(\"hangs\", cases);\n"
    "}\n";

/* The made-up runner's limit, in seconds: each test's, and each of its
 * graces (watchdog.c); long enough for a shell to set its trap and write a
 * file on a busy machine. */
#define LIMIT "2"

/* What it must print, in this order: each stopped test named on stderr and
 * failed in its teardown, and the last lines, the stuck test listed and
 * counted. */
static const char *const watchdog_lines[] = {
    "unit_tests: watchdog: hangs: cleans up ran past " LIMIT " s: stopping the processes it started\n",
    "ran past its limit, " LIMIT " s (UNIT_TEST_LIMIT_S): the watchdog stopped it\n",
    "unit_tests: watchdog: hangs: escapes ran past " LIMIT " s: stopping the processes it started\n",
    "ran past its limit, " LIMIT " s (UNIT_TEST_LIMIT_S): the watchdog stopped it\n",
    "unit_tests: watchdog: hangs: runs on ran past " LIMIT " s: stopping the processes it started\n",
    "- system(\"exec sleep 1001 > /dev/null 2>&1\") == 0\n", /* killed at once */
    "ran past its limit, " LIMIT " s (UNIT_TEST_LIMIT_S): the watchdog stopped it\n",
    "unit_tests: watchdog: hangs: stuck ran past " LIMIT " s: stopping the processes it started\n",
    "unit_tests: watchdog: hangs: stuck still runs " LIMIT " s later, inside the runner, where nothing can be stopped: "
    "the run ends here\n",
    "FAILED  hangs: cleans up\n",
    "FAILED  hangs: escapes\n",
    "FAILED  hangs: runs on\n",
    "FAILED  hangs: stuck\n        stuck: the watchdog ended the run in it\n\n1 passed, 4 failed\n",
};

/* How many processes still run in the folder DIR (their working folder,
 * /proc/PID/cwd; a zombie has none); each is killed. The processes say
 * where they are, not a file they write: the watchdog may kill a program
 * before it writes anything. */
static int left_running(const char *dir)
{
    char want[PATH_MAX], link[64], cwd[PATH_MAX];
    CU_ASSERT_FATAL(realpath(dir, want) != NULL);
    DIR *proc = opendir("/proc");
    CU_ASSERT_FATAL(proc != NULL);
    int left = 0;
    for (struct dirent *e; (e = readdir(proc));) {
        int pid = atoi(e->d_name);
        if (pid <= 0)
            continue;
        snprintf(link, sizeof link, "/proc/%d/cwd", pid);
        ssize_t n = readlink(link, cwd, sizeof cwd - 1);
        if (n < 0)
            continue; /* gone, a zombie, or not ours to read */
        cwd[n] = '\0';
        if (strcmp(cwd, want) == 0) {
            fprintf(stderr, "\n    still running in %s: pid %d", dir, pid);
            kill(pid, SIGKILL);
            left++;
        }
    }
    closedir(proc);
    return left;
}

static void test_watchdog(void)
{
    char dir[64], cmd[1024];
    test_make_tmpdir(dir, sizeof dir, "/tmp/ddp_runner_XXXXXX");
    build_runner(dir, hanging_suite);
    char *out = NULL;
    /* timeout: should the made-up runner's watchdog fail, this test fails
     * in 2 minutes, not at the real runner's limit */
    snprintf(cmd, sizeof cmd, "cd %s && UNIT_TEST_LIMIT_S=" LIMIT " timeout -k 5 120 ./runner", dir);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 1);
    CU_ASSERT_FATAL(out != NULL);
    const char *at = out;
    for (size_t i = 0; i < sizeof watchdog_lines / sizeof watchdog_lines[0] && at; i++) {
        const char *found = strstr(at, watchdog_lines[i]);
        if (!found)
            fprintf(stderr, "\n    missing, in this order: %s", watchdog_lines[i]);
        CU_ASSERT_PTR_NOT_NULL(found);
        at = found ? found + strlen(watchdog_lines[i]) : NULL;
    }
    CU_ASSERT(at && *at == '\0'); /* the summary line is the last */
    CU_ASSERT_PTR_NULL(strstr(out, "never runs")); /* the run ended in "stuck" */
    CU_ASSERT(access(test_tmp_path(dir, "cleaned"), F_OK) == 0); /* SIGTERM came first */
    CU_ASSERT(access(test_tmp_path(dir, "escaper"), F_OK) == 0);  /* it ran, its trap set */
    CU_ASSERT_EQUAL(left_running(dir), 0);                        /* then SIGKILL, wherever each went */
    if (!at || *at)
        test_show_lines(out);
    free(out);

    /* 0: no limit, a debugger's setting: the first hang holds the run (here
     * until timeout ends it, 2 s on) */
    snprintf(cmd, sizeof cmd, "cd %s && UNIT_TEST_LIMIT_S=0 timeout -k 5 2 ./runner", dir);
    out = NULL;
    CU_ASSERT_EQUAL(test_run(cmd, &out), 124);
    CU_ASSERT_PTR_NULL(out ? strstr(out, "watchdog") : "no output");
    free(out);

    snprintf(cmd, sizeof cmd, "cd %s && UNIT_TEST_LIMIT_S=soon ./runner", dir);
    out = NULL;
    CU_ASSERT_EQUAL(test_run(cmd, &out), 2);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "unit_tests: UNIT_TEST_LIMIT_S=soon: expected seconds, 0 to 1e7 "
                                              "(0: no limit on a test's time)\n"));
    free(out);
    test_remove_tmpdir(dir);
}

void suite_runner(void)
{
    static const TestCase cases[] = {
        {"a failed run lists its failed tests (at most 20) after CUnit's summary, above its last line",
         test_failures_listed_last},
        {NULL, NULL},
    };
    test_add_suite("runner [cc]", cases);
}

/* A suite of its own, out of make check's (whose "runner" does not pick it):
 * its made-up tests wait out their limits, about 12 s. */
void suite_watchdog(void)
{
    static const TestCase cases[] = {
        {"a test past UNIT_TEST_LIMIT_S: failed by name, its processes stopped, the run goes on, or ends where stuck",
         test_watchdog},
        {NULL, NULL},
    };
    test_add_suite("watchdog [cc]", cases);
}
