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
 *  - stops the runner's descendants (read from /proc: the processes it
 *    started, and theirs, that have not left its tree): SIGTERM first, so
 *    that scripts clean up after themselves (the fault scripts' EXIT traps
 *    stop their ranks and remove their files), then, once those are gone
 *    or STOP_GRACE_S later, SIGKILL for what is left: the processes sent
 *    SIGTERM that still run, wherever their parent's death re-parented
 *    them, what they started, and, if the test still runs, what it started
 *    since. The test's wait ends, it fails on its own checks (a program
 *    killed), and its teardown fails it once more, by name; the run goes on
 *    with the next test;
 *  - if the test still runs, for IN_RUNNER_GRACE_S each program it starts
 *    is killed at once (twice a second), so that a test that runs several
 *    programs fails through them rather than waiting out the limit on each;
 *    if it still runs after that, it is stuck in the runner itself (a
 *    deadlock, a loop), where nothing can be stopped: the run ends there,
 *    with the last lines of any run (its failed tests, and the summary
 *    line), the stuck test listed and counted as failed.
 * Each grace is the shorter of its own and the limit (tests/unit/test_runner.c
 * checks the watchdog at a short limit).
 *
 * The limit: UNIT_TEST_LIMIT_S seconds (0 turns the watchdog off, for a
 * debugger), by default DEFAULT_LIMIT_S: 10 minutes, more than six times the
 * slowest test on 2 cores (about 90 s); CI, whose tests take about 25 of its
 * 90 minutes (the distributed suite twice), then still ends with its summary
 * line after a few hangs.
 */
#include "watchdog.h"
#include "clock.h"  // ddp_now, ddp_abs_time (runtime/: header-only)

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

enum { DEFAULT_LIMIT_S = 600, STOP_GRACE_S = 10, IN_RUNNER_GRACE_S = 60 };

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

static double shorter(double a, double b) { return a < b ? a : b; }

/* Waits, lock held, until test TEST is over or the clock reaches WHEN;
 * returns whether it is over. */
static int over_by(unsigned long test, double when)
{
    struct timespec until = ddp_abs_time(when);
    while (running == test)
        if (pthread_cond_timedwait(&changed, &lock, &until) == ETIMEDOUT)
            return running != test;
    return 1;
}

/* A process as /proc/PID/stat shows it ("pid (comm) state ppid ... starttime
 * ...", where comm may hold spaces and parentheses). A pid and its start
 * time name one process: a pid alone may have been reused. */
typedef struct {
    pid_t pid, parent;
    unsigned long long start; /* field 22, in clock ticks since boot */
    char state;               /* 'Z': a zombie, dead and not yet reaped */
} Proc;

/* Reads process PID into *P; 0 if it is gone. */
static int read_proc(pid_t pid, Proc *p)
{
    char path[64], stat[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t len = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[len] = '\0';
    const char *end_of_comm = strrchr(stat, ')');
    int parent;
    /* fields 3 and 4, then 17 skipped, then 22 */
    if (!end_of_comm || sscanf(end_of_comm + 1, " %c %d %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
                                                "%*s %*s %*s %llu", &p->state, &parent, &p->start) != 3)
        return 0;
    p->pid = pid;
    p->parent = (pid_t)parent;
    return 1;
}

/* The processes sent SIGTERM by the last stop (a SIGKILL follows for those
 * that outlive their grace), and the last reading of /proc: the watchdog's
 * thread alone uses them. MAX_PROCS bounds both; a machine running more
 * processes than that has some left unread. */
enum { MAX_PROCS = 32768 };
static Proc stopping[MAX_PROCS], procs[MAX_PROCS];
static char ours[MAX_PROCS];
static int n_stopping, n_procs;

static int was_stopping(const Proc *p)
{
    for (int i = 0; i < n_stopping; i++)
        if (stopping[i].pid == p->pid && stopping[i].start == p->start)
            return 1;
    return 0;
}

/* Reads /proc into procs, and marks as ours each process sent SIGTERM by
 * the stop (still running: when its parent died of that SIGTERM, a shell
 * that test_run's popen started say, it was re-parented and is no longer
 * this process's descendant), and each descendant of those and, where
 * WITH_RUNNER, of this process. */
static void find_ours(int with_runner)
{
    n_procs = 0;
    DIR *proc = opendir("/proc");
    for (struct dirent *e; proc && n_procs < MAX_PROCS && (e = readdir(proc));)
        if (isdigit((unsigned char)e->d_name[0]) && read_proc((pid_t)atoi(e->d_name), &procs[n_procs])) {
            ours[n_procs] = (char)was_stopping(&procs[n_procs]);
            n_procs++;
        }
    if (proc)
        closedir(proc);
    /* /proc lists a child before its parent where pids wrapped: passes go on
     * until one finds no more (a few hundred processes: quadratic is fine) */
    const pid_t runner = getpid();
    for (int grew = 1; grew;) {
        grew = 0;
        for (int i = 0; i < n_procs; i++) {
            int parent_ours = with_runner && procs[i].parent == runner;
            for (int j = 0; j < n_procs && !ours[i] && !parent_ours; j++)
                parent_ours = ours[j] && procs[j].pid == procs[i].parent;
            if (!ours[i] && parent_ours)
                ours[i] = grew = 1;
        }
    }
}

/* Whether a process sent SIGTERM by the stop still runs. */
static int any_stopping_left(void)
{
    Proc now_p;
    for (int i = 0; i < n_stopping; i++)
        if (read_proc(stopping[i].pid, &now_p) && now_p.start == stopping[i].start && now_p.state != 'Z')
            return 1;
    return 0;
}

/* Past the limit of test TEST (lock held on entry and on return). The
 * signals go out with the lock held, so that the test cannot end and the
 * next one start children meanwhile. */
static void stop_test(unsigned long test)
{
    char name[sizeof running_name];
    snprintf(name, sizeof name, "%s", running_name);
    stopped = 1;
    fprintf(stderr, "\nunit_tests: watchdog: %s ran past %g s: stopping the processes it started\n", name, limit_s);
    n_stopping = 0;
    find_ours(1);
    for (int i = 0; i < n_procs; i++)
        if (ours[i] && procs[i].state != 'Z' && kill(procs[i].pid, SIGTERM) == 0)
            stopping[n_stopping++] = procs[i];
    pthread_mutex_unlock(&lock);
    /* their grace, to clean up: until they are gone, the test over or not */
    for (double until = ddp_now() + shorter(STOP_GRACE_S, limit_s); any_stopping_left() && ddp_now() < until;)
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    pthread_mutex_lock(&lock);
    double grace = shorter(IN_RUNNER_GRACE_S, limit_s), end = ddp_now() + grace;
    do {
        find_ours(running == test); /* a test over has its next one's children to keep */
        for (int i = 0; i < n_procs; i++)
            if (ours[i] && procs[i].state != 'Z')
                kill(procs[i].pid, SIGKILL);
        if (over_by(test, shorter(ddp_now() + 0.5, end)))
            return;
    } while (ddp_now() < end);
    fprintf(stderr, "unit_tests: watchdog: %s still runs %g s later, inside the runner, where nothing can be "
                    "stopped: the run ends here\n", name, grace);
    /* The stuck thread may hold stdout's lock (a write to a full pipe):
     * then a bare line, rather than a wait that never ends. */
    if (ftrylockfile(stdout) == 0) {
        print_last_lines();
        fflush(stdout);
    } else {
        static const char line[] = "\nthe run ended in a test stuck inside the runner (above)\n";
        ssize_t ignored = write(STDOUT_FILENO, line, sizeof line - 1);
        (void)ignored;
    }
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
    started = ddp_now();
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
