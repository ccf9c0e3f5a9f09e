/*
 * proc_tree.h: ending a process's descendants, for the launcher of a CPU
 * build's ranks, which runs them under mpirun: a stuck mpirun (one that
 * cannot start all its ranks) is deaf to the signals that would end them,
 * and Open MPI puts each rank in a process group of its own, so no signal
 * to mpirun's group reaches them. They are found by their parents, as
 * /proc gives them, before mpirun is killed: after, they would be init's.
 */
#ifndef DDPRT_PROC_TREE_H
#define DDPRT_PROC_TREE_H

#include <sys/types.h>  // pid_t

#ifdef __cplusplus
extern "C" {
#endif

/* Sends SIGKILL to every descendant of ROOT (not ROOT itself) that /proc
 * shows now; returns how many. Stop ROOT first (SIGSTOP): a running one
 * could reap a child between the look and the kill, and its pid go to
 * another process. A descendant's own child started after the look is
 * missed. Not async-signal-safe (it reads /proc). */
int ddp_kill_descendants(pid_t root);

/* Sends SIGKILL to every process but this one whose environment, as it
 * was given at its start (/proc/PID/environ), holds ENTRY ("NAME=VALUE"),
 * and waits, up to SECONDS, until none is left alive; returns how many it
 * killed. For the processes a killed mpirun leaves: its ranks, then init's
 * (or a subreaper's), no longer its descendants, but they inherited the
 * environment the launcher gave mpirun. Not async-signal-safe. */
int ddp_kill_holders_of(const char *entry, double seconds);

#ifdef __cplusplus
}
#endif

#endif
