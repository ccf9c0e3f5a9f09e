/*
 * orphans.h: the ranks a CPU build's --nproc-per-node leaves behind when
 * the mpirun it started dies before them (killed: a stuck mpirun, one that
 * could not start all its ranks, ignores the signals that would end them).
 *
 * mpirun puts each rank in a process group of its own, so no signal to
 * mpirun's group reaches them; once mpirun is gone they are nobody's child
 * but init's, and a launcher that returned would leave them running. This
 * process takes them instead (Linux's child subreaper), so that it can end
 * them and reap them.
 */
#ifndef DDPRT_ORPHANS_H
#define DDPRT_ORPHANS_H

#ifdef __cplusplus
extern "C" {
#endif

/* From now on, a descendant of this process whose parent dies becomes this
 * process's child (PR_SET_CHILD_SUBREAPER); nothing where Linux's prctl
 * lacks it. Call it before starting the launcher the ranks descend from. */
void ddp_orphans_adopt(void);

/* Kills (SIGKILL) and reaps every child this process has, and those that
 * become its children as they die, until none is left: call it once the
 * launcher it started has been reaped, when any child left is one of that
 * launcher's orphans. Returns how many were still running (not yet ended,
 * zombies aside). */
int ddp_orphans_end(void);

#ifdef __cplusplus
}
#endif

#endif
