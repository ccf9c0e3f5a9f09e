/*
 * rank_signals.c: the handlers of rank_signals.h.
 *
 * The lines a handler prints are composed before any signal can come,
 * because a handler may only write() and _exit(); what the process was doing
 * is filled in from three plain stores the trainer makes (a torn read can
 * only misstate a number, never crash).
 */
#include "rank_signals.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char who[160];     /* "PROG: ", or "PROG: rank R: " with several ranks: NUL-ended */
static char launcher_note[256];
static size_t launcher_note_len;
static int speaks;        /* says that a stop was asked (ddp_signals_install's ANNOUNCE) */
static int marks;         /* ddp_signals_mark_stops */
static int sigterm_is_launchers;

static volatile sig_atomic_t activity = DDP_ACTIVITY_STARTING;
static volatile int64_t activity_epoch, activity_step;
static volatile sig_atomic_t stop_asked;   /* the first stop asked for, 0 none */
static volatile sig_atomic_t interrupts;   /* SIGINTs and SIGTERMs taken as stops asked for */
static volatile sig_atomic_t stopping;     /* ddp_signals_stopping */
static struct sigaction pipe_inherited;    /* SIGPIPE as the process started with it */
static int pipe_inherited_kept;

void ddp_signals_note_activity(DdpActivity what, int64_t epoch, int64_t step)
{
    activity_epoch = epoch;
    activity_step = step;
    activity = what;
}

int ddp_signals_stop_asked(void)
{
    return stop_asked;
}

void ddp_signals_test_stop(int64_t steps_taken)
{
    static int parsed;
    static long long stop_after = -1;
    if (!parsed) {
        parsed = 1;
        const char *s = getenv(DDP_TEST_STOP_AFTER_ENV);
        if (!s || sscanf(s, "%lld", &stop_after) != 1)
            stop_after = -1;
    }
    if (steps_taken + 1 == stop_after)
        raise(SIGUSR1);
}

/* Appends TEXT, or the decimal V, to BUF at *LEN: async-signal-safe. */
static void put_text(char *buf, size_t size, size_t *len, const char *text)
{
    while (*text && *len + 1 < size)
        buf[(*len)++] = *text++;
}

static void put_number(char *buf, size_t size, size_t *len, int64_t v)
{
    char digits[24];
    int n = 0;
    uint64_t u = v < 0 ? 0 : (uint64_t)v;
    do
        digits[n++] = (char)('0' + u % 10);
    while ((u /= 10) && n < 23);
    while (n > 0 && *len + 1 < size)
        buf[(*len)++] = digits[--n];
}

const char *ddp_signals_name(int sig)
{
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    }
    return "a signal";
}

void ddp_signals_mark_stops(void)
{
    marks = 1;
}

void ddp_signals_stopping(void)
{
    stopping = 1;
}

void ddp_signals_pipe_as_inherited(void)
{
    if (pipe_inherited_kept)
        sigaction(SIGPIPE, &pipe_inherited, NULL);
}

static void say(const char *line, size_t len)
{
    ssize_t written = write(STDERR_FILENO, line, len);
    (void)written;
}

/* Writes HEAD, then what the process was doing, and exits 1. */
static void say_doing_and_exit(const char *head, size_t head_len)
{
    static const char *const doing[] = {
        [DDP_ACTIVITY_STARTING] = "while starting",
        [DDP_ACTIVITY_TRAINING] = "while training",
        [DDP_ACTIVITY_EVALUATING] = "while evaluating",
        [DDP_ACTIVITY_CHECKPOINTING] = "while writing a checkpoint",
        [DDP_ACTIVITY_FINISHING] = "while finishing",
    };
    char line[512];
    size_t len = 0;
    for (size_t i = 0; i < head_len && len + 1 < sizeof line; i++)
        line[len++] = head[i];
    int what = activity;
    put_text(line, sizeof line, &len, " ");
    put_text(line, sizeof line, &len, what >= 0 && what <= DDP_ACTIVITY_FINISHING ? doing[what] : "");
    if (what != DDP_ACTIVITY_STARTING) {
        put_text(line, sizeof line, &len, " at epoch ");
        put_number(line, sizeof line, &len, activity_epoch + 1);
        put_text(line, sizeof line, &len, ", step ");
        put_number(line, sizeof line, &len, activity_step);
    }
    put_text(line, sizeof line, &len, "\n");
    say(line, len);
    _exit(1);
}

/* A stop asked for: noted, and said (when this process speaks); a second
 * SIGINT or SIGTERM ends the process at once. */
static void on_stop_asked(int sig)
{
    char line[320];
    size_t len = 0;
    /* SIGUSR1 only ever asks: a launcher passes each stop on as one, and a
     * terminal's Ctrl-C may reach the rank as SIGINT as well. */
    if (sig != SIGUSR1 && ++interrupts >= 2) {
        put_text(line, sizeof line, &len, who);
        put_text(line, sizeof line, &len, "error: stopped at once by a second ");
        put_text(line, sizeof line, &len, ddp_signals_name(sig));
        say_doing_and_exit(line, len);
    }
    if (stop_asked)
        return;
    stop_asked = sig;
    if (marks)
        say(DDP_SIGNALS_TAKEN_MARK, sizeof DDP_SIGNALS_TAKEN_MARK - 1);
    if (!speaks)
        return;
    put_text(line, sizeof line, &len, who);
    put_text(line, sizeof line, &len, ddp_signals_name(sig));
    put_text(line, sizeof line, &len, ": stopping after this step");
    put_text(line, sizeof line, &len, sig == SIGUSR1 ? "\n" : " (a second one stops at once)\n");
    say(line, len);
}

static void on_signal(int sig, siginfo_t *info, void *context)
{
    (void)context;
    /* The launcher is the rank's parent (mpirun, or its daemon on another
     * node; our --nproc-per-node); a SIGTERM from anyone else asks. */
    pid_t parent = getppid(); /* 0 when the parent is outside our PID namespace: unknown */
    if (sig == SIGTERM && sigterm_is_launchers && info && parent > 1 && info->si_pid == parent) {
        if (stopping)
            _exit(DDP_EXIT_STOPPED);
        say_doing_and_exit(launcher_note, launcher_note_len);
    }
    int saved_errno = errno;
    on_stop_asked(sig);
    errno = saved_errno;
}

void ddp_signals_install(const char *prog, int rank, int world, int launched, int announce)
{
    if (world <= 1)
        snprintf(who, sizeof who, "%s: ", prog);
    else
        snprintf(who, sizeof who, "%s: rank %d: ", prog, rank);
    int n = snprintf(launcher_note, sizeof launcher_note,
                 "%s: rank %d: stopping: the launcher ended this rank (another rank failed, or the job was stopped)",
                 prog, rank);
    launcher_note_len = n > 0 && (size_t)n < sizeof launcher_note ? (size_t)n : 0;
    speaks = announce;
    sigterm_is_launchers = launched;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    /* Ctrl-C, and a closed terminal or ssh session (SIGHUP, which reaches
     * our GPU launcher's ranks too, in its process group): stops asked, but
     * where ignored (a background job's SIGINT, nohup's SIGHUP) they stay so */
    static const int terminal[] = {SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof terminal / sizeof terminal[0]; i++) {
        struct sigaction old;
        if (sigaction(terminal[i], NULL, &old) == 0 && (old.sa_flags & SA_SIGINFO || old.sa_handler != SIG_IGN))
            sigaction(terminal[i], &sa, NULL);
    }
    /* A pipe whose reader has ended (`./train | head -1`) would kill the
     * run, its work unsaved, at its next line: the write fails instead,
     * and the reports stop (progress.c) while the training goes on. What
     * the process inherited is kept for ddp_signals_pipe_as_inherited. */
    if (!pipe_inherited_kept) {
        pipe_inherited_kept = sigaction(SIGPIPE, NULL, &pipe_inherited) == 0;
    }
    signal(SIGPIPE, SIG_IGN);
    /* our GPU launcher starts a rank with SIGUSR1 blocked (launcher.c), so
     * that a stop asked during its start-up waits for this handler */
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &usr1, NULL);
}
