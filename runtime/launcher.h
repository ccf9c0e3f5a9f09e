/*
 * launcher.h: --nproc-per-node N, the local launcher (the DDP tutorial's
 * mp.spawn, torchrun --standalone's job): this process becomes a parent that
 * starts N copies of the program as ranks 0..N-1 of one node, waits for them,
 * and ends them all when one fails.
 */
#ifndef DDPRT_LAUNCHER_H
#define DDPRT_LAUNCHER_H

#include <stddef.h>  // size_t

#ifdef __cplusplus
extern "C" {
#endif

/* Runs NPROC children, each /proc/self/exe with ARGV (ARGC of them) less
 * --nproc-per-node N / --nproc-per-node=N, and the environment torchrun sets
 * (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1,
 * MASTER_PORT a free loopback port) plus DDP_SPAWNED=1, so that each child's
 * ddp_topology_read says DDP_LAUNCH_SPAWN and none launches again. Of
 * several ranks, rank 0 also inherits a socket listening on MASTER_PORT,
 * for its store (DDP_STORE_LISTEN_FD_ENV, store_server.h).
 *
 * Returns the exit status for the parent's main: 0 when every child exited 0;
 * else the first failing child's status (1 if a signal killed it), after
 * printing "PROG: error: rank R exited with status S" (or "... was killed by
 * signal SIGKILL") to stderr and ending the others: SIGTERM, then SIGKILL
 * for any still running after a grace period of 10 s (or TIMEOUT_S if
 * shorter). The first SIGINT, SIGTERM, SIGHUP or SIGUSR1 sent to the parent
 * asks the children to stop after their step: they get SIGUSR1 (and share
 * the parent's process group, so a terminal's Ctrl-C reaches them directly
 * too), and children exiting DDP_EXIT_STOPPED (rank_signals.h) make the
 * parent return it; a second SIGINT, SIGTERM or SIGHUP, or any during a
 * failure's grace period, kills them at once: the parent then says "PROG:
 * error: stopped by SIGINT" and returns 1. A failure to start (no free
 * port, fork failing) is said the same way and returns 1; an NPROC out of
 * range returns 2.
 *
 * Call it from the thread that will wait (children are tied to it by
 * PR_SET_PDEATHSIG, so they die if it does), before the run loads anything it
 * would not need: every child starts from scratch. It installs handlers for
 * SIGCHLD, SIGINT, SIGTERM, SIGHUP and SIGUSR1 while it runs and restores
 * the old ones after; one launch at a time per process. */
int ddp_launch_local(int nproc, int argc, char **argv, double timeout_s);

/* The same with the program to run and the grace period given: EXE is
 * exec'd with ARGV as it is (ARGV[0] included) less --nproc-per-node, for
 * tests that point it at a script. */
int ddp_launch_exec(const char *exe, int nproc, int argc, char **argv, double grace_s);

/* OUT (room for ARGC + 1) = ARGV less the launcher's own flags,
 * --nproc-per-node N and --max-restarts N (either spelling), NULL-ended:
 * the ranks' command line. Returns its length. */
int ddp_launch_rank_argv(int argc, char **argv, char **out);

/* What ended the last launch when a rank failed ("rank 1 was killed by
 * signal SIGKILL", "rank 0 exited with status 1"); "" when every rank
 * exited 0, when a signal to the parent stopped them (even after a rank
 * failed), and when the launch itself failed (no port, no fork). */
const char *ddp_launch_failure(void);

/* A TCP port free on 127.0.0.1 now (the kernel's pick), or -1: another
 * program may take it before it is bound, and the binder then says so. For
 * mpirun's ranks, which inherit no socket from us. */
int ddp_launch_free_port(void);

/* A signal's name for messages, into BUF (LEN bytes): "SIGKILL" for SIGKILL,
 * "signal 77" for one without a name. Returns BUF. */
const char *ddp_signal_name(int sig, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
