/*
 * rank_signals.h: what a training process does with the signals that stop it.
 *
 * Two kinds of stop, told apart by who sends them:
 *  - a stop asked for (Ctrl-C, Slurm's or Kubernetes' SIGTERM, Slurm's
 *    `--signal=USR1@90`, a launcher passing on the user's signal as SIGUSR1):
 *    the process notes it and goes on; the trainer asks ddp_signals_stop_asked
 *    after each step, the ranks agree through the next collective
 *    (ddp_pg_stop_vote), and all finish the same step, save and exit with
 *    DDP_EXIT_STOPPED. A second SIGINT or SIGTERM stops at once;
 *  - a launcher ending a rank because another failed (our --nproc-per-node
 *    and mpirun both send SIGTERM): at once, saying what the rank was doing.
 * So under a launcher (LAUNCHED below) a SIGTERM from the rank's parent, the
 * launcher, stops at once; one from anyone else (Slurm's time limit reaches
 * every process of the job) asks, as batch systems mean it, and so does
 * every SIGTERM alone or under torchrun, srun or tcp://. A launcher passes a
 * stop asked of it on as SIGUSR1 (mpirun forwards SIGUSR1 to its ranks).
 *
 * SIGPIPE is ignored: a closed standard output does not end a training run
 * (an evaluation takes it back as inherited: ddp_signals_pipe_as_inherited).
 *
 * The handlers only set flags, or write() a line and _exit: async-signal-safe.
 */
#ifndef DDPRT_RANK_SIGNALS_H
#define DDPRT_RANK_SIGNALS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The exit status of a run stopped on request: EX_TEMPFAIL of sysexits.h,
 * "try again later", which a job script tests to requeue itself. */
#define DDP_EXIT_STOPPED 75

/* Installs the handlers for PROG (the name messages start with), rank RANK
 * of WORLD. LAUNCHED: mpirun or this program's own launcher started the rank,
 * and its SIGTERM means "another rank failed, stop now". ANNOUNCE: this
 * process says "SIGINT: stopping after this step" when a stop is asked (rank
 * 0, unless a launcher of ours says it). A SIGINT ignored by whoever started
 * us (nohup, a script's background job) stays ignored. May be called again
 * once the rank is known: ddp_main installs them first thing, so that a stop
 * asked during start-up (SIGUSR1's default is to kill) waits for the first
 * step. */
void ddp_signals_install(const char *prog, int rank, int world, int launched, int announce);

/* A rank of a CPU build's --nproc-per-node, under mpirun: the first stop
 * it takes also writes DDP_SIGNALS_TAKEN_MARK to stderr, which the
 * launcher reads (and drops) through mpirun's: it passes a stop on to
 * mpirun until a rank has taken it (mpirun drops one that comes before its
 * job has started). Call before ddp_signals_install. */
void ddp_signals_mark_stops(void);
#define DDP_SIGNALS_TAKEN_MARK "ddp-launcher: a rank took the stop\n"

/* The signal of the stop asked of this process (SIGINT, SIGTERM, SIGUSR1),
 * 0 if none: polled by the trainer after each step; costs a load. */
int ddp_signals_stop_asked(void);

/* The ranks have agreed to stop and this one is on its way out: a
 * launcher's SIGTERM now (mpirun ends the job when the first rank exits
 * with DDP_EXIT_STOPPED) ends it quietly, with that status. */
void ddp_signals_stopping(void);

/* SIGPIPE as the process inherited it, where ddp_signals_install ignored
 * it: for a run with nothing to save (an evaluation), which a pipe whose
 * reader ended then ends as it would any filter. */
void ddp_signals_pipe_as_inherited(void);

/* "SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", else "a signal": the names of the
 * signals that stop a run, for handlers (static strings, no formatting). */
const char *ddp_signals_name(int sig);

/* What a launcher says when a stop is asked of it, after "PROG: SIGINT". */
#define DDP_SIGNALS_LAUNCHER_ASKS ": the ranks stop after their step"
#define DDP_SIGNALS_SECOND_FORCES " (a second one stops them at once)"
/* What rank 0 says once the ranks stopped as asked, after "PROG": "...:
 * stopped after step 240 (epoch 2 of 5) on SIGINT: saved FILE"; a launcher
 * that reads it knows the stop done, and a second signal then too late to
 * force anything. */
#define DDP_SIGNALS_STOPPED_AFTER ": stopped after step "
/* The same of an --eval-only run: "...: stopped the evaluation on SIGINT
 * after 4096 of the 10000 test samples: ..." */
#define DDP_SIGNALS_EVAL_STOPPED ": stopped the evaluation on "
/* What a launcher says of the first signal after that: it only tells; the
 * next one ends the ranks at once (they may be stuck on their way out). */
#define DDP_SIGNALS_ALREADY_STOPPED ": the ranks have stopped and are ending (another signal ends them at once)"

/* What the process is doing, for the line a stop at once prints: "... while
 * training at epoch 3, step 1234". Cheap enough to call every step. */
typedef enum {
    DDP_ACTIVITY_STARTING,
    DDP_ACTIVITY_TRAINING,
    DDP_ACTIVITY_EVALUATING,
    DDP_ACTIVITY_CHECKPOINTING,
    DDP_ACTIVITY_FINISHING,
} DdpActivity;
void ddp_signals_note_activity(DdpActivity what, int64_t epoch, int64_t step);

/* For tests only: a stop at a chosen step. DDP_TEST_STOP_AFTER=N has the
 * rank ask itself to stop (SIGUSR1, through its own handler) as it begins a
 * batch of the step that makes N steps, as a signal then would: one rank
 * stops after step N, several after the step their vote agrees on
 * (ddp_pg_stop_vote: one or two steps later). The trainer calls it before
 * each training batch with the steps taken (--eval-only: the batches
 * evaluated); runs without it return at once. */
#define DDP_TEST_STOP_AFTER_ENV "DDP_TEST_STOP_AFTER"
void ddp_signals_test_stop(int64_t steps_taken);

#ifdef __cplusplus
}
#endif

#endif
