/*
 * Tests of runtime/launcher.c (--nproc-per-node): the ranks it starts are
 * /bin/sh scripts written here (ddp_launch_exec takes the program to run),
 * each doing what a rank of a real run might: finish, fail with a status, be
 * killed, ignore SIGTERM. The launcher itself runs in a forked child, with its
 * stdout and stderr in a pipe: its signal handling stays out of the runner,
 * and the pipe reaches end-of-file only when the launcher and every rank
 * (each holds the pipe too) are gone, so "no rank outlived the run" is
 * checked, not assumed. Grace periods are short to keep each test quick.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"  // ddp_launch_exec, ddp_launch_local
#include "rank_signals.h"  // DDP_EXIT_STOPPED
#include "store_server.h"  // DDP_STORE_LISTEN_FD_ENV
#include "testutil.h"

static char tmpdir[64];
/* launch(): then send SECOND_SIGNAL (0: none), right behind the first, or
 * where SECOND_ONCE_ASKED, once the launcher has asked every rank to stop
 * (the file tmpdir/usr1.N for every rank N: two signals of one kind merge
 * while the first is pending) */
static int second_signal, second_once_asked;
/* launch(): the launcher starts with its stdin closed */
static int without_stdin;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int has(const char *text, const char *what)
{
    if (text && strstr(text, what))
        return 1;
    fprintf(stderr, "\noutput lacks \"%s\":\n%s\n", what, text ? text : "(null)");
    return 0;
}

/* Writes an executable script NAME in tmpdir running BODY (printf-style;
 * DIR in it is tmpdir); returns its path. */
__attribute__((format(printf, 2, 3)))
static const char *script(const char *name, const char *fmt, ...)
{
    static char path[8][128];
    static int next;
    char *p = path[next++ % 8];
    if (!tmpdir[0]) {
        strcpy(tmpdir, "/tmp/ddp_launcher_XXXXXX");
        CU_ASSERT_FATAL(mkdtemp(tmpdir) != NULL);
    }
    snprintf(p, sizeof path[0], "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    CU_ASSERT_FATAL(f != NULL);
    fprintf(f, "#!/bin/sh\nDIR=%s\n", tmpdir);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
    chmod(p, 0755);
    return p;
}

/* How many of the files tmpdir/NAME.N, for ranks N < NPROC, exist. */
static int ranks_wrote(const char *name, int nproc)
{
    int written = 0;
    for (int r = 0; r < nproc; r++) {
        char path[160];
        snprintf(path, sizeof path, "%s/%s.%d", tmpdir, name, r);
        written += access(path, F_OK) == 0;
    }
    return written;
}

/* Whether the file tmpdir/NAME.N exists for every rank N < NPROC, within
 * 30 s. */
static int all_ranks_wrote(const char *name, int nproc)
{
    for (int tries = 0; tries < 3000; tries++) {
        if (ranks_wrote(name, nproc) == nproc)
            return 1;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* Runs ddp_launch_exec(EXE, NPROC, ARGS split at spaces, GRACE) in a child;
 * returns its exit status (-1 if it died), its output in *OUT, and how long
 * until the launcher and all ranks were gone in *ELAPSED. With KILL_WITH, that
 * signal is sent to the launcher once the file tmpdir/ready.N exists for
 * every rank N (a failure, past 30 s), then SECOND_SIGNAL if set. */
static int launch(const char *exe, int nproc, const char *args, double grace, char **out, double *elapsed,
                  int kill_with)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", args);
    char *argv[32];
    int argc = test_split_args(buf, argv, 0, 32);
    int fd;
    double t0 = now_s();
    pid_t pid = test_fork_capturing(&fd);
    if (pid == 0) {
        /* Stale variables of an outer launcher must not reach the ranks. */
        setenv("RANK", "7", 1);
        setenv("MASTER_PORT", "1", 1);
        setenv(DDP_STORE_LISTEN_FD_ENV, "1", 1);
        if (without_stdin)
            close(STDIN_FILENO);
        _exit(ddp_launch_exec(exe, nproc, argc, argv, grace));
    }
    if (kill_with) {
        CU_ASSERT(all_ranks_wrote("ready", nproc)); /* else the signal goes anyway, to end the run */
        kill(pid, kill_with);
        if (second_signal) {
            if (second_once_asked)
                CU_ASSERT(all_ranks_wrote("usr1", nproc));
            kill(pid, second_signal);
        }
    }
    int rc = test_child_output(pid, fd, out);
    *elapsed = now_s() - t0;
    return rc;
}

static void clean(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "cd %s && rm -f ready.[0-9]* env.[0-9]* usr1.[0-9]* named.[0-9]* held.[0-9]* "
             "free.[0-9]* looked.[0-9]*", tmpdir);
    test_run(cmd, NULL);
}

static void test_all_succeed(void)
{
    const char *exe = script("env.sh", "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR "
                                       "$MASTER_PORT $DDP_SPAWNED|$*\" > $DIR/env.$RANK\n");
    clean();
    char *out;
    double elapsed;
    int rc = launch(exe, 3, "/x/prog --epochs 3 --nproc-per-node 3 --data=d --nproc-per-node=3 --quiet", 5, &out,
                    &elapsed, 0);
    CU_ASSERT(rc == 0);
    CU_ASSERT(out && out[0] == '\0');
    int port = -1;
    for (int r = 0; r < 3; r++) {
        char path[160], *text;
        snprintf(path, sizeof path, "%s/env.%d", tmpdir, r);
        text = test_read_file(path, NULL);
        CU_ASSERT_FATAL(text != NULL);
        int rank, local, world, local_world, p, spawned;
        char addr[32], args[128];
        CU_ASSERT(sscanf(text, "%d %d %d %d %31s %d %d|%127[^\n]", &rank, &local, &world, &local_world, addr, &p,
                         &spawned, args) == 8);
        CU_ASSERT(rank == r && local == r && world == 3 && local_world == 3 && spawned == 1);
        CU_ASSERT(strcmp(addr, "127.0.0.1") == 0);
        CU_ASSERT(p > 1 && p <= 65535 && (port < 0 || p == port)); /* one port for all, not the stale one */
        port = p;
        CU_ASSERT(strcmp(args, "--epochs 3 --data=d --quiet") == 0);
        free(text);
    }
    free(out);
}

/* Rank 0's store serves on a socket the launcher listened on from the
 * port's pick (store_server.h). The ranks find that socket (the listener on
 * MASTER_PORT) in /proc/net/tcp and look for it among their descriptors:
 * rank 0 holds it, under the variable's number (past the standard streams,
 * even where the launcher had one closed); rank 1 and the launcher (rank
 * 1's parent, once it has forked rank 0) do not (a process whose
 * descriptors cannot be read counts as holding it). Of one rank, none. */
static void test_port_held(void)
{
    const char *exe = script("held.sh",
                             "inode=$(awk -v p=\":$(printf %%04X $MASTER_PORT)\" '$2 ~ p\"$\" && $4 == \"0A\" "
                             "{print $10}' /proc/net/tcp)\n"
                             "holds() { [ -r /proc/$1/fd ] || return 0; ls -l /proc/$1/fd | grep -q \"socket:\\[$inode\\]\"; }\n"
                             "[ -n \"$%s\" ] && touch $DIR/named.$RANK\n"
                             "if [ \"$RANK\" = 0 ]; then\n"
                             "  [ -n \"$inode\" ] && [ \"$(readlink /proc/$$/fd/$%s)\" = \"socket:[$inode]\" ] && "
                             "[ $%s -ge 3 ] && touch $DIR/held.0\n"
                             "  i=0; while [ \"$WORLD_SIZE\" = 2 ] && [ ! -e $DIR/looked.1 ] && [ $i -lt 200 ]; do "
                             "sleep 0.05; i=$((i+1)); done\n"
                             "else\n"
                             "  [ -n \"$inode\" ] && ! holds $$ && ! holds $PPID && touch $DIR/free.1\n"
                             "  touch $DIR/looked.1\n"
                             "fi\n",
                             DDP_STORE_LISTEN_FD_ENV, DDP_STORE_LISTEN_FD_ENV, DDP_STORE_LISTEN_FD_ENV);
    char *out;
    double elapsed;
    clean();
    CU_ASSERT(launch(exe, 2, "/x/prog --nproc-per-node 2", 5, &out, &elapsed, 0) == 0);
    CU_ASSERT(ranks_wrote("named", 2) == 1 && ranks_wrote("named", 1) == 1); /* rank 0's variable alone */
    CU_ASSERT(ranks_wrote("held", 1) == 1);
    CU_ASSERT(ranks_wrote("free", 2) == 1); /* rank 1's: the socket listens, neither it nor the launcher has it */
    free(out);
    clean();
    CU_ASSERT(launch(exe, 1, "/x/prog --nproc-per-node 1", 5, &out, &elapsed, 0) == 0);
    CU_ASSERT(ranks_wrote("named", 1) == 0 && ranks_wrote("held", 1) == 0);
    free(out);
    clean();
    without_stdin = 1;
    CU_ASSERT(launch(exe, 2, "/x/prog --nproc-per-node 2", 5, &out, &elapsed, 0) == 0);
    without_stdin = 0;
    CU_ASSERT(ranks_wrote("held", 1) == 1);
    free(out);
}

static void test_one_fails(void)
{
    const char *exe = script("fail3.sh", "[ \"$RANK\" = 1 ] && exit 3\nexec sleep 30\n");
    char *out;
    double elapsed;
    int rc = launch(exe, 3, "/x/prog --nproc-per-node 3", 5, &out, &elapsed, 0);
    CU_ASSERT(rc == 3);
    CU_ASSERT(has(out, "prog: error: rank 1 exited with status 3"));
    CU_ASSERT(elapsed < 3); /* the sleepers ended by SIGTERM, at once */
    free(out);
}

static void test_one_killed(void)
{
    const char *exe = script("kill9.sh", "[ \"$RANK\" = 0 ] && kill -9 $$\nexec sleep 30\n");
    char *out;
    double elapsed;
    int rc = launch(exe, 2, "/x/prog --nproc-per-node=2", 5, &out, &elapsed, 0);
    CU_ASSERT(rc == 1);
    CU_ASSERT(has(out, "prog: error: rank 0 was killed by signal SIGKILL"));
    CU_ASSERT(elapsed < 3);
    free(out);
}

static void test_grace_period(void)
{
    /* Ranks 0 and 2 ignore SIGTERM (sleep inherits it): SIGKILL after 0.5 s.
     * Rank 1 fails after 1 s, once the others have set their trap (their
     * files ready.N; or 10 s on, for the test to fail rather than hang). */
    const char *exe = script("stubborn.sh",
                             "[ \"$RANK\" = 1 ] && { sleep 1; i=0; until [ -e $DIR/ready.0 ] && [ -e $DIR/ready.2 ] || "
                             "[ $((i += 1)) -gt 200 ]; do sleep 0.05; done; exit 5; }\n"
                             "trap '' TERM\ntouch $DIR/ready.$RANK\nexec sleep 30\n");
    clean();
    char *out;
    double elapsed;
    int rc = launch(exe, 3, "/x/prog", 0.5, &out, &elapsed, 0);
    CU_ASSERT(rc == 5);
    CU_ASSERT(has(out, "prog: error: rank 1 exited with status 5"));
    CU_ASSERT(has(out, "rank 0 did not stop within 0.5 s of SIGTERM; killing it"));
    CU_ASSERT(has(out, "rank 2 did not stop within 0.5 s of SIGTERM; killing it"));
    CU_ASSERT(elapsed > 1.4 && elapsed < 4);
    free(out);
}

static void test_sigterm_forwarded(void)
{
    /* A SIGTERM to the launcher asks the ranks to stop as SIGUSR1; ranks
     * that stop on it with DDP_EXIT_STOPPED make the launcher's status. */
    const char *exe = script("usr1.sh", "trap 'echo $RANK > $DIR/usr1.$RANK; exit %d' USR1\ntouch $DIR/ready.$RANK\n"
                                        "while :; do sleep 0.05; done\n", DDP_EXIT_STOPPED);
    clean();
    char *out;
    double elapsed;
    int rc = launch(exe, 3, "/x/prog", 5, &out, &elapsed, SIGTERM);
    CU_ASSERT(rc == DDP_EXIT_STOPPED);
    CU_ASSERT(out && !strstr(out, "error"));
    CU_ASSERT(elapsed < 3);
    CU_ASSERT_EQUAL(ranks_wrote("usr1", 3), 3); /* every rank was asked to stop */
    free(out);
}

static void test_ranks_without_stop_handler(void)
{
    /* Ranks that do not take SIGUSR1 die of it: a failure, said as one. */
    const char *exe = script("wait.sh", "touch $DIR/ready.$RANK\nexec sleep 30\n");
    clean();
    char *out;
    double elapsed;
    int rc = launch(exe, 2, "/x/prog", 5, &out, &elapsed, SIGINT);
    CU_ASSERT(rc == 1);
    CU_ASSERT(has(out, "was killed by signal SIGUSR1"));
    CU_ASSERT(elapsed < 3);
    free(out);
}

static void test_second_signal(void)
{
    /* Ranks that ignore SIGTERM and the stop asked for (SIGUSR1: they note
     * it, and go on), a grace period of 10 s: a second signal to the launcher
     * kills them at once, sent once the ranks were asked to stop, or right
     * behind the first (of another kind, which cannot merge with the first
     * while pending). */
    const char *exe = script("deaf.sh", "trap '' TERM\ntrap 'touch $DIR/usr1.$RANK' USR1\ntouch $DIR/ready.$RANK\n"
                                        "while :; do sleep 0.05; done\n");
    /* right behind: the kernel may deliver the SIGINT first, so either is the first */
    static const struct {
        int second, once_asked;
        const char *killing, *stopped;
    } cases[] = {{SIGTERM, 1, "prog: killing rank 0 (a second SIGTERM)", "prog: error: stopped by SIGTERM"},
                 {SIGINT, 0, "prog: killing rank 0 (a second SIG", "prog: error: stopped by SIG"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clean();
        char *out;
        double elapsed;
        second_signal = cases[i].second;
        second_once_asked = cases[i].once_asked;
        int rc = launch(exe, 2, "/x/prog", 10, &out, &elapsed, SIGTERM);
        second_signal = 0;
        CU_ASSERT(rc == 1);
        CU_ASSERT(has(out, cases[i].killing));
        CU_ASSERT(has(out, cases[i].stopped));
        CU_ASSERT(elapsed < 3);
        free(out);
    }
}

static void test_cannot_exec(void)
{
    char *out;
    double elapsed;
    int rc = launch("/nonexistent/prog", 2, "/x/prog", 5, &out, &elapsed, 0);
    CU_ASSERT(rc == 127);
    CU_ASSERT(has(out, ": cannot run /nonexistent/prog: No such file or directory"));
    CU_ASSERT(has(out, "exited with status 127"));
    free(out);
    rc = launch("/bin/true", 0, "/x/prog", 5, &out, &elapsed, 0);
    CU_ASSERT(rc == 2);
    CU_ASSERT(has(out, "internal error: 0 ranks to launch"));
    free(out);
}

/* How often NEEDLE occurs in TEXT (NULL: none). */
static int times_in(const char *text, const char *needle)
{
    int count = 0;
    for (const char *p = text; p && (p = strstr(p, needle)) != NULL; p++)
        count++;
    return count;
}

/* ddp_launch_local runs /proc/self/exe: this runner, asked for its quickest
 * suite (exact_sum: no files, no processes), runs it twice and exits 0. */
static void test_self(void)
{
    /* Under valgrind, /proc/self/exe is valgrind's tool, which refuses to
     * run by itself; valgrind shows in its preloaded library. */
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload"))
        return;
    int fd;
    pid_t pid = test_fork_capturing(&fd);
    if (pid == 0) {
        char *argv[] = {"unit_tests", "--nproc-per-node", "2", "suite_exact_sum", NULL};
        _exit(ddp_launch_local(2, 4, argv, 5));
    }
    char *buf = NULL;
    CU_ASSERT_EQUAL(test_child_output(pid, fd, &buf), 0);
    /* Two runners, each of which ran that suite and nothing else. */
    int runs = times_in(buf, "Suite: exact_sum"), suites = times_in(buf, "Suite: "),
        clean = times_in(buf, " passed, 0 failed");
    CU_ASSERT(runs == 2 && suites == 2 && clean == 2);
    if (runs != 2 || suites != 2 || clean != 2)
        fprintf(stderr, "\nthe ranks said:\n%s\n", buf ? buf : "");
    free(buf);
}

static void test_cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    CU_ASSERT(tmpdir[0] && test_run(cmd, NULL) == 0);
}

void suite_launcher(void)
{
    static const TestCase cases[] = {
        {"all ranks exit 0: 0; each rank's environment and command line", test_all_succeed},
        {"rank 0 of several inherits the socket listening on MASTER_PORT; no other process does", test_port_held},
        {"one rank exits 3: the others stopped, status 3, rank named", test_one_fails},
        {"one rank killed by SIGKILL: named, status 1", test_one_killed},
        {"ranks ignoring SIGTERM are killed after the grace period", test_grace_period},
        {"SIGTERM to the launcher asks every rank to stop (SIGUSR1); ranks exiting 75 make its status",
         test_sigterm_forwarded},
        {"SIGINT to the launcher: ranks that die of its SIGUSR1 are a failure, said", test_ranks_without_stop_handler},
        {"a second signal to the launcher kills at once, even right behind the first", test_second_signal},
        {"a program that cannot run; --nproc-per-node 0", test_cannot_exec},
        {"ddp_launch_local runs /proc/self/exe", test_self},
        {"cleanup", test_cleanup},
        {NULL, NULL},
    };
    test_add_suite("launcher [shell scripts]", cases);
}
