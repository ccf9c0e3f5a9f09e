/*
 * The runner's limit on one test's time (watchdog.c says what happens past
 * it): main.c starts the watchdog, and every test runs between an arm and a
 * disarm, as its suite's per-test setup and teardown.
 */
#ifndef TEST_WATCHDOG_H
#define TEST_WATCHDOG_H

/* Reads the limit, UNIT_TEST_LIMIT_S seconds (0: no limit), and starts the
 * watching thread. LAST_LINES prints the run's last lines, counting a test
 * still running as failed: the watchdog calls it before it ends a run stuck
 * in a test. Returns 0, or -1 after saying what is wrong. */
int watchdog_start(void (*last_lines)(void));

/* Per-test setup and teardown (CUnit's CU_SetUpFunc, CU_TearDownFunc): the
 * clock starts for the current test, and stops; a test the watchdog stopped
 * fails here once more, by name. */
void watchdog_arm(void);
void watchdog_disarm(void);

#endif
