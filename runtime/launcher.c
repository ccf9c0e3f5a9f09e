/*
 * launcher.c: --nproc-per-node N (launcher.h): start N local ranks of this
 * program, wait for them, and stop them all when one fails.
 *
 * This is what the DDP tutorial's mp.spawn and torchrun --standalone do, and
 * the children are told who they are the way torchrun tells them (RANK,
 * WORLD_SIZE, MASTER_ADDR...), so a child reads its topology exactly as under
 * torchrun and nothing downstream knows the difference; DDP_SPAWNED=1 only
 * marks them for messages and keeps them from launching again (the flag that
 * asked for the launch is also taken out of their command line).
 *
 * The parent must never leave a half-dead run behind. The first child to fail
 * is the one reported (the others failing after it are its victims), every
 * other child gets SIGTERM, then SIGKILL after a grace period. A stop asked
 * of the parent (SIGINT, SIGTERM, SIGHUP, SIGUSR1) is passed on as SIGUSR1,
 * which asks the ranks to stop after their step (rank_signals.h): a child
 * exiting DDP_EXIT_STOPPED is such a stop, not a failure; a second SIGINT,
 * SIGTERM or SIGHUP kills them at once. Children share the parent's process
 * group, so a terminal's Ctrl-C reaches them directly too, and each asks the
 * kernel (PR_SET_PDEATHSIG) to be killed if the parent dies without cleaning
 * up, so even `kill -9` of the parent leaves no orphans.
 *
 * Waiting is a self-pipe loop rather than sigwait: signal handlers write a
 * byte that poll() sees, and waitpid(WNOHANG) reaps. A program that has
 * already started threads (a BLAS library's pool, say) can receive a
 * process-directed signal on any of them; a handler catches it wherever it
 * lands, whereas a signal blocked only in this thread would go to another.
 * The poll also wakes every 100 ms to reap anyway, so no lost wake-up can
 * hang the parent.
 */
#include "launcher.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "flags.h"  // ddp_prog_name
#include "topology.h"  // DDP_MAX_RANKS
#include "rank_signals.h"  // DDP_EXIT_STOPPED
#include "clock.h"     // ddp_now, ddp_abs_time: monotonic seconds
#include "store_server.h"  // DDP_STORE_LISTEN_FD_ENV

extern char **environ;

#define GRACE_MAX_S 10.0

/* The signals that ask the parent to stop its children. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};
enum { NFORWARDED = sizeof forwarded / sizeof forwarded[0] };

/* What ended the last launch, for ddp_launch_failure. */
static char last_failure[160];

const char *ddp_launch_failure(void)
{
    return last_failure;
}

/* What the handlers leave for the loop: one launch at a time per process. */
static int wake_pipe[2] = {-1, -1};
static volatile sig_atomic_t got_signal, signals_seen, first_signal;

static void on_signal(int sig)
{
    int saved = errno;
    if (sig != SIGCHLD) {
        if (!first_signal)
            first_signal = sig;
        got_signal = sig;
        if (sig != SIGUSR1 || signals_seen == 0) /* a second SIGUSR1 only asks again */
            signals_seen++;
    }
    if (wake_pipe[1] >= 0) {
        ssize_t n = write(wake_pipe[1], "", 1); /* full pipe: a wake-up is pending anyway */
        (void)n;
    }
    errno = saved;
}

int ddp_launch_rank_argv(int argc, char **argv, char **out)
{
    static const char *const launchers[] = {"--nproc-per-node", "--max-restarts"};
    int k = 0;
    for (int i = 0; i < argc; i++) {
        int drop = 0;
        for (size_t f = 0; i > 0 && f < sizeof launchers / sizeof launchers[0] && !drop; f++) {
            size_t len = strlen(launchers[f]);
            if (strcmp(argv[i], launchers[f]) == 0)
                drop = 2; /* and its value */
            else if (strncmp(argv[i], launchers[f], len) == 0 && argv[i][len] == '=')
                drop = 1;
        }
        if (drop == 2)
            i++;
        if (!drop)
            out[k++] = argv[i];
    }
    out[k] = NULL;
    return k;
}

const char *ddp_signal_name(int sig, char *buf, size_t len)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
        snprintf(buf, len, "SIG%s", abbrev);
    else
        snprintf(buf, len, "signal %d", sig);
    return buf;
}

/* A close-on-exec socket bound to 127.0.0.1 on the kernel's pick of a free
 * port (*PORT), and listening where LISTENING; -1 if none. Its descriptor
 * is 3 or more, never a standard stream's (a launcher started with one
 * closed would otherwise hand rank 0 a socket as its stdin, say). */
static int loopback_socket(int *port, int listening)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && fd < 3) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        fd = high;
    }
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0 ||
        (listening && listen(fd, SOMAXCONN) != 0)) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* mpirun's ranks are not our children and inherit no socket from us: they
 * get a port picked and let go (see DDP_STORE_LISTEN_FD_ENV). */
int ddp_launch_free_port(void)
{
    int port = -1, fd = loopback_socket(&port, 0);
    if (fd < 0)
        return -1;
    close(fd);
    return port;
}

/* The environment less the variables the launcher sets. */
static int ours(const char *entry)
{
    static const char *const names[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                        "MASTER_PORT", "DDP_SPAWNED", "GROUP_RANK",
                                        "TORCHELASTIC_USE_AGENT_STORE", DDP_STORE_LISTEN_FD_ENV};
    size_t n = strcspn(entry, "=");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && strncmp(entry, names[i], n) == 0)
            return 1;
    return 0;
}

typedef struct {
    pid_t pid;    /* 0: not started or reaped */
    char **envp;  /* the environment it was given */
    char *vars;   /* the strings of its own variables */
    char *failed; /* "PROG: error: rank R: cannot run EXE: ", for a failed exec */
} Child;

static void free_children(Child *c, int n)
{
    for (int i = 0; c && i < n; i++) {
        free(c[i].envp);
        free(c[i].vars);
        free(c[i].failed);
    }
    free(c);
}

/* Sends SIG to every child still running. */
static void signal_all(Child *c, int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (c[i].pid > 0)
            kill(c[i].pid, sig);
}

int ddp_launch_exec(const char *exe, int nproc, int argc, char **argv, double grace_s)
{
    const char *prog = ddp_prog_name(argc > 0 ? argv[0] : NULL);
    if (nproc < 1 || nproc > DDP_MAX_RANKS) {
        fprintf(stderr, "%s: error: internal error: %d ranks to launch (--nproc-per-node admits 1 to %d)\n", prog,
                nproc, DDP_MAX_RANKS);
        return 2;
    }
    if (!(grace_s >= 0))
        grace_s = 0;
    last_failure[0] = '\0';

    /* The children's command line: ours less the launcher's flags (ddp_launch_rank_argv). */
    char **child_argv = calloc((size_t)argc + 1, sizeof *child_argv);
    /* MASTER_PORT, held by this socket until rank 0 is forked; rank 0 keeps
     * it, for its store, where there are several ranks (DDP_STORE_LISTEN_FD_ENV). */
    int port = -1, listen_fd = loopback_socket(&port, 1), hand_over = nproc > 1;
    size_t base_n = 0;
    while (environ && environ[base_n])
        base_n++;
    Child *children = calloc((size_t)nproc, sizeof *children);
    if (!child_argv || !children || listen_fd < 0) {
        fprintf(stderr, "%s: error: cannot start %d ranks: %s\n", prog, nproc,
                listen_fd < 0 ? "no free port on 127.0.0.1" : "out of memory");
        free(child_argv);
        free(children);
        if (listen_fd >= 0)
            close(listen_fd);
        return 1;
    }
    ddp_launch_rank_argv(argc, argv, child_argv);

    /* Every child's environment, built before the first fork: between fork
     * and exec a child may call only async-signal-safe functions. */
    enum { NVARS = 8, VAR_LEN = 48 };
    for (int r = 0; r < nproc; r++) {
        Child *c = &children[r];
        c->envp = calloc(base_n + NVARS + 1, sizeof *c->envp);
        c->vars = malloc(NVARS * VAR_LEN);
        if (c->vars && asprintf(&c->failed, "%s: error: rank %d: cannot run %s: ", prog, r, exe) < 0)
            c->failed = NULL;
        if (!c->envp || !c->vars || !c->failed) {
            fprintf(stderr, "%s: error: cannot start %d ranks: out of memory\n", prog, nproc);
            free_children(children, nproc);
            free(child_argv);
            close(listen_fd);
            return 1;
        }
        size_t k = 0;
        for (size_t i = 0; i < base_n; i++)
            if (!ours(environ[i]))
                c->envp[k++] = environ[i];
        /* the socket's variable last: rank 0's alone */
        const char *name[NVARS] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                   "MASTER_PORT", "DDP_SPAWNED", DDP_STORE_LISTEN_FD_ENV};
        int val[NVARS] = {r, r, nproc, nproc, -1, port, 1, listen_fd};
        for (int v = 0; v < (r == 0 && hand_over ? NVARS : NVARS - 1); v++) {
            char *s = c->vars + v * VAR_LEN;
            if (val[v] < 0)
                snprintf(s, VAR_LEN, "%s=127.0.0.1", name[v]);
            else
                snprintf(s, VAR_LEN, "%s=%d", name[v], val[v]);
            c->envp[k++] = s;
        }
        c->envp[k] = NULL;
    }

    /* Catch the signals that stop the run, and SIGCHLD, into the pipe. */
    struct sigaction old[NFORWARDED], old_chld;
    int caught[NFORWARDED] = {0};
    got_signal = signals_seen = first_signal = 0;
    if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        wake_pipe[0] = wake_pipe[1] = -1; /* the 100 ms reaping still works */
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, &old_chld);
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < NFORWARDED; i++) {
        sigaction(forwarded[i], NULL, &old[i]);
        if (old[i].sa_handler != SIG_IGN) /* nohup's choice stands */
            caught[i] = sigaction(forwarded[i], &sa, NULL) == 0;
    }

    fflush(NULL); /* or buffered output would be lost to exec, or doubled */
    pid_t parent = getpid();
    int started = 0, status = 0, first_failure = -1;
    /* Around each fork these signals wait: a child must not take one into
     * the parent's handler before it has put the old ones back. */
    sigset_t block, unblocked;
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    for (int i = 0; i < NFORWARDED; i++)
        sigaddset(&block, forwarded[i]);
    for (; started < nproc && !got_signal; started++) {
        sigprocmask(SIG_BLOCK, &block, &unblocked);
        pid_t pid = fork();
        if (pid == 0) {
            /* Die with the parent, even by SIGKILL; if it died already, go. */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(1);
            for (int i = 0; i < NFORWARDED; i++)
                if (caught[i])
                    sigaction(forwarded[i], &old[i], NULL);
            sigaction(SIGCHLD, &old_chld, NULL);
            /* The rank takes a stop (SIGUSR1) once its handler is in
             * (ddp_signals_install unblocks it): one asked while it still
             * starts waits for it, rather than killing it. The mask
             * survives exec. */
            sigset_t until_installed = unblocked;
            sigaddset(&until_installed, SIGUSR1);
            sigprocmask(SIG_SETMASK, &until_installed, NULL);
            if (started == 0 && hand_over)
                fcntl(listen_fd, F_SETFD, 0); /* kept across exec */
            execve(exe, child_argv, children[started].envp);
            const char *why = strerror(errno);
            if (write(STDERR_FILENO, children[started].failed, strlen(children[started].failed)) >= 0 &&
                write(STDERR_FILENO, why, strlen(why)) >= 0 && write(STDERR_FILENO, "\n", 1) >= 0)
                _exit(127);
            _exit(127);
        }
        int fork_errno = errno;
        sigprocmask(SIG_SETMASK, &unblocked, NULL);
        if (pid < 0) {
            errno = fork_errno;
            fprintf(stderr, "%s: error: cannot start rank %d: %s\n", prog, started, strerror(errno));
            status = 1;
            first_failure = started;
            break;
        }
        children[started].pid = pid;
        if (started == 0) {
            close(listen_fd); /* rank 0 holds it now, or needs none */
            listen_fd = -1;
        }
    }
    if (listen_fd >= 0)
        close(listen_fd); /* rank 0 never started */

    /* Wait. The first failure stops the others: SIGTERM now, SIGKILL after
     * the grace period. */
    int running = 0;
    for (int r = 0; r < nproc; r++)
        running += children[r].pid > 0;
    double kill_at = 0;
    int stopping = 0, stop_sig = SIGTERM, signals_handled = 0, forced = 0, stopped = 0, told_stopped = 0;
    if (first_failure >= 0 && running) {
        signal_all(children, nproc, SIGTERM);
        stopping = 1;
        kill_at = ddp_now() + grace_s;
    }
    while (running > 0) {
        int seen = signals_seen;
        if (seen > signals_handled) {
            /* The first signal asks the ranks to stop after their step, for
             * as long as that takes; a second (an impatient Ctrl-C), even
             * one that came with the first, kills them. During a failure's
             * grace period the first kills too. */
            int ask = signals_handled == 0 && !stopping && seen < 2;
            if (ask) {
                char name[32];
                fprintf(stderr, "%s: %s" DDP_SIGNALS_LAUNCHER_ASKS "%s\n", prog,
                        ddp_signal_name(first_signal, name, sizeof name),
                        first_signal == SIGUSR1 ? "" : DDP_SIGNALS_SECOND_FORCES);
                signal_all(children, nproc, SIGUSR1);
            }
            if (!ask && stopped && !told_stopped) { /* as distributed.c's launcher: told, not forced */
                fprintf(stderr, "%s" DDP_SIGNALS_ALREADY_STOPPED "\n", prog);
                told_stopped = 1;
            } else if (!ask) {
                stopping = 1;
                kill_at = ddp_now();
                forced = got_signal;
            }
            signals_handled = seen;
        }
        for (int r = 0; r < nproc; r++) {
            int ws;
            if (children[r].pid <= 0 || waitpid(children[r].pid, &ws, WNOHANG) != children[r].pid)
                continue;
            children[r].pid = 0;
            running--;
            if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
                continue;
            if (WIFEXITED(ws) && WEXITSTATUS(ws) == DDP_EXIT_STOPPED) {
                stopped = 1; /* a stop the ranks agreed on: the others follow */
                continue;
            }
            if (stopping)
                continue; /* a victim of the first failure, or of the parent's signal */
            char name[32];
            if (WIFEXITED(ws)) {
                snprintf(last_failure, sizeof last_failure, "rank %d exited with status %d", r, WEXITSTATUS(ws));
                status = WEXITSTATUS(ws);
            } else {
                snprintf(last_failure, sizeof last_failure, "rank %d was killed by signal %s", r,
                         ddp_signal_name(WTERMSIG(ws), name, sizeof name));
                status = 1;
            }
            fprintf(stderr, "%s: error: %s\n", prog, last_failure);
            first_failure = r;
            if (running > 0) {
                fprintf(stderr, "%s: stopping the other %d rank%s\n", prog, running, running == 1 ? "" : "s");
                signal_all(children, nproc, SIGTERM);
            }
            stopping = 1;
            kill_at = ddp_now() + grace_s;
        }
        if (running == 0)
            break;
        if (stopping && kill_at > 0 && ddp_now() >= kill_at) {
            char name[32];
            for (int r = 0; r < nproc; r++) {
                if (children[r].pid <= 0)
                    continue;
                if (forced)
                    fprintf(stderr, "%s: killing rank %d (a second %s)\n", prog, r,
                            ddp_signal_name(forced, name, sizeof name));
                else
                    fprintf(stderr, "%s: rank %d did not stop within %g s of %s; killing it\n", prog, r, grace_s,
                            ddp_signal_name(stop_sig, name, sizeof name));
            }
            signal_all(children, nproc, SIGKILL);
            kill_at = 0; /* nothing outlives SIGKILL: reap them */
        }
        int wait_ms = 100;
        if (stopping && kill_at > 0) {
            double left = (kill_at - ddp_now()) * 1000.0;
            if (left < wait_ms)
                wait_ms = left <= 0 ? 0 : (int)left + 1;
        }
        if (wake_pipe[0] >= 0) {
            struct pollfd pfd = {.fd = wake_pipe[0], .events = POLLIN};
            if (poll(&pfd, 1, wait_ms) > 0) {
                char drain[64];
                while (read(wake_pipe[0], drain, sizeof drain) > 0) {
                }
            }
        } else {
            struct timespec ts = {0, (long)wait_ms * 1000000L};
            nanosleep(&ts, NULL);
        }
    }

    if (first_signal)
        last_failure[0] = '\0'; /* a stop asked for, even after a rank failed: not restarted */
    if (forced && first_failure < 0) {
        char name[32];
        fprintf(stderr, "%s: error: stopped by %s\n", prog, ddp_signal_name(first_signal, name, sizeof name));
        status = 1;
    } else if (stopped && first_failure < 0) {
        status = DDP_EXIT_STOPPED; /* rank 0 said after which step */
    }
    for (int i = 0; i < NFORWARDED; i++)
        if (caught[i])
            sigaction(forwarded[i], &old[i], NULL);
    sigaction(SIGCHLD, &old_chld, NULL);
    if (wake_pipe[0] >= 0) {
        close(wake_pipe[0]);
        close(wake_pipe[1]);
    }
    wake_pipe[0] = wake_pipe[1] = -1;
    free_children(children, nproc);
    free(child_argv);
    return status;
}

int ddp_launch_local(int nproc, int argc, char **argv, double timeout_s)
{
    double grace = timeout_s > 0 && timeout_s < GRACE_MAX_S ? timeout_s : GRACE_MAX_S;
    return ddp_launch_exec("/proc/self/exe", nproc, argc, argv, grace);
}
