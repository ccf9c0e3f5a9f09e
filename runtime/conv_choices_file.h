/*
 * conv_choices_file.h: cuDNN's algorithms for a net's convs kept in a file of
 * their own (--conv-algorithms FILE), as one line of conv_choices.h's text,
 * and what a run does about FILE.
 *
 * cuDNN's timings choose faster algorithms than its heuristics on some nets,
 * but two processes that each time them may choose otherwise and sum in
 * another order. A file lets the timing happen once: the training run that
 * finds no FILE times them and writes what it runs there, and every later
 * run given FILE takes them (trainer.c), so all of them run the same fast
 * algorithms and make the same bytes, as runs that take the heuristics' do.
 * What the record means is conv_choices.h's; the decisions are here, apart
 * from the trainer, so that the CPU tests cover them (device_rules' habit).
 */
#ifndef DDPRT_CONV_CHOICES_FILE_H
#define DDPRT_CONV_CHOICES_FILE_H

#include <stddef.h>

#include "status.h"  // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the record in PATH into TEXT (LEN > 1 bytes: a record of up to LEN -
 * 1 characters, as ddp_ops_conv_choices gives them). *FOUND is 0 where there
 * is none yet, PATH naming nothing or an empty file: TEXT is then "" and
 * PATH must be writable (ddp_output_check), so that a mistyped directory
 * fails at start-up rather than after the timing. Otherwise PATH (links
 * followed) must be a regular file holding one record as
 * ddp_conv_choices_parse reads it, a newline after it allowed. DDP_BAD_INPUT
 * else, the message starting "--FLAG PATH: ". */
DdpStatus ddp_conv_choices_read_file(const char *flag, const char *path, char *text, size_t len, int *found);

/* Writes TEXT and a newline to PATH, by a temporary file renamed over it
 * (dirs.h), so a reader finds the old record or the new, never half of one. */
DdpStatus ddp_conv_choices_write_file(const char *flag, const char *path, const char *text);

/* Whether a run given FILE times cuDNN's algorithms itself: a training run's
 * rank 0 (the other ranks take rank 0's) where FILE holds no record yet. An
 * evaluation neither times nor writes: its batch is not training's, whose
 * workspace the record sizes. Asked before a resumed checkpoint is read, so
 * a resumed run times even where it then takes the checkpoint's record. */
int ddp_conv_file_times(int found, int eval_only, int rank);

/* Where rank 0 stands once the ranks agree on their algorithms. */
typedef struct {
    int gpu;        /* a GPU build (a CPU's convs have no cuDNN algorithms) */
    int found;      /* FILE held a record at start-up */
    int eval_only;  /* --eval-only */
    int offered;    /* FILE's record was offered to the ops: no resumed checkpoint's record ran first */
    int taken;      /* ... and they took it */
    int runs_files; /* the record the run runs is FILE's, word for word */
    int record;     /* the run has a record of its algorithms (timed or taken) to write */
} DdpConvFileRun;

typedef enum {
    DDP_CONV_FILE_CPU,              /* FILE neither taken nor written */
    DDP_CONV_FILE_TAKEN,            /* FILE's algorithms run */
    DDP_CONV_FILE_NOT_TAKEN,        /* FILE's do not apply here: the run chose its own */
    DDP_CONV_FILE_CHECKPOINT_KEPT,  /* a resumed checkpoint's ran instead of FILE's */
    DDP_CONV_FILE_WRITE,            /* FILE had none: write the run's */
    DDP_CONV_FILE_NOTHING_TO_WRITE, /* FILE had none, and the run has none (no convs, or too many) */
    DDP_CONV_FILE_EVAL_ONLY,        /* FILE had none, and an evaluation writes none */
} DdpConvFileAction;

/* What rank 0 does about FILE, and says. */
DdpConvFileAction ddp_conv_file_action(const DdpConvFileRun *run);

#ifdef __cplusplus
}
#endif

#endif
