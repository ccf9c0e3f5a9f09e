/*
 * watchdog.c: a limit on the time of one test, so that a hang fails its test
 * by name instead of holding the run.
 *
 * Many tests look for hangs (a rank that never answers, a collective that
 * never ends) and wait for programs that should end. When one does not, the
 * run would wait until CI's own limit ended everything: no summary, nothing
 * named. A thread here watches the clock of the running test. Past the limit
 * it
 *  - says on stderr which test ran too long;
 *  - stops every process the runner started, and theirs (read from /proc):
 *    SIGTERM first, so that scripts clean up after themselves (the fault
 *    scripts' EXIT traps stop their ranks and remove their files), then,
 *    STOP_GRACE_S later, SIGKILL for what is left. The test's wait ends, it
 *    fails on its own checks (a program killed), and its teardown fails it
 *    once more, by name; the run goes on with the next test;
 *  - if the test still runs IN_RUNNER_GRACE_S after that, it is stuck in the
 *    runner itself (a deadlock, a loop), where nothing can be stopped: the
 *    run ends there, with the last lines of any run (its failed tests, and
 *    the summary line), the stuck test listed and counted as failed.
 * Each grace is the shorter of its own and the limit (tests/unit/test_runner.c
 * checks the watchdog at a limit of 2 s).
 *
 * The limit: UNIT_TEST_LIMIT_S seconds (0 turns the watchdog off, for a
 * debugger), by default DEFAULT_LIMIT_S: 20 minutes, more than ten times the
 * slowest test on 2 cores (about 90 s), and a fraction of CI's 90 minutes,
 * which then still ends with the summary line.
 */
#include "watchdog.h"

#include <CUnit/CUnit.h>
#include <CUnit/TestRun.h>  // CU_get_current_suite, CU_get_current_test
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { DEFAULT_LIMIT_S = 1200, STOP_GRACE_S = 10, IN_RUNNER_GRACE_S = 60 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed; /* on CLOCK_MONOTONIC: set up by watchdog_start */
static double limit_s;         /* 0: no watchdog */
static void (*print_last_lines)(void);
/* Guarded by lock: */
static unsigned long running;  /* the running test's serial number; 0 between tests */
static unsigned long serial;   /* the last test's */
static double started;         /* when the running test started (monotonic seconds) */
static char running_name[512]; /* "suite: test" */
static int stopped;            /* the watchdog stopped the running test's processes */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double shorter(double a, double b) { return a < b ? a : b; }

/* Waits, lock held, until test TEST is over or the clock reaches WHEN;
 * returns whether it is over. */
static int over_by(unsigned long test, double when)
{
    struct timespec until = {(time_t)when, (long)((when - (time_t)when) * 1e9)};
    while (running == test)
        if (pthread_cond_timedwait(&changed, &lock, &until) == ETIMEDOUT)
            return running != test;
    return 1;
}

/* The parent of process PID, from /proc/PID/stat ("pid (comm) state ppid
 * ...", where comm may hold spaces and parentheses); -1 if it is gone. */
static pid_t parent_of(pid_t pid)
{
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t len = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[len] = '\0';
    const char *end_of_comm = strrchr(stat, ')');
    int ppid;
    return end_of_comm && sscanf(end_of_comm + 1, " %*c %d", &ppid) == 1 ? (pid_t)ppid : -1;
}

/* Sends SIG to every descendant of this process: its children, theirs, and
 * so on. Returns how many it signalled. */
static int signal_descendants(int sig)
{
    enum { MAX_PROCS = 32768 };
    static pid_t pid[MAX_PROCS], parent[MAX_PROCS]; /* the watchdog's thread alone uses them */
    static char ours[MAX_PROCS];
    int n = 0;
    DIR *proc = opendir("/proc");
    for (struct dirent *e; proc && n < MAX_PROCS && (e = readdir(proc));)
        if (isdigit((unsigned char)e->d_name[0])) {
            pid[n] = (pid_t)atoi(e->d_name);
            parent[n] = parent_of(pid[n]);
            ours[n] = 0;
            n++;
        }
    if (proc)
        closedir(proc);
    /* A process is ours when its parent is this one or ours; /proc lists a
     * child before its parent where pids wrapped, so passes go on until one
     * finds no more. */
    const pid_t self = getpid();
    int signalled = 0;
    for (int grew = 1; grew;) {
        grew = 0;
        for (int i = 0; i < n; i++) {
            if (ours[i] || parent[i] <= 0)
                continue;
            int parent_ours = parent[i] == self;
            for (int j = 0; j < n && !parent_ours; j++)
                parent_ours = ours[j] && pid[j] == parent[i];
            if (parent_ours) {
                ours[i] = 1;
                grew = 1;
                signalled += kill(pid[i], sig) == 0;
            }
        }
    }
    return signalled;
}

/* Past the limit of test TEST (lock held on entry and on return). */
static void stop_test(unsigned long test)
{
    char name[sizeof running_name];
    snprintf(name, sizeof name, "%s", running_name);
    stopped = 1;
    pthread_mutex_unlock(&lock);
    fprintf(stderr, "\nunit_tests: watchdog: %s ran past %g s: stopping the processes it started\n", name, limit_s);
    int signalled = signal_descendants(SIGTERM);
    pthread_mutex_lock(&lock);
    if (signalled && !over_by(test, now() + shorter(STOP_GRACE_S, limit_s))) {
        pthread_mutex_unlock(&lock);
        signal_descendants(SIGKILL);
        pthread_mutex_lock(&lock);
    }
    double grace = shorter(IN_RUNNER_GRACE_S, limit_s);
    if (over_by(test, now() + grace))
        return;
    fprintf(stderr, "unit_tests: watchdog: %s still runs %g s later, inside the runner, where nothing can be "
                    "stopped: the run ends here\n", name, grace);
    print_last_lines();
    fflush(stdout);
    _exit(1);
}

static void *watch(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!running)
            pthread_cond_wait(&changed, &lock);
        unsigned long test = running;
        if (!over_by(test, started + limit_s))
            stop_test(test);
    }
    return NULL;
}

int watchdog_start(void (*last_lines)(void))
{
    const char *text = getenv("UNIT_TEST_LIMIT_S");
    char *end = NULL;
    limit_s = text && *text ? strtod(text, &end) : DEFAULT_LIMIT_S;
    if (text && *text && (*end || !(limit_s >= 0 && limit_s <= 1e7))) {
        fprintf(stderr, "unit_tests: UNIT_TEST_LIMIT_S=%s: expected seconds, 0 to 1e7 (0: no limit on a test's time)\n",
                text);
        return -1;
    }
    print_last_lines = last_lines;
    if (limit_s == 0)
        return 0;
    pthread_condattr_t monotonic;
    pthread_t thread;
    int failed = pthread_condattr_init(&monotonic) || pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC) ||
                 pthread_cond_init(&changed, &monotonic);
    /* The thread blocks every signal (it inherits the mask it is created
     * with), so that a signal sent to the runner, a test's alarm say,
     * reaches the tests' thread as it would without a watchdog. */
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    failed = failed || pthread_create(&thread, NULL, watch, NULL);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    if (failed) {
        fprintf(stderr, "unit_tests: cannot start the watchdog on the tests' time\n");
        return -1;
    }
    pthread_detach(thread);
    return 0;
}

void watchdog_arm(void)
{
    if (limit_s == 0)
        return;
    CU_pSuite suite = CU_get_current_suite();
    CU_pTest test = CU_get_current_test();
    pthread_mutex_lock(&lock);
    snprintf(running_name, sizeof running_name, "%s: %s", suite ? suite->pName : "?", test ? test->pName : "?");
    started = now();
    stopped = 0;
    running = ++serial;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

void watchdog_disarm(void)
{
    if (limit_s == 0)
        return;
    pthread_mutex_lock(&lock);
    int was_stopped = stopped;
    running = 0;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    if (was_stopped) {
        char why[128];
        snprintf(why, sizeof why, "ran past its limit, %g s (UNIT_TEST_LIMIT_S): the watchdog stopped it", limit_s);
        CU_assertImplementation(CU_FALSE, __LINE__, why, __FILE__, "", CU_FALSE);
    }
}
