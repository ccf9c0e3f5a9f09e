/*
 * progress.h: what rank 0 tells the user while training: a progress line on a
 * terminal, one plain line per epoch (and per extra evaluation), a closing
 * summary, and the same numbers as JSON lines for --log.
 */
#ifndef DDPRT_PROGRESS_H
#define DDPRT_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#include "jsonlog.h"      // DdpJsonLog
#include "step_times.h"   // DdpRankTimes
#include "tensorboard.h"  // DdpTensorboard
#include "status.h"   // DdpStatus

/* One report: the end of an epoch, or an evaluation inside one. */
typedef struct {
    int64_t epoch, epochs;   /* the epoch in progress, 1-based, and the run's count */
    int64_t step;            /* global optimizer steps taken */
    double loss;             /* mean training loss: over the epoch in an epoch report,
                              * since the previous report in an evaluation's */
    double span_loss;        /* mean training loss since the previous report, in both:
                              * TensorBoard's `loss`, a curve of one kind */
    double lr;               /* of the last step */
    double samples_per_s;    /* training throughput over the same span, evaluation excluded */
    int untimed;             /* a report a stop left out, made by the resumed run: the steps it
                              * covers were the stopped run's, whose throughput and time are not said */
    double seconds;          /* the epoch's wall time (epoch reports only) */
    double data_wait_s;      /* of that, this rank's steps' time making or waiting for their batches */
    int evaluated;           /* test_loss and test_acc hold an evaluation */
    double test_loss, test_acc;
} DdpReport;

typedef struct {
    const char *prog;        /* names this file's one message to stderr (flush_out) */
    FILE *out;
    int quiet;               /* print nothing (the log is still written); set once OUT fails */
    int out_failed;          /* OUT failed: its errno, or -1 where none was left; 0: it has not */
    int out_is_result;       /* OUT holds the run's result (an evaluation's): its failure is the
                              * caller's to report as one, not said here as a run going on */
    int tty;                 /* OUT is a terminal: show a progress line */
    int line_shown;          /* a progress line is on screen, to be erased */
    DdpJsonLog *log;         /* --log, or NULL; not owned */
    DdpTensorboard *tb;      /* --tensorboard, or NULL; not owned */
    double best_acc;         /* best test accuracy so far, and its epoch */
    int64_t best_epoch;      /* 0: no evaluation yet */
    int straggler_said;      /* the last straggler said; -1: none */
    char lost[DDP_ERROR_MESSAGE_LEN]; /* why --log or --tensorboard first failed, the file named; "" while neither has */
} DdpProgress;

/* Overrides isatty(OUT) when set to 0 or 1: a launcher whose ranks cannot
 * see where the output really goes (mpirun hands them a pseudo-terminal)
 * says so through the environment. Without it, a rank under mpirun counts
 * as piped. */
#define DDP_PROGRESS_TTY_ENV "DDP_PROGRESS_TTY"

/* Reports on OUT (a terminal gets the progress line); records go nowhere
 * else until ddp_progress_attach. Should OUT fail (a pipe whose reader
 * ended, `| head -1`), PROG says so once on stderr, the reports stop there
 * and OUT_FAILED says why; the run and its records go on. */
void ddp_progress_init(DdpProgress *p, const char *prog, FILE *out, int quiet);
/* Sends the records to LOG and TB from now on (either may be NULL): the
 * trainer opens them once its start-up checks have passed, after notes.
 * Should one fail to take a record (a full disk), PROG says so on stderr,
 * that file gets nothing more, and the run goes on: the functions below
 * fail for none of it. */
void ddp_progress_attach(DdpProgress *p, DdpJsonLog *log, DdpTensorboard *tb);

/* At a run's end: DDP_FAIL, saying why, where --log or --tensorboard
 * failed to take a record (its file lacks the records after it); else
 * DDP_OK. */
DdpStatus ddp_progress_lost_records(const DdpProgress *p);

/* The log's first record of a run, {"event": "start", ...}: the net, the
 * data (DATA: "3x32x32 CIFAR-10", the samples and their format), the world
 * size, the batch per rank and the global batch (BATCH_PER_RANK x WORLD;
 * "global_batch_set" when the run set that one, BATCH_GLOBAL),
 * "step_graphs" (STEP_GRAPHS: whether steps replay a graph per batch shape,
 * step_graphs.h, on every rank) and "bit_invariant" (false with
 * "bit_invariant_why" when NOT_INVARIANT, ddp_device_not_bit_invariant's
 * line, is not NULL). */
DdpStatus ddp_progress_start(DdpProgress *p, const char *net, const char *data, int world, int64_t batch_per_rank,
                             int batch_global, int step_graphs, const char *not_invariant);

/* The log's record of a restart (--max-restarts): {"event": "restart",
 * "restart": RESTART (1 for the first), "cause": CAUSE}, after the start
 * record of the restarted run. */
DdpStatus ddp_progress_restart(DdpProgress *p, int64_t restart, const char *cause);

/* --eval-only's record: {"event": "eval_only", "test_loss", "test_acc",
 * "samples", "confusion": CONFUSION (JSON rows: [label][prediction])}. */
DdpStatus ddp_progress_eval_only(DdpProgress *p, double test_loss, double test_acc, int64_t samples,
                                 const char *confusion);

/* The log's record of a stop asked for: {"event": "stop", "signal":
 * SIGNAL ("SIGINT"), "step": STEP, "checkpoint": CHECKPOINT (left out when
 * NULL: none written)}. */
DdpStatus ddp_progress_stop(DdpProgress *p, const char *signal, int64_t step, const char *checkpoint);

/* The ranks' times at STEP (ROWS, one per rank of N, gathered by rank 0):
 * for each rank a log record {"event": "rank_times", "step", "rank",
 * "data_ms", "forward_ms", "backward_ms", "allreduce_ms", "optimizer_ms"
 * (per step), "samples_per_s"}, then {"event": "ranks", "step",
 * "median_busy_ms", "slowest", "straggler" (left out when none)}, and the
 * same as TensorBoard scalars "rank<R>/data_ms"...; a straggler
 * (ddp_times_straggler) is said on a line of its own when it is not the
 * one said last. Returns the straggler in *STRAGGLER (-1: none). */
DdpStatus ddp_progress_rank_times(DdpProgress *p, int64_t step, const DdpRankTimes *rows, int n, int *straggler);

/* A plain line of its own (the start-up description), unless quiet. */
void ddp_progress_note(DdpProgress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Rewrites the progress line, on a terminal only: where the epoch stands,
 * the running loss, throughput, the share of the step spent waiting for data
 * when more than DDP_PROGRESS_DATA_SHARE_SHOWN ("data 23%": the input is the
 * bottleneck), and the time the epoch still needs. */
#define DDP_PROGRESS_DATA_SHARE_SHOWN 0.10
void ddp_progress_update(DdpProgress *p, int64_t epoch, int64_t epochs, int64_t batch, int64_t batches,
                         double loss, double samples_per_s, double eta_s, double data_share);

/* The end of an epoch: "epoch 1/10  step 938  loss 0.5123  test_loss 0.4321
 * test_acc 0.8456  lr 0.00998  4321 samples/s  13.9s" and a log line
 * {"event": "epoch", ...}. DDP_FAIL if the log cannot be written. */
DdpStatus ddp_progress_epoch(DdpProgress *p, const DdpReport *r);
/* An evaluation inside an epoch (--eval-every): an indented line without the
 * epoch count, and a log line {"event": "eval", ...}. */
DdpStatus ddp_progress_eval(DdpProgress *p, const DdpReport *r);

/* The closing line: steps, best test accuracy and its epoch, wall time and
 * mean training throughput (left out where it is 0: this run trained no step). */
void ddp_progress_summary(DdpProgress *p, int64_t steps, double seconds, double samples_per_s);

/* Ends a progress line left on screen, so an error message starts a line. */
void ddp_progress_end(DdpProgress *p);

#endif
