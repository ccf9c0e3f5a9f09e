/*
 * checkpoint.h: --save, --save-every and --resume (SPEC.md, "The generated
 * program").
 *
 * A checkpoint is a safetensors file, DIR/checkpoint-NET-STEP.safetensors
 * (NET the net's name, so nets may share a directory: each lists, prunes and
 * resumes only its own; files named as earlier versions named them,
 * checkpoint-STEP.safetensors, or with '-' and '.' in NET made '_', are
 * still resumed from, when they hold this net, but never pruned): the
 * weights under their PyTorch names (so any safetensors reader can take the
 * weights out of one), the optimizer state under PyTorch's names for it
 * (optim.conv1.weight.momentum_buffer, .exp_avg, .exp_avg_sq), and in the
 * metadata where training stood and what it ran with, the net's name and
 * hash, and CRC-32 checksums over all of it (the name and hash, and the
 * loss sums, each under one of their own).
 *
 * Nothing else is needed to continue bit for bit: the sampler's order is a
 * function of (seed, epoch), dropout masks of (seed, epoch, sample), and the
 * step count fixes the epoch, the place in it and the learning rate. So a
 * resumed run takes exactly the steps the uninterrupted one would have, as
 * long as it runs with the same seed, global batch, shuffling,
 * --no-sync-every, precision, the program's layout and a training set of
 * as many samples, which loading checks.
 *
 * Writing is crash-safe: the file is written to a temporary name, fsynced and
 * renamed (safetensors.h), so a kill at any moment leaves the previous
 * checkpoints intact; --resume skips whatever does not check out (a torn
 * temporary file is never even considered) and takes the newest that does.
 *
 * A checkpoint is never worse than those it pushes out: weights or optimizer
 * state holding a NaN or an infinity are not written (a diverged run keeps
 * its good checkpoints) and not loaded (one written by an earlier version is
 * skipped like a damaged one).
 */
#ifndef DDPRT_CHECKPOINT_H
#define DDPRT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"   // DdpNet
#include "status.h"  // DdpStatus

/* Training loss summed over samples, and the samples: what a report's
 * loss is the ratio of. */
typedef struct {
    double sum, samples;
} DdpLossSum;

/* A report that a stop left out at a checkpoint's step (DdpCheckpointRun). */
typedef enum {
    DDP_LEFT_OUT_NONE,
    DDP_LEFT_OUT_EPOCH,  /* the report of the epoch STEP ends */
    DDP_LEFT_OUT_EVAL,   /* an --eval-every report at STEP, inside its epoch */
} DdpLeftOut;

/* Where training stood and the settings a bit-for-bit continuation needs. */
typedef struct {
    int64_t step;           /* optimizer steps taken */
    int64_t epoch;          /* the epoch the next step belongs to (0-based), for people: the step says it */
    uint64_t seed;          /* all the random state there is (see the top) */
    int64_t batch;          /* per rank */
    int64_t world;
    int64_t no_sync_every;
    int shuffle;
    DdpPrecision precision; /* of the products (precision.h); fp32 in a file that does not say */
    int channels_last;      /* the program's layout (DdpNet.channels_last); NCHW in a file that does not say */
    int64_t train_samples;  /* the training set's size, of whose epochs STEP is a place; 0 where a file does not say */
    /* The training loss of the epoch STEP is inside of, up to STEP, and of
     * it since the epoch's last --eval-every report (none where STEP
     * reports): a resumed run's reports then cover what an uninterrupted
     * run's would. Zero at an epoch's end, and in a file that does not say
     * (as checkpoints written before). Metadata with a checksum of their
     * own, which versions that do not know them pass over. */
    DdpLossSum epoch_loss, span_loss;
    /* The report a stop agreed on STEP left out, which the resumed run
     * makes first, the loss it covers (the epoch's, or the span's since
     * the last --eval-every report) and the learning rate of STEP (the
     * resumed run's schedule may differ: --epochs); none in a file that
     * does not say. Metadata of its own, also with its own checksum,
     * written only where there is one (of at least one sample): a version
     * that does not know it resumes the file as if the report had been made. */
    DdpLeftOut left_out;
    DdpLossSum left_out_loss;
    double left_out_lr;
} DdpCheckpointRun;

/* Host copies of everything a checkpoint holds, laid out as on the device. */
typedef struct {
    float *params;          /* n_param_floats */
    float *buffers;         /* n_buffer_floats */
    float *opt_state;       /* n_param_floats * opt_slots, slot by slot */
    int64_t *counts;        /* per parameter: the step count it started from (weights.h) */
    /* cuDNN's timed algorithms (conv_choices.h's text; "" or NULL: none),
     * so that a resumed run sums as the run it resumes: written as the
     * metadata "conv_choices" (in the checksum), read back into a buffer of
     * DDP_CONV_CHOICES_TEXT bytes ("" from a file without it); NULL: checked
     * on loading (an unreadable record is refused) but not copied. */
    char *conv_choices;
} DdpCheckpointState;

/* How every name a --save directory's checkpoints take begins: its
 * checkpoints, their temporary files and the lock (no other output may
 * take one, ddp_outputs_apart). */
#define DDP_CHECKPOINT_PREFIX "checkpoint-"

/* How many checkpoints a directory keeps: the one just written and the two
 * before it, so a checkpoint that turns out bad leaves good ones behind.
 * Up to as many whose headers do not check out are kept too, uncounted. */
#define DDP_CHECKPOINT_KEEP 3

/* mkdir -p DIR, checking it can take files: at start-up, so that a bad
 * --save fails before training rather than at the first checkpoint. *MADE
 * (MADE may be NULL) is 1 when this call made DIR itself (ddp_make_dirs). */
DdpStatus ddp_checkpoint_make_dir(const char *dir, int *made);

/* Takes, for the rest of the process, NET's lock in DIR (DIR/checkpoint-NET.lock,
 * flock): two runs of one net saving into one directory would prune each
 * other's checkpoints and number theirs alike. DDP_BAD_INPUT, naming the
 * lock, when another process holds it. Rank 0 takes it before it writes. */
DdpStatus ddp_checkpoint_lock(const DdpNet *net, const char *dir);

/* Writes DIR/checkpoint-NET-STEP.safetensors (creating DIR if it is
 * missing), then removes this net's ones up to STEP older than the
 * DDP_CHECKPOINT_KEEP newest whose headers check out (up to that many
 * damaged ones among them are kept uncounted), and any temporary file a
 * killed writer of it left. PATH (LEN bytes) gets the file's name.
 * DDP_FAIL, writing nothing, when STATE is not finite. On failure PATH is
 * "" where nothing was written, and keeps the name where the file is in
 * place but its directory could not be synced (nothing pruned). */
DdpStatus ddp_checkpoint_save(const DdpNet *net, const char *dir, const DdpCheckpointRun *run,
                              const DdpCheckpointState *state, char *path, size_t len);

/* Loads PATH into STATE and RUN. DDP_BAD_INPUT naming PATH when it is not a
 * whole, intact checkpoint of this net: truncated, malformed, a checksum
 * that does not match, weights that are not finite, or another net's ("a checkpoint of net 'mlp', not of
 * 'mnist'"; the same name with a different hash says the net changed). */
DdpStatus ddp_checkpoint_load(const DdpNet *net, const char *path, DdpCheckpointRun *run,
                              DdpCheckpointState *state);

/* The step of PATH, a checkpoint of NET, from its header alone, checked as
 * ddp_checkpoint_load checks it but for the weights and the checksum: for
 * comparing checkpoints before loading one, and for the pruning's count of
 * the good ones kept. */
DdpStatus ddp_checkpoint_step(const DdpNet *net, const char *path, int64_t *step);

/* The newest checkpoint of NET in DIR that loads (ddp_checkpoint_load), of a
 * step past AFTER (-1: any; those at or before it are not read): *FOUND 0
 * when DIR is missing or holds none. Each newer one that failed to load
 * is described in SKIPPED (LEN bytes, "" if none; cut short where they do
 * not fit), one line each, for the caller to print, and counted in
 * *UNUSABLE. A failed load leaves in STATE what it read before it failed:
 * when none loads, STATE is the caller's to restore. A file named as NET's
 * that is another net's (or another version's) is an error, not skipped:
 * the directory is most likely the wrong one; one named the older way that
 * is another net's is passed over quietly, as is one gone since DIR was
 * listed. One that cannot be opened (permissions, a dangling link) is an
 * error too: it may hold a good checkpoint. */
DdpStatus ddp_checkpoint_latest(const DdpNet *net, const char *dir, int64_t after, DdpCheckpointRun *run,
                                DdpCheckpointState *state, char *path, size_t len, int *found,
                                char *skipped, size_t skipped_len, int *unusable);

/* The newest file in DIR named as one of NET's checkpoints (or named the
 * older way and saying it is NET's) of a step past AFTER (-1: any), whether
 * or not it loads: *FOUND 0 when none. For refusing a --save DIR in use by
 * a run that does not --resume, or holding newer ones than it resumed. */
DdpStatus ddp_checkpoint_find(const DdpNet *net, const char *dir, int64_t after, char *path, size_t len,
                              int *found);

/* 1 when PATH is a checkpoint (of any net), for --init's message. */
int ddp_checkpoint_file_is_one(const char *path);

/* The first tensor of STATE (weights, buffers, optimizer state; its
 * checkpoint name) holding a NaN or an infinity into NAME, "" if none. */
DdpStatus ddp_checkpoint_nonfinite(const DdpNet *net, const DdpCheckpointState *state, char *name, size_t len);

/* DDP_BAD_INPUT naming the setting when NOW cannot continue SAVED bit for
 * bit: the seed, the global batch (batch x world: the world size itself may
 * change), --no-sync-every, shuffling, the precision and the layout. */
DdpStatus ddp_checkpoint_check_run(const char *path, const DdpCheckpointRun *saved, const DdpCheckpointRun *now);

#endif
