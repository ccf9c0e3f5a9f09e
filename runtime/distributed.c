/*
 * distributed.c: the multi-rank parts of a run (see distributed.h).
 *
 * Collectives take device memory on GPU builds (NCCL) and host memory on CPU
 * builds (MPI); host data exchanged at start-up (settings, checksums) goes
 * through a small device buffer, so one code path serves both.
 */
#include "distributed.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"     // ddp_now: how often a stop is passed on again
#include "device.h"    // ddp_device_is_gpu, ddp_device_count, copies
#include "device_rules.h"  // ddp_local_ranks_to_start
#include "fnv1a.h"     // ddp_fnv1a: the weights' digest
#include "launcher.h"  // ddp_launch_local, ddp_signal_name
#include "proc_tree.h"  // ddp_kill_descendants, ddp_kill_holders_of: a stuck or killed mpirun's ranks
#include "progress.h"  // DDP_PROGRESS_TTY_ENV
#include "rank_signals.h"  // DDP_EXIT_STOPPED

/* Ranks that flags place other than mpirun did, refused at start-up
 * (ddp_dist_ranks_to_launch), before the data loads. In any build, a world
 * of one in each of the several processes mpirun started: each would train
 * alone. In a CPU build, whose ranks talk through MPI, which only the ranks
 * mpirun started can open, any place but mpirun's (rather than where the
 * group would open); a GPU build's flagged ranks meet through the store. */
static DdpStatus check_mpi_launch(const DdpDist *d)
{
    int mpirun_world = d->topo.mpirun_world, gpu = ddp_device_is_gpu();
    if (d->topo.launch == DDP_LAUNCH_MPIRUN)
        return DDP_OK;
    if (gpu && mpirun_world > 1 && d->world == 1)
        return DDP_ERR(DDP_BAD_INPUT, "mpirun started %d processes, but this one is a world of 1 (%s), a run of its "
                       "own, training alone: leave that out (or mpirun -np 1)", mpirun_world,
                       /* under mpirun only torchrun's or our launcher's variables are read first */
                       d->topo.launch == DDP_LAUNCH_FLAGS ? "--world-size 1" : "WORLD_SIZE=1");
    if (gpu)
        return DDP_OK;
    if (mpirun_world && (d->world > 1 || mpirun_world > 1))
        return DDP_ERR(DDP_BAD_INPUT, "under mpirun, --rank, --world-size and --init-method tcp:// replace mpirun's "
                                      "own ranks, which this CPU build's MPI needs: leave them out");
    if (d->world > 1)
        return DDP_ERR(DDP_BAD_INPUT,
                       "this CPU build's %d ranks talk through MPI: start them with mpirun -np %d (or "
                       "--nproc-per-node %d), not with %s", d->world, d->world, d->world,
                       d->topo.launch == DDP_LAUNCH_SRUN ? "srun" : "torchrun or --rank/--world-size");
    return DDP_OK;
}

DdpStatus ddp_dist_topology(DdpDist *d, const DdpFlags *flags)
{
    memset(d, 0, sizeof *d);
    d->call_by_call_rank = -1; /* until ddp_dist_check_same */
    /* A backend the build lacks is refused at any world size, before any
     * rank starts: one rank would never use it, but the same command on
     * several would fail later. */
    if (flags->backend == DDP_BACKEND_NCCL && !ddp_device_is_gpu())
        return DDP_ERR(DDP_BAD_INPUT,
                       "this program was built for CPUs; NCCL needs --target cuda (use --backend mpi for CPU ranks)");
    if (flags->backend == DDP_BACKEND_MPI && ddp_device_is_gpu())
        return DDP_ERR(DDP_BAD_INPUT, "--backend mpi: this program was built for GPUs, whose ranks talk through "
                                      "NCCL; use --backend nccl (or build with --target cpu)");
    DDP_CHECK(ddp_topology_read(&d->topo, flags->rank, flags->world_size, flags->init_method));
    d->rank = d->topo.rank;
    d->world = d->topo.world_size;
    return DDP_OK;
}

DdpStatus ddp_dist_ranks_to_launch(const DdpDist *d, const DdpFlags *flags, int *nproc)
{
    *nproc = 0;
    if (d->topo.launch != DDP_LAUNCH_NONE) { /* a launcher started us: we are a rank */
        /* Our own launcher's ranks never see these flags (ddp_launch_rank_argv).
         * Any other's would ignore them, and run what was not asked: so
         * --max-restarts, which nothing would do here, and --nproc-per-node
         * unless it restates the ranks this node has (a launcher's count;
         * under --rank/--world-size, where each command is one rank, 1). */
        const char *by = ddp_topology_started_by(d->topo.launch);
        if (flags->given[DDP_FLAG_MAX_RESTARTS])
            return DDP_ERR(DDP_BAD_INPUT, "--max-restarts restarts the ranks that --nproc-per-node starts, but %s: "
                           "leave both out (torchrun has its own --max-restarts)", by);
        int node_ranks = d->topo.launch == DDP_LAUNCH_FLAGS ? 1 : d->topo.local_world_size;
        if (flags->given[DDP_FLAG_NPROC_PER_NODE] && flags->nproc_per_node != node_ranks)
            return DDP_ERR(DDP_BAD_INPUT, "--nproc-per-node %lld starts that many ranks itself, but %s, one of %d on "
                           "this node: leave it out", (long long)flags->nproc_per_node, by, node_ranks);
        /* --predict says itself that it runs on one rank (trainer.c) */
        return flags->predict ? DDP_OK : check_mpi_launch(d);
    }
    /* A Slurm batch script's own shell (topology.h): in a job of several
     * nodes, the training would use this one alone; --predict uses one
     * rank wherever it runs. */
    if (d->topo.slurm_batch_nodes > 1 && !flags->predict)
        return DDP_ERR(DDP_BAD_INPUT, "SLURM_PROCID is set but SLURM_STEP_NUM_TASKS is not: this is a Slurm batch "
                       "script's own shell, not a task srun started, and the job holds %d nodes, of which this run "
                       "would use one: start the ranks with %s", d->topo.slurm_batch_nodes,
                       ddp_device_is_gpu() ? "srun" : "mpirun (this CPU build's ranks talk through MPI)");
    char why[192];
    int n = ddp_local_ranks_to_start(ddp_device_is_gpu(), ddp_device_is_gpu() ? ddp_device_count() : 0,
                                     flags->given[DDP_FLAG_NPROC_PER_NODE] ? flags->nproc_per_node : 0,
                                     flags->predict != NULL, why, sizeof why);
    if (n < 0)
        return DDP_ERR(DDP_BAD_INPUT, "%s", why);
    *nproc = n;
    return DDP_OK;
}

/* mpirun's pid while it runs; the first stop asked of us (SIGINT, SIGTERM,
 * SIGHUP, SIGUSR1), and a second SIGINT, SIGTERM or SIGHUP, which forces;
 * one after that, which asks to kill mpirun and its ranks (a stuck mpirun:
 * kill_if_asked); whether rank 0 has said the ranks stopped
 * (relay_mpirun_stderr). */
static volatile pid_t mpirun_pid;
static volatile sig_atomic_t stop_signal, forced_signal, kill_asked, interrupts, ranks_stopped, told_stopped;
static int stop_taken; /* a rank said it took the stop (DDP_SIGNALS_TAKEN_MARK) */
static double stop_passed_on; /* when pass_stop_on_again last did */
static char prog_name[128]; /* for the handler's line */
/* What the handler says as it kills mpirun, after "PROG: SIGINT". */
#define MPIRUN_KILLED ": mpirun has not ended the ranks: killing them and it (SIGKILL)"

/* TEXT (LEN bytes) to stderr by write() alone: async-signal-safe. */
static void put_err(const char *text, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t w = write(STDERR_FILENO, text + done, len - done);
        if (w <= 0)
            return;
        done += (size_t)w;
    }
}

/* The N strings of PARTS to stderr, one line's pieces: for the handler. */
static void say_parts(const char *const *parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        put_err(parts[i], strlen(parts[i]));
}

/* mpirun runs in a process group of its own, so a terminal's Ctrl-C reaches
 * us alone, and every stop goes through here: the first is passed on as
 * SIGUSR1, which mpirun forwards to the ranks, and they stop after their
 * step (rank_signals.h); a second SIGINT, SIGTERM or SIGHUP goes on to
 * mpirun as SIGTERM, and mpirun ends the ranks at once. Once they have
 * stopped, mpirun is winding the job down, which that would cut short: the
 * first signal then only says so, and the next forces. Any after the one
 * that forced asks to kill mpirun and its ranks: it is stuck, as one that
 * cannot start all its ranks is, deaf to SIGTERM. Finding the ranks reads
 * /proc, which a handler may not: the launcher's loops do it
 * (kill_if_asked). */
static void forward_to_mpirun(int sig)
{
    int saved_errno = errno;
    if (ranks_stopped && !told_stopped && sig != SIGUSR1) {
        told_stopped = 1;
        const char *parts[] = {prog_name, DDP_SIGNALS_ALREADY_STOPPED, "\n"};
        say_parts(parts, sizeof parts / sizeof parts[0]);
        errno = saved_errno;
        return;
    }
    if (sig != SIGUSR1 && forced_signal) {
        if (mpirun_pid > 0 && !kill_asked) {
            kill_asked = 1;
            const char *parts[] = {prog_name, ": ", ddp_signals_name(sig), MPIRUN_KILLED, "\n"};
            say_parts(parts, sizeof parts / sizeof parts[0]);
        }
        errno = saved_errno;
        return;
    }
    /* a SIGINT, SIGTERM or SIGHUP after any stop asked forces, as in launcher.c */
    if (sig != SIGUSR1 && (++interrupts >= 2 || stop_signal)) {
        forced_signal = sig;
        if (mpirun_pid > 0)
            kill(mpirun_pid, SIGTERM);
    } else if (!stop_signal) {
        stop_signal = sig;
        if (mpirun_pid > 0)
            kill(mpirun_pid, SIGUSR1);
        /* write() alone: the handler may only call async-signal-safe functions */
        const char *parts[] = {prog_name, ": ", ddp_signals_name(sig), DDP_SIGNALS_LAUNCHER_ASKS,
                               sig == SIGUSR1 ? "" : DDP_SIGNALS_SECOND_FORCES, "\n"};
        say_parts(parts, sizeof parts / sizeof parts[0]);
    }
    errno = saved_errno;
}

/* mpirun's own words for a job whose rank exited non-zero: held back until
 * mpirun has ended, and dropped when that was a stop asked for (status
 * DDP_EXIT_STOPPED), which the ranks have said in their own words. */
static const char *const held_blocks[] = {"Primary job  terminated normally",
                                          "mpirun detected that one or more processes exited with non-zero"};
enum { HELD_MOST = 4096 };

/* Open MPI frames its own messages with a line of dashes. */
static int dashes_line(const char *line, size_t len)
{
    return len >= 41 && strspn(line, "-") == len - 1;
}

/* Kills mpirun's descendants, then mpirun (SIGKILL), once a signal has
 * asked it (forward_to_mpirun); the ranks first, while they are still
 * mpirun's children and so can be found. mpirun is stopped (SIGSTOP) before
 * they are looked for: it then starts no more, and reaps none of those
 * that end meanwhile, whose pids stay theirs, never another process's,
 * until they are killed. True once done. */
static int mpirun_killed; /* this launch's: launch_under_mpirun clears it */

static int kill_if_asked(void)
{
    if (kill_asked && !mpirun_killed && mpirun_pid > 0) {
        kill(mpirun_pid, SIGSTOP);
        ddp_kill_descendants(mpirun_pid);
        kill(mpirun_pid, SIGKILL);
        mpirun_killed = 1;
    }
    return mpirun_killed;
}

/* mpirun drops a SIGUSR1 that comes before its job has started (its ranks
 * then train on, and the stop asked is lost), so the stop is passed on
 * again every quarter second until a rank says it took it, and not after:
 * a rank takes only the first, but one still starting dies of another
 * (SIGUSR1's default, before its handler), and so does an mpirun ending
 * its job (a stop agreed on the last step leaves no "stopped" line). */
static void pass_stop_on_again(void)
{
    const double now = ddp_now();
    if (stop_signal && !forced_signal && !stop_taken && !ranks_stopped && mpirun_pid > 0 &&
        now - stop_passed_on >= 0.25) {
        if (stop_passed_on > 0)
            kill(mpirun_pid, SIGUSR1);
        stop_passed_on = now;
    }
}

/* Copies mpirun's stderr from FD to ours as it comes, watching for the line
 * in which mpirun says a rank died of a signal: *RANK and *SIG (else -1).
 * A block of held_blocks (from a line of dashes to the next) goes into HELD
 * instead; mpirun's "Forwarding signal 10 to job", which says our own
 * SIGUSR1, is dropped. A line longer than the buffer passes on as it is. */
static void relay_mpirun_stderr(int fd, int *rank, int *sig, char held[HELD_MOST])
{
    char buf[4096], line[16384], block[sizeof line]; /* a block holds any line that fits LINE */
    size_t used = 0, block_used = 0, held_used = 0;
    int in_block = 0, holding = 0, passing = 0;
    *rank = *sig = -1;
    held[0] = '\0';
    for (;;) {
        /* A killed mpirun says no more. The signal that asks for it
         * interrupts poll (which never restarts), or came just before it:
         * then its timeout looks again. */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (kill_if_asked())
            break;
        pass_stop_on_again();
        if (poll(&p, 1, 250) <= 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n' && used + 2 < sizeof line) {
                line[used++] = buf[i];
                continue;
            }
            if (buf[i] != '\n') { /* too long to look at: on it goes, after what came before it */
                put_err(block, block_used);
                block_used = 0;
                put_err(line, used);
                used = 0;
                line[used++] = buf[i];
                passing = 1;
                continue;
            }
            line[used++] = '\n';
            line[used] = '\0';
            size_t len = used;
            used = 0;
            if (passing) {
                put_err(line, len);
                passing = 0;
                continue;
            }
            if (strncmp(line, "mpirun: Forwarding signal", 25) == 0)
                continue;
            if (strcmp(line, DDP_SIGNALS_TAKEN_MARK) == 0) {
                stop_taken = 1;
                continue;
            }
            if (stop_signal && (strstr(line, DDP_SIGNALS_STOPPED_AFTER) || strstr(line, DDP_SIGNALS_EVAL_STOPPED)))
                ranks_stopped = 1;
            int dashes = dashes_line(line, len);
            if (!in_block && !dashes) {
                put_err(line, len);
            } else {
                /* a block: collected, then held back or passed on whole */
                if (block_used + len >= sizeof block) { /* not one of mpirun's short ones */
                    put_err(block, block_used);
                    block_used = 0;
                }
                memcpy(block + block_used, line, len);
                block_used += len;
                for (size_t h = 0; h < sizeof held_blocks / sizeof held_blocks[0]; h++)
                    holding |= strstr(line, held_blocks[h]) != NULL;
                if (dashes && in_block) {
                    if (holding && held_used + block_used < HELD_MOST) {
                        memcpy(held + held_used, block, block_used);
                        held_used += block_used;
                        held[held_used] = '\0';
                    } else {
                        put_err(block, block_used);
                    }
                    block_used = 0;
                    holding = 0;
                }
                in_block = dashes ? !in_block : in_block;
            }
            /* Open MPI: "mpirun noticed that process rank 1 with PID 123 on node vm exited on signal 9 (Killed)." */
            const char *at = strstr(line, "process rank ");
            const char *on = strstr(line, "exited on signal ");
            int r, s;
            if (at && on && *rank < 0 && sscanf(at, "process rank %d", &r) == 1 &&
                sscanf(on, "exited on signal %d", &s) == 1) {
                *rank = r;
                *sig = s;
            }
        }
    }
    /* an unfinished block or line: passed on as it is */
    put_err(block, block_used);
    put_err(line, used);
}

/* The environment variable that marks a launch's processes. */
#define LAUNCH_MARK_ENV "DDP_LAUNCH_MARK"

/* Once mpirun has ended: the processes of launch MARK still alive, which
 * only a killed mpirun leaves (its ranks, training on, holding --save's
 * lock and the store's port, which a restart needs), are killed, and
 * waited for. */
static void kill_left_behind(const char *prog, const char *mark)
{
    char entry[96];
    snprintf(entry, sizeof entry, LAUNCH_MARK_ENV "=%s", mark);
    const int killed = ddp_kill_holders_of(entry, 10.0);
    if (killed > 0)
        fprintf(stderr, "%s: mpirun left %d of its processes running: killed them\n", prog, killed);
}

/* What ended the last launch under mpirun when a rank failed ("rank 1 was
 * killed by signal SIGKILL"); "" when it ended well or by our own signal. */
static char mpirun_failure[160];

/* This program's file, for mpirun to start the ranks from, into EXE (LEN
 * bytes); 0 when it cannot be found. Replaced or removed since it started
 * (rebuilt while it ran: readlink then says "PATH (deleted)"), the program
 * as it runs is still /proc/PID/exe, which mpirun can start through a
 * link: one under the program's name, which the ranks say in their
 * messages, in a new directory LINK_DIR (DIR_LEN bytes; "" where none) for
 * the caller to remove. So a restart runs the same program as the run.
 * Says why where it fails. */
static int program_path(const char *prog, char *exe, size_t len, char *link_dir, size_t dir_len)
{
    static const char deleted[] = " (deleted)";
    link_dir[0] = '\0';
    ssize_t got = readlink("/proc/self/exe", exe, len - 1);
    if (got <= 0) {
        fprintf(stderr, "%s: error: cannot find this program's path to start its ranks\n", prog);
        return 0;
    }
    exe[got] = '\0';
    const size_t n = (size_t)got, tail = sizeof deleted - 1;
    if (n <= tail || strcmp(exe + n - tail, deleted) != 0 || access(exe, X_OK) == 0)
        return 1;
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(link_dir, dir_len, "%s/ddp-exe-XXXXXX", tmp);
    char target[64];
    snprintf(target, sizeof target, "/proc/%d/exe", (int)getpid());
    const int made = mkdtemp(link_dir) != NULL;
    if (!made || snprintf(exe, len, "%s/%s", link_dir, prog) >= (int)len || symlink(target, exe) != 0) {
        fprintf(stderr, "%s: error: this program's file was replaced or removed since it started, and a link to "
                "it as it runs cannot be made in %s: %s\n", prog, tmp, strerror(errno));
        if (made)
            rmdir(link_dir);
        link_dir[0] = '\0';
        return 0;
    }
    fprintf(stderr, "%s: note: this program's file was replaced or removed since it started: its ranks run the "
            "program as it started\n", prog);
    return 1;
}

/* Removes program_path's link and LINK_DIR, where it made them. */
static void remove_program_link(const char *exe, const char *link_dir)
{
    if (!link_dir[0])
        return;
    unlink(exe);
    rmdir(link_dir);
}

/* CPU ranks talk through MPI, so they must be MPI's: run ourselves under
 * mpirun, each rank with its share of the cores for OpenMP. mpirun runs as
 * our child, so that its end is said in the words of README's exit-status
 * table whatever mpirun prints: a rank killed by a signal is "rank R was
 * killed by signal S" and status 1; a stop asked of us (forward_to_mpirun)
 * ends with the ranks' DDP_EXIT_STOPPED, a second one with "stopped by S"
 * and status 1. */
static int launch_under_mpirun(int nproc, int argc, char **argv)
{
    const char *prog = ddp_prog_name(argv[0]);
    snprintf(prog_name, sizeof prog_name, "%s", prog);
    mpirun_failure[0] = '\0';
    /* MASTER_ADDR or MASTER_PORT that would fail every rank the same way:
     * said once, here, before mpirun starts them */
    if (ddp_topology_check_master_env() != DDP_OK) {
        fprintf(stderr, "%s: error: %s\n", prog, ddp_error_message());
        return DDP_BAD_INPUT;
    }
    char np[16], exe[4096], link_dir[4096];
    snprintf(np, sizeof np, "%d", nproc);
    if (!program_path(prog, exe, sizeof exe, link_dir, sizeof link_dir))
        return DDP_FAIL;
    if (!getenv("OMP_NUM_THREADS")) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        char threads[24];
        snprintf(threads, sizeof threads, "%ld", cores / nproc > 1 ? cores / nproc : 1);
        setenv("OMP_NUM_THREADS", threads, 1);
    }
    /* A store for the ranks' whereabouts (whereabouts.h): on this host, on
     * a port free now (one a user set is theirs to keep). */
    int free_port = !getenv("MASTER_ADDR") && !getenv("MASTER_PORT") ? ddp_launch_free_port() : -1;
    if (free_port > 0) {
        char port[16];
        snprintf(port, sizeof port, "%d", free_port);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", port, 1);
    }
    /* A mark of this launch in the environment of mpirun and of all it
     * starts: a killed mpirun's ranks are no longer its descendants, but
     * they still hold it (kill_left_behind). */
    static int launches;
    char launch_mark[64];
    snprintf(launch_mark, sizeof launch_mark, "%d.%d", (int)getpid(), ++launches);
    setenv(LAUNCH_MARK_ENV, launch_mark, 1);
    /* mpirun gives its ranks a pseudo-terminal whatever our output is: say
     * what it really is, so that a pipe gets plain lines (progress.h) */
    setenv(DDP_PROGRESS_TTY_ENV, isatty(STDOUT_FILENO) ? "1" : "0", 1);
    char **args = calloc((size_t)argc + 12, sizeof *args);
    int pipe_fd[2];
    if (!args || pipe(pipe_fd) != 0) {
        fprintf(stderr, "%s: error: cannot start mpirun: %s\n", prog, strerror(errno));
        free(args);
        remove_program_link(exe, link_dir);
        return DDP_FAIL;
    }
    int k = 0;
    args[k++] = "mpirun";
    args[k++] = "-np";
    args[k++] = np;
    args[k++] = "--oversubscribe";
    args[k++] = "--bind-to";
    args[k++] = "none";
    if (geteuid() == 0)
        args[k++] = "--allow-run-as-root";
    /* the ranks' command line: ours less the launcher's flags, from this program's path */
    ddp_launch_rank_argv(argc, argv, args + k);
    args[k] = exe;

    static const int stops[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1};
    enum { NSTOPS = sizeof stops / sizeof stops[0] };
    struct sigaction sa, old[NSTOPS];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward_to_mpirun;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    /* Blocked until mpirun_pid is set, so that a signal arriving around the
     * fork is forwarded rather than only noted; the child unblocks them. */
    sigset_t blocked, old_mask;
    sigemptyset(&blocked);
    for (int i = 0; i < NSTOPS; i++)
        sigaddset(&blocked, stops[i]);
    sigprocmask(SIG_BLOCK, &blocked, &old_mask);
    stop_signal = forced_signal = kill_asked = interrupts = ranks_stopped = told_stopped = 0;
    mpirun_killed = 0;
    stop_taken = 0;
    stop_passed_on = 0;
    for (int i = 0; i < NSTOPS; i++)
        sigaction(stops[i], &sa, &old[i]);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < NSTOPS; i++)
            sigaction(stops[i], &old[i], NULL);
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        /* Its own process group: a terminal's Ctrl-C is ours to pass on. So
         * it must not read the terminal (a background group that does is
         * stopped), and it goes when we go, even by SIGKILL. */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1);
        int null_fd = open("/dev/null", O_RDONLY);
        if (null_fd >= 0) {
            dup2(null_fd, STDIN_FILENO);
            close(null_fd);
        }
        close(pipe_fd[0]);
        dup2(pipe_fd[1], STDERR_FILENO);
        close(pipe_fd[1]);
        execvp("mpirun", args);
        fprintf(stderr, "%s: error: --nproc-per-node on a CPU build runs its ranks under mpirun, which was not "
                        "found; install OpenMPI or start them with mpirun yourself\n", prog);
        _exit(DDP_BAD_INPUT);
    }
    close(pipe_fd[1]);
    free(args);
    if (pid < 0) {
        int err = errno;
        close(pipe_fd[0]);
        for (int i = 0; i < NSTOPS; i++)
            sigaction(stops[i], &old[i], NULL);
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        fprintf(stderr, "%s: error: cannot start mpirun: %s\n", prog, strerror(err));
        remove_program_link(exe, link_dir);
        return DDP_FAIL;
    }
    mpirun_pid = pid;
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    int rank, sig;
    static char held[HELD_MOST];
    relay_mpirun_stderr(pipe_fd[0], &rank, &sig, held);
    close(pipe_fd[0]);
    /* mpirun may close its stderr and still not end: waited for without
     * being reaped, so that a kill asked meanwhile still finds its ranks,
     * then reaped with the stop signals held, so that none is sent to its
     * pid once that is free for another process */
    siginfo_t ended;
    for (;;) {
        ended.si_pid = 0;
        int got = waitid(P_PID, (id_t)pid, &ended, WEXITED | WNOHANG | WNOWAIT);
        if ((got == 0 && ended.si_pid == pid) || (got < 0 && errno != EINTR))
            break;
        kill_if_asked();
        (void)poll(NULL, 0, 100);
    }
    int ws = 0;
    sigprocmask(SIG_BLOCK, &blocked, NULL);
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    mpirun_pid = 0;
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    kill_left_behind(prog, launch_mark);
    remove_program_link(exe, link_dir);
    for (int i = 0; i < NSTOPS; i++)
        sigaction(stops[i], &old[i], NULL);

    char name[32];
    int status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    if (status == DDP_EXIT_STOPPED)
        return status; /* the ranks stopped on request; rank 0 said after which step */
    /* one no rank took: mpirun's own start, before its handler */
    const int usr1_ended_mpirun = WIFSIGNALED(ws) && WTERMSIG(ws) == SIGUSR1 && !stop_taken && !ranks_stopped;
    if (stop_signal && !forced_signal && ((rank >= 0 && sig == SIGUSR1) || usr1_ended_mpirun)) {
        /* mpirun passed the stop on to a rank still starting, before its
         * handler was in (rank_signals.h), and SIGUSR1's default ended it;
         * or the stop reached mpirun itself before its own handler was in:
         * no step was cut short, and the newest checkpoint stands */
        fprintf(stderr, "%s: the stop came while the ranks were starting: stopped before they took a step\n", prog);
        return DDP_EXIT_STOPPED;
    }
    fputs(held, stderr);
    if (forced_signal && status != 0) { /* mpirun ending well after all is not a stop */
        fprintf(stderr, "%s: error: stopped by %s\n", prog, ddp_signal_name(stop_signal, name, sizeof name));
        return DDP_FAIL;
    }
    if (rank >= 0)
        snprintf(mpirun_failure, sizeof mpirun_failure, "rank %d was killed by signal %s", rank,
                 ddp_signal_name(sig, name, sizeof name));
    else if (!WIFEXITED(ws)) /* mpirun itself died of a signal */
        snprintf(mpirun_failure, sizeof mpirun_failure, "mpirun was killed by signal %s",
                 ddp_signal_name(WTERMSIG(ws), name, sizeof name));
    else if (status > 128) /* a rank it did not name died of a signal, or it could not start them */
        snprintf(mpirun_failure, sizeof mpirun_failure, "mpirun ended with status %d: a rank was killed by signal %s, "
                 "or the ranks could not be started (mpirun says which, above)", status,
                 ddp_signal_name(status - 128, name, sizeof name));
    else if (status != 0) /* the rank said why itself */
        snprintf(mpirun_failure, sizeof mpirun_failure, "a rank exited with status %d", status);
    if (mpirun_failure[0] && (rank >= 0 || status > 128)) {
        fprintf(stderr, "%s: error: %s\n", prog, mpirun_failure);
        status = DDP_FAIL;
    }
    if (stop_signal) /* a stop asked for is not a failure to restart, whatever came of it */
        mpirun_failure[0] = '\0';
    return status;
}

/* ARGV for a restart: ARGV with --resume (bare: the newest checkpoint in
 * --save DIR) where it has none; the flags refuse --resume PATH with
 * --max-restarts. NULL when out of memory. */
static char **restart_argv(int argc, char **argv, int *restart_argc)
{
    char **again = calloc((size_t)argc + 2, sizeof *again);
    if (!again)
        return NULL;
    int has = 0;
    for (int i = 0; i < argc; i++) {
        has |= i > 0 && strcmp(argv[i], "--resume") == 0;
        again[i] = argv[i];
    }
    *restart_argc = argc;
    if (!has)
        again[(*restart_argc)++] = "--resume";
    return again;
}

int ddp_dist_launch(int nproc, int argc, char **argv, const DdpFlags *flags)
{
    const char *prog = ddp_prog_name(argv[0]);
    char **again = NULL, **typed = argv;
    int typed_argc = argc;
    /* only a restart of ours tells the ranks they are one */
    unsetenv(DDP_RESTART_ENV);
    unsetenv(DDP_RESTART_CAUSE_ENV);
    setenv(DDP_LAUNCHER_ENV, "1", 1);
    for (int restart = 0;; restart++) {
        int status = ddp_device_is_gpu() ? ddp_launch_local(nproc, argc, argv, flags->timeout)
                                         : launch_under_mpirun(nproc, argc, argv);
        const char *cause = ddp_device_is_gpu() ? ddp_launch_failure() : mpirun_failure;
        if (status == DDP_EXIT_STOPPED && flags->save && !flags->eval_only) { /* an evaluation starts again */
            char command[4096];
            ddp_flags_resume_command(typed_argc, typed, command, sizeof command);
            fprintf(stderr, "%s: to resume: %s\n", prog, command);
        }
        /* Not restarted: success; bad input, which would be refused again;
         * a stop the user asked for (no rank failed); restarts used up. */
        if (status == 0 || status == DDP_BAD_INPUT || status == DDP_EXIT_STOPPED || !cause[0] ||
            restart >= flags->max_restarts) {
            if (status != 0 && status != DDP_BAD_INPUT && cause[0] && restart > 0 && restart >= flags->max_restarts)
                fprintf(stderr, "%s: error: %s after %d restart%s: giving up (--max-restarts %lld)\n", prog, cause,
                        restart, restart == 1 ? "" : "s", (long long)flags->max_restarts);
            free(again);
            return status;
        }
        if (!again && !(again = restart_argv(argc, argv, &argc))) {
            fprintf(stderr, "%s: error: cannot restart the ranks: out of memory\n", prog);
            return DDP_FAIL;
        }
        argv = again;
        /* The restarted ranks' rank 0 logs the restart and its cause. */
        char count[24];
        snprintf(count, sizeof count, "%d", restart + 1);
        setenv(DDP_RESTART_ENV, count, 1);
        setenv(DDP_RESTART_CAUSE_ENV, cause, 1);
        fprintf(stderr, "%s: restarting all %d ranks from the newest checkpoint in %s (restart %d of %lld): %s\n",
                prog, nproc, flags->save, restart + 1, (long long)flags->max_restarts, cause);
    }
}

/* Gathers BYTES of host data from every rank into ALL (world x BYTES). */
static DdpStatus gather_host(DdpDist *d, const void *mine, void *all, size_t bytes, DdpPgPurpose purpose)
{
    void *dev = NULL;
    size_t total = bytes * (size_t)d->world;
    DdpStatus st = ddp_device_alloc(&dev, total);
    if (st == DDP_OK)
        st = ddp_copy_to_device((char *)dev + bytes * (size_t)d->rank, mine, bytes, d->stream);
    if (st == DDP_OK)
        ddp_pg_purpose(d->pg, purpose);
    if (st == DDP_OK && (st = ddp_pg_allgather(d->pg, (char *)dev + bytes * (size_t)d->rank, dev, bytes,
                                                DDP_U8)) != DDP_OK)
        return st; /* DEV stays: the abandoned collective may still write into it */
    if (st == DDP_OK)
        st = ddp_copy_to_host(all, dev, total, d->stream);
    ddp_device_free(dev);
    return st;
}

/* The note of a run whose hangs will not be named, with the last error's why. */
static void note_hangs_unnamed(const DdpDist *d)
{
    fprintf(stderr, "%s: rank %d: note: a hang will not name the rank at fault: %s\n", program_invocation_short_name,
            d->rank, ddp_error_message());
}

/* Under mpirun, where MPI needs no store, the whereabouts get one where
 * every rank was given MASTER_ADDR and MASTER_PORT (MASTER_ADDR may be set
 * for other reasons; the user's mpirun passes them on with -x). Rank 0
 * serves first, and the ranks gather their ports and whether rank 0 serves
 * before any connects, so that all decide alike: a rank waiting on a store
 * that is not rank 0's (another program on the port) would keep rank 0
 * waiting in its next collective, past a short --timeout. (Addresses are
 * not compared, a name and a number being one host: a rank whose
 * MASTER_ADDR leads to another program still waits its open out.) One
 * small all-gather at start-up, on every run under mpirun. A store not had
 * costs a note on the ranks given an address, or half of one (saying which
 * half is missing), not the run; a failed collective fails it. */
static DdpStatus open_store_under_mpirun(DdpDist *d, double timeout_s)
{
    const double most_s = 30; /* only the whereabouts need it */
    int given = d->topo.master_addr[0] && d->topo.master_port;
    DdpStoreServer *server = NULL;
    char why[DDP_ERROR_MESSAGE_LEN] = "";
    int64_t mine[2] = {given ? d->topo.master_port : 0, 0}; /* the port given; rank 0: serving */
    if (d->rank == 0 && given) {
        mine[1] = ddp_store_serve(&server, &d->topo) == DDP_OK;
        if (!mine[1])
            snprintf(why, sizeof why, "%s", ddp_error_message());
    }
    int64_t *all = calloc((size_t)d->world, sizeof mine);
    DdpStatus st = all ? gather_host(d, mine, all, sizeof mine, DDP_PG_FOR_STORE)
                       : DDP_ERR(DDP_FAIL, "out of memory");
    int ranks_given = 0, same_port = 1;
    for (int r = 0; st == DDP_OK && r < d->world; r++) {
        ranks_given += all[2 * r] != 0;
        same_port &= all[2 * r] == all[0];
    }
    DdpStatus opened = DDP_OK;
    if (st != DDP_OK)
        opened = st;
    else if (ranks_given == 0)
        opened = DDP_OK; /* nobody asked for one */
    else if (ranks_given < d->world)
        opened = DDP_ERR(DDP_FAIL, "%d of %d ranks were given MASTER_ADDR and MASTER_PORT (mpirun -x passes them "
                         "to every rank)", ranks_given, d->world);
    else if (!same_port)
        opened = DDP_ERR(DDP_FAIL, "the ranks were given different MASTER_PORTs");
    else if (!all[1])
        opened = d->rank == 0 ? DDP_ERR(DDP_FAIL, "%s", why)
                              : DDP_ERR(DDP_FAIL, "rank 0 cannot serve the store on port %d (it says why)",
                                        d->topo.master_port);
    else {
        opened = ddp_store_open_served(&d->store, &d->topo, timeout_s < most_s ? timeout_s : most_s, server);
        server = NULL; /* the store's now, opened or not */
    }
    ddp_store_server_stop(server, 0);
    free(all);
    if (st != DDP_OK)
        return st;
    if (opened != DDP_OK && given)
        note_hangs_unnamed(d);
    else if (!given && ddp_topology_check_master_env() != DDP_OK) /* half of the address: what it lacks */
        note_hangs_unnamed(d);
    return DDP_OK;
}

/* The ranks' whereabouts, through the run's store: NCCL's, or mpirun's
 * (open_store_under_mpirun). They only make a hang's message better, so a
 * whereabouts that cannot start costs a note, not the run. */
static void open_whereabouts(DdpDist *d)
{
    if (ddp_whereabouts_open(&d->whereabouts, &d->topo) != DDP_OK) {
        note_hangs_unnamed(d);
        return;
    }
    ddp_pg_set_whereabouts(d->whereabouts);
}

DdpStatus ddp_dist_join(DdpDist *d, const DdpFlags *flags, void *stream)
{
    d->stream = stream;
    int gpu = ddp_device_is_gpu();
    /* One rank needs no group, unless a GPU build was asked for NCCL by name:
     * then a communicator of one, which tests the NCCL path on one GPU. */
    if (d->world <= 1 && !(gpu && flags->backend == DDP_BACKEND_NCCL))
        return DDP_OK;
    /* --backend can only confirm the build's own (ddp_dist_topology refused the other) */
    DdpPgBackend backend = gpu ? DDP_PG_NCCL : DDP_PG_MPI;
    if (backend == DDP_PG_NCCL && d->world > 1 && d->topo.launch != DDP_LAUNCH_MPIRUN)
        DDP_CHECK(ddp_store_open(&d->store, &d->topo, flags->timeout));
    DDP_CHECK(ddp_pg_create(&d->pg, backend, &d->topo, d->store, stream, flags->timeout));
    if (d->world > 1 && d->topo.launch == DDP_LAUNCH_MPIRUN)
        DDP_CHECK(open_store_under_mpirun(d, flags->timeout));
    if (d->store)
        open_whereabouts(d);
    return DDP_OK;
}

DdpStatus ddp_dist_gather_times(DdpDist *d, const DdpRankTimes *mine, DdpRankTimes *all)
{
    if (d->world <= 1) {
        all[0] = *mine;
        return DDP_OK;
    }
    return gather_host(d, mine, all, sizeof *mine, DDP_PG_FOR_TIMES);
}

/* What must agree across ranks for them to take the same steps and make the
 * same collectives: the net, the world, every flag flags.h classes as one
 * that must agree (as text: the value, or whether it was given), and the
 * data's sizes and digests. Values are compared as text, which is also what
 * the message quotes. */
enum { VALUE_LEN = 48 };
typedef struct {
    char hash[32];
    char flag[DDP_FLAG_COUNT][VALUE_LEN];
    int64_t world, train_n, test_n;
    uint64_t train_digest, test_digest;
    uint64_t data_table;         /* ddp_augment_digest of the program's data { } block */
    char kernels[2 * VALUE_LEN]; /* ddp_ops_describe_kernels: may differ (ddp_dist_not_bit_invariant) */
    int cuda_graphs;             /* may differ: then no rank uses them (call_by_call_rank) */
} Settings;

/* The first difference between rank R's settings B and rank 0's A, as
 * DDP_BAD_INPUT; DDP_OK if none. */
static DdpStatus compare_settings(int r, const Settings *a, const Settings *b)
{
    if (strcmp(a->hash, b->hash) != 0)
        return DDP_ERR(DDP_BAD_INPUT, "rank %d runs another net than rank 0 (net hash %s, rank 0's %s): "
                                      "every rank must run the same program", r, b->hash, a->hash);
    if (a->data_table != b->data_table)
        return DDP_ERR(DDP_BAD_INPUT, "rank %d's program has another data { } table than rank 0's (normalize, crop "
                                      "or flips): every rank must run the same program", r);
    if (a->world != b->world)
        return DDP_ERR(DDP_BAD_INPUT, "rank %d counts %lld ranks where rank 0 counts %lld: give every rank the same "
                                      "world size", r, (long long)b->world, (long long)a->world);
    for (int i = 0; i < DDP_FLAG_COUNT; i++) {
        DdpAgree agree = ddp_flags_agreement((DdpFlagId)i);
        if (agree == DDP_AGREE_LOCAL || strcmp(a->flag[i], b->flag[i]) == 0)
            continue;
        const char *name = ddp_flags_name((DdpFlagId)i);
        if (agree == DDP_AGREE_GIVEN)
            return DDP_ERR(DDP_BAD_INPUT, "--%s is %s on rank %d but %s on rank 0: give it to every rank or to none "
                                          "(rank 0 acts on it, and the others take part)",
                           name, b->flag[i], r, a->flag[i]);
        return DDP_ERR(DDP_BAD_INPUT, "rank %d has --%s %s where rank 0 has %s: every rank needs the same --%s",
                       r, name, b->flag[i], a->flag[i], name);
    }
    if (a->train_n != b->train_n || a->train_digest != b->train_digest || a->test_n != b->test_n ||
        a->test_digest != b->test_digest) {
        int train = a->train_n != b->train_n || a->train_digest != b->train_digest;
        return DDP_ERR(DDP_BAD_INPUT, "rank %d's %s data differs from rank 0's (%lld samples, digest %016llx; rank 0: "
                                      "%lld samples, digest %016llx): give every rank the same --data",
                       r, train ? "training" : "test", (long long)(train ? b->train_n : b->test_n),
                       (unsigned long long)(train ? b->train_digest : b->test_digest),
                       (long long)(train ? a->train_n : a->test_n),
                       (unsigned long long)(train ? a->train_digest : a->test_digest));
    }
    return DDP_OK;
}

/* D's line when rank R's convs run other kernels than rank 0's (A, B:
 * ddp_ops_describe_kernels). */
static void note_kernels(DdpDist *d, int r, const char *a, const char *b)
{
    if (d->not_invariant[0] || strcmp(a, b) == 0)
        return;
    int len = snprintf(d->not_invariant, sizeof d->not_invariant,
                       "rank %d's convs run %s where rank 0's run %s: the ranks take the same steps, but not bit "
                       "for bit those of one rank (DDP_CPU_CONV=own on every rank keeps that)",
                       r, *b ? b : "the runtime's own kernels", *a ? a : "the runtime's own kernels");
    if (len >= (int)sizeof d->not_invariant) /* two long descriptions: the start says what matters */
        memcpy(d->not_invariant + sizeof d->not_invariant - 4, "...", 4);
}

const char *ddp_dist_not_bit_invariant(const DdpDist *d)
{
    return d->not_invariant[0] ? d->not_invariant : NULL;
}

DdpStatus ddp_dist_check_same(DdpDist *d, const DdpNet *net, const DdpFlags *flags, const DdpDataSet *train,
                              const DdpDataSet *test, const char *kernels, int cuda_graphs)
{
    d->call_by_call_rank = -1;
    for (int i = 0; i < DDP_FLAG_COUNT; i++)
        if (ddp_flags_agreement((DdpFlagId)i) == DDP_AGREE_UNSET)
            return DDP_ERR(DDP_FAIL, "internal error: --%s does not say whether ranks must agree on it (flags.c)",
                           ddp_flags_name((DdpFlagId)i));
    if (d->world <= 1)
        return DDP_OK;
    Settings *mine = calloc(1, sizeof *mine);
    Settings *all = calloc((size_t)d->world, sizeof *all);
    if (!mine || !all) {
        free(mine);
        free(all);
        return DDP_ERR(DDP_FAIL, "out of memory");
    }
    snprintf(mine->hash, sizeof mine->hash, "%s", net->hash);
    for (int i = 0; i < DDP_FLAG_COUNT; i++)
        if (ddp_flags_agreement((DdpFlagId)i) != DDP_AGREE_LOCAL)
            ddp_flags_agreed_value(flags, (DdpFlagId)i, mine->flag[i], VALUE_LEN);
    mine->world = d->world;
    mine->data_table = ddp_augment_digest(&net->data);
    mine->train_n = train->n;
    mine->test_n = test->n;
    mine->train_digest = ddp_data_digest(train);
    mine->test_digest = ddp_data_digest(test);
    snprintf(mine->kernels, sizeof mine->kernels, "%s", kernels);
    mine->cuda_graphs = cuda_graphs;
    DdpStatus st = gather_host(d, mine, all, sizeof *mine, DDP_PG_FOR_SETTINGS);
    for (int r = 1; st == DDP_OK && r < d->world; r++)
        st = compare_settings(r, &all[0], &all[r]);
    for (int r = 1; st == DDP_OK && r < d->world; r++)
        note_kernels(d, r, all[0].kernels, all[r].kernels);
    for (int r = 0; st == DDP_OK && r < d->world && d->call_by_call_rank < 0; r++)
        if (!all[r].cuda_graphs)
            d->call_by_call_rank = r;
    /* Every rank found the same difference in the same data: they all stop
     * here, so the group may be finished cleanly and each exits 2. */
    if (st == DDP_BAD_INPUT)
        d->agreed_failure = 1;
    free(mine);
    free(all);
    return st;
}

DdpStatus ddp_dist_broadcast_host(DdpDist *d, int64_t *values, int n)
{
    if (d->world <= 1)
        return DDP_OK;
    /* host memory may not reach a GPU collective: through a device buffer */
    void *dev = NULL;
    size_t bytes = (size_t)n * sizeof *values;
    DdpStatus st = ddp_device_alloc(&dev, bytes);
    if (st == DDP_OK)
        st = ddp_copy_to_device(dev, values, bytes, d->stream);
    if (st == DDP_OK)
        ddp_pg_purpose(d->pg, DDP_PG_FOR_HOST_VALUES);
    if (st == DDP_OK && (st = ddp_pg_broadcast(d->pg, dev, (size_t)n, DDP_I64, 0)) != DDP_OK)
        return st; /* DEV stays: the abandoned collective may still write into it */
    if (st == DDP_OK)
        st = ddp_copy_to_host(values, dev, bytes, d->stream);
    ddp_device_free(dev);
    return st;
}

DdpStatus ddp_dist_broadcast_text(DdpDist *d, char *text, size_t cap)
{
    if (d->world <= 1)
        return DDP_OK;
    /* its length first, so that every rank knows how many words follow */
    int64_t length = d->rank == 0 ? (int64_t)strlen(text) : 0;
    if (length >= (int64_t)cap)
        return DDP_ERR(DDP_FAIL, "internal error: a text of %lld bytes broadcast into %zu", (long long)length, cap);
    DDP_CHECK(ddp_dist_broadcast_host(d, &length, 1));
    if (length >= (int64_t)cap)
        return DDP_ERR(DDP_FAIL, "internal error: rank 0 broadcasts a text of %lld bytes into %zu", (long long)length,
                       cap);
    const int words = (int)((length + 1 + 7) / 8);
    int64_t *packed = calloc((size_t)words, sizeof *packed);
    if (!packed)
        return DDP_ERR(DDP_FAIL, "out of memory");
    if (d->rank == 0)
        memcpy(packed, text, (size_t)length + 1);
    DdpStatus st = ddp_dist_broadcast_host(d, packed, words);
    if (st == DDP_OK) {
        memcpy(text, packed, (size_t)length);
        text[length] = '\0';
    }
    free(packed);
    return st;
}

DdpStatus ddp_dist_broadcast_weights(DdpDist *d, const DdpNet *net, float *params, float *buffers,
                                     float *opt_state, int64_t *counts)
{
    if (d->world <= 1)
        return DDP_OK;
    ddp_pg_purpose(d->pg, DDP_PG_FOR_WEIGHTS);
    DDP_CHECK(ddp_pg_broadcast(d->pg, params, (size_t)net->n_param_floats, DDP_F32, 0));
    ddp_pg_purpose(d->pg, DDP_PG_FOR_WEIGHTS);
    if (net->n_buffer_floats)
        DDP_CHECK(ddp_pg_broadcast(d->pg, buffers, (size_t)net->n_buffer_floats, DDP_F32, 0));
    /* zeros at the start; a resumed run's momentum or Adam moments */
    ddp_pg_purpose(d->pg, DDP_PG_FOR_WEIGHTS);
    DDP_CHECK(ddp_pg_broadcast(d->pg, opt_state, (size_t)(net->n_param_floats * net->opt_slots), DDP_F32, 0));
    return ddp_dist_broadcast_host(d, counts, net->n_params);
}

DdpStatus ddp_dist_sum_stats(DdpDist *d, double *stats, int count, DdpPgPurpose purpose)
{
    if (d->world <= 1)
        return DDP_OK;
    ddp_pg_purpose(d->pg, purpose);
    return ddp_pg_allreduce(d->pg, stats, (size_t)count, DDP_F64, DDP_SUM);
}

DdpStatus ddp_dist_check_identical(DdpDist *d, const float *host_params, int64_t n)
{
    if (d->world <= 1)
        return DDP_OK;
    uint64_t h = ddp_fnv1a(DDP_FNV1A_START, host_params, (size_t)n * sizeof *host_params);
    uint64_t *all = calloc((size_t)d->world, sizeof *all);
    if (!all)
        return DDP_ERR(DDP_FAIL, "out of memory");
    DdpStatus st = gather_host(d, &h, all, sizeof h, DDP_PG_FOR_CHECKSUM);
    for (int r = 1; st == DDP_OK && r < d->world; r++)
        if (all[r] != all[0])
            st = DDP_ERR(DDP_FAIL, "after training rank %d holds other weights than rank 0 (checksums %016llx and "
                                   "%016llx)", r, (unsigned long long)all[r], (unsigned long long)all[0]);
    free(all);
    return st;
}

int ddp_dist_close(DdpDist *d, int failed)
{
    int running = 0;
    if (failed && !d->agreed_failure)
        running = ddp_pg_abort(d->pg);
    else
        ddp_pg_destroy(d->pg);
    d->pg = NULL;
    /* after the group (NCCL's watchdog may read them to the last), before
     * the store (rank 0's serves the connection until it closes) */
    ddp_pg_set_whereabouts(NULL);
    ddp_whereabouts_close(d->whereabouts);
    d->whereabouts = NULL;
    /* A collective that never finished (MPI's still runs) failed on the
     * others too, or soon will: they then ask rank 0's store where the
     * ranks were, so it serves them as after any end. (NCCL's abort does
     * not say so; a GPU rank 0 stops serving at once.) */
    ddp_store_close_after(d->store, failed && !d->agreed_failure && !running);
    d->store = NULL;
    return running;
}
