/*
 * trainer.c: ddp_main, the generated program's whole life outside the numeric
 * work: flags, data, device memory, weights, the epoch loop, evaluation,
 * reports, --export.
 *
 * The loop is a PyTorch DDP script's, written once:
 *
 *     sampler = DistributedSampler(train, world_size, rank, shuffle, seed)
 *     for epoch in range(epochs):
 *         sampler.set_epoch(epoch)
 *         for x, y in DataLoader(train, batch, sampler=sampler):  # drop_last=False
 *             lr = schedule(step); loss = model(x, y); loss.backward(); opt.step()
 *         evaluate(test)
 *
 * with the generated DdpNet functions as the model (model.h), and device.h,
 * augment_device.h, graph.h and resident.h as what differs between the CPU
 * and GPU builds.
 *
 * Shaped so the device never waits for the host and the host waits for the
 * device only when it has something to say:
 *  - a training batch is made ahead by the loader's threads (loader.h), each
 *    into a pinned buffer of its own, and sent with one async copy (sample
 *    ids, labels, and the net's input or, on a GPU, the raw samples it is
 *    made of there, augment_device.h, share the buffer), so batches k+1,
 *    k+2... are made while the device trains on batch k; on a GPU the copy
 *    runs on a stream of its own during the step before (batch_upload.h);
 *    the buffer goes back to the loader once an event says its copy is
 *    done. Where the training set is held on the device (resident.h), there
 *    is no loader: one kernel gathers the batch there from the epoch's
 *    order, copied once an epoch.
 *    Evaluation batches are made by the host itself, into one of two
 *    staging buffers, each with such an event;
 *  - loss, correct count and samples accumulate on the device (ctx.stats) and
 *    are read, which synchronises, only at a report: the end of an epoch,
 *    --eval-every, and at most twice a second for a terminal's progress line.
 *    A NaN loss is therefore noticed at the next report, not at the step that
 *    made it, which is what PyTorch users get from printing loss.item() at
 *    intervals;
 *  - evaluation has its own accumulators, so it never disturbs the running
 *    training loss, and its time is left out of the throughput;
 *  - the step's device work, forward to optimizer, is queued by one launch
 *    of a CUDA graph captured once per batch shape (step_graphs.h), the
 *    step's lr, count and epoch written to device memory before it
 *    (step_scalars.h).
 *
 * Library rules hold here too: nothing exits. Every failure is a DdpStatus
 * with a message; ddp_main prints "PROG: error: MESSAGE", frees everything
 * (Trainer owns every resource, and trainer_free takes it in any state), and
 * returns the status as the exit status: 2 for bad usage or input, 1 for a
 * failure while running.
 */
#include <errno.h>
#include <fcntl.h>  // fcntl, open: hold_standard_streams
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "augment_device.h"  // DdpAugmentDevice: the net's input made on the device
#include "batch_upload.h"  // DdpBatchUpload: host batches to the device on a copy stream of their own
#include "checkpoint.h"  // ddp_checkpoint_save, _load, _latest: --save, --resume
#include "conv_choices.h"  // DDP_CONV_CHOICES_TEXT: cuDNN's timed algorithms, kept and shared
#include "conv_choices_file.h"  // --conv-algorithms: ddp_conv_choices_read_file, _write_file, ddp_conv_file_*
#include "device.h"    // ddp_device_*, ddp_host_*, ddp_copy_*, ddp_event_*
#include "device_rules.h"  // ddp_debug_mode, ddp_sync_launches (DDP_DEBUG, DDP_SYNC_LAUNCHES), ddp_gpus_left_idle
#include "dirs.h"      // ddp_outputs_apart: no two outputs, or an output and a checkpoint, share a file
#include "exact_sum.h" // ddp_exact_windows_set, ddp_exact_overflowed: the order-free sums
#include "distributed.h"  // DdpDist: topology, launch, process group, checks
#include "flags.h"     // DdpFlags, ddp_flags_*
#include "data_load.h" // ddp_data_load; dataset.h: DdpDataSet
#include "loader.h"    // DdpLoader: training batches made ahead, ddp_loader_make
#include "jsonlog.h"   // DdpJsonLog; ddp_jsonlog_check: --log checked at start-up
#include "launcher.h"  // ddp_signal_name
#include "model.h"     // DdpNet, DdpCtx
#include "numbers.h"   // ddp_seed_most: the largest seed a run of so many epochs takes
#include "progress.h"  // DdpProgress, DdpReport
#include "rank_signals.h"  // ddp_signals_*: stops asked for, and what a stop at once says
#include "reducer.h"   // DdpReducer: bucketed all-reduce overlapping backward
#include "resident.h"  // DdpResidentSet: the training set held on the device
#include "sampler.h"   // DdpSampler
#include "schedule.h"  // ddp_schedule_lr
#include "step_graphs.h"  // DdpStepGraphs: the step's work as one CUDA graph per batch shape
#include "step_times.h"  // DdpStepTimes: where each rank's time goes
#include "tensorboard.h"  // DdpTensorboard: --tensorboard
#include "trainer.h"   // ddp_main
#include "weights.h"   // ddp_weights_init, _load, _export
#include "clock.h"     // ddp_now, ddp_abs_time: monotonic seconds
#include "confusion.h" // DdpConfusion: --eval-only's per-class table
#include "top_classes.h"  // ddp_top_classes_print: --predict

enum {
    SLOTS = 2,         /* staging buffers: one being filled, one being copied */
    NSTATS = 3,        /* ctx.stats: loss sum, correct, samples */
};

/* Seconds between progress-line updates: each one reads the stats, a sync. */
static const double PROGRESS_INTERVAL = 0.5;

/* Where the current epoch stands, for reports and the progress line. */
typedef struct {
    int64_t epoch;          /* 0-based */
    double start;           /* when it began */
    double report_seconds;  /* spent in reports (evaluation), left out of throughput */
    /* the training loss read back so far (take_stats), with a resumed
     * run's of the steps before it (the checkpoint's) */
    DdpLossSum loss;
    int64_t samples;        /* trained so far */
    double span_start;      /* the end of the previous report, or the start */
    int64_t span_samples;   /* trained since then */
    DdpLossSum span_loss;   /* read since the last --eval-every report: a part of loss (an
                             * epoch-end report keeps it, for checkpoint_run) */
    double data_wait;       /* seconds the steps spent making or waiting for their batches */
} EpochState;

/* What a report is of (report). */
typedef enum {
    REPORT_EVAL,   /* an --eval-every point: the span since the last report */
    REPORT_EPOCH,  /* an epoch's end: the whole epoch */
} ReportKind;

typedef struct {
    const DdpNet *net;
    const char *prog;
    DdpFlags flags;
    DdpTrainConfig cfg;
    DdpDataSet train, test;

    void *stream;
    int device_open;
    DdpOps *ops;
    DdpCtx ctx;
    /* The most samples one step holds (largest_step): what the activations,
     * the batch buffers and the layers' scratch are sized by. */
    int64_t max_batch;

    /* device memory */
    size_t memory_free;     /* free before the ops' handles and anything of the net's (allocate) */
    double memory_estimate; /* check_memory's bytes, and the training set when it is held on the device */
    float *params, *opt_state, *buffers, *arena;
    void *grads;            /* net->grad_bytes each: model.h */
    double *train_stats, *eval_stats;
    DdpStepScalars *step_scalars; /* ctx.step_scalars: the step's lr, step and epoch */
    void *batch;
    DdpBatchUpload *upload; /* how a host batch reaches batch */
    /* host memory */
    void *staging[SLOTS];
    void *staged[SLOTS];    /* events: the last copy out of staging[i] done */
    int slot;
    float *host_params, *host_buffers, *host_opt_state;
    int64_t *counts;        /* starting step counts, per parameter */
    int64_t *counts_written; /* what checkpoints and --export take for counts (counted_state) */
    int64_t *order;         /* this epoch's sample indices */
    int64_t *eval_ids;      /* one evaluation batch's indices */
    float *augment_scratch; /* one sample, for the data { } block's crop */
    /* cuDNN's timed algorithms as conv_choices.h's text ("" if none), of
     * DDP_CONV_CHOICES_TEXT bytes: a resumed checkpoint's on rank 0 until
     * share_conv_choices, then the ones this process runs, which
     * checkpoints keep */
    char *conv_choices;
    /* --conv-algorithms FILE's record (DDP_CONV_CHOICES_TEXT bytes), read at
     * start-up; file_choices_found 0 where FILE holds none yet, which rank 0
     * then times and writes */
    char *file_choices;
    int file_choices_found;
    DdpDataConfig data;     /* the net's data { } block, less crop and flips with --no-augment */
    DdpLoader *loader;      /* NULL with --workers 0, or a resident set */
    int64_t held;           /* the loader's batch whose copy to the device may still run; -1: none */
    void *held_copied;      /* event: that copy done */
    DdpBatchLayout layout; /* of a batch in a staging buffer and on the device */
    int input_on_device;    /* the device makes the net's input of the raw samples (DDP_AUGMENT_ON) */
    DdpAugmentDevice *input_maker; /* its table, with input_on_device */
    DdpResidentSet *resident; /* the training set on the device, batches gathered there; NULL: from the host */
    int64_t *order_on_device; /* with resident: the epoch's order, copied there once an epoch */
    void *order_copied;     /* event: that copy done, so that the host may write the next epoch's order */

    DdpSampler sampler;
    int64_t batches_per_epoch; /* each rank's, the same on every rank */
    int64_t steps_per_epoch;
    EpochState epoch_state; /* of the epoch being trained, or trained last */
    /* what the checkpoint resumed from says of the reports (DdpCheckpointRun):
     * the loss sums of the epoch it stopped in (zero when it ended one), and
     * a report a stop left out; as plain bits, so that rank 0 broadcasts them */
    struct {
        DdpLossSum epoch_loss, span_loss, left_out_loss;
        double left_out_lr;
        int64_t left_out; /* DdpLeftOut */
    } resumed;
    int64_t step;           /* global optimizer steps taken */
    int64_t first_step;     /* STEP when this run began training: a resumed run took STEP less it */
    int64_t epoch;          /* of the batch trained last */
    int64_t saved_step;     /* of the last checkpoint written; -1: none */
    int stopped;            /* the signal of a stop the ranks agreed on after a step (--eval-only: a
                             * batch); 0: none */
    int64_t eval_stopped_at; /* --eval-only stopped: the test samples the ranks had evaluated */
    DdpStepTimes times;     /* since the ranks' times were last gathered */
    char saved_path[4096];  /* rank 0: the last checkpoint written or resumed from; "" none */
    char resuming[4400];    /* rank 0: "resuming from PATH: step S...", said once the checks of the
                             * resumed run have passed (a refused run did not resume); "" none */
    double lr;              /* of the last step */
    double started;         /* ddp_main's start */
    double train_seconds;   /* whole run, evaluation excluded */
    int64_t train_samples;
    double last_progress;

    DdpJsonLog *log;
    DdpTensorboard *tb;
    DdpProgress progress;

    DdpDist dist;           /* ranks; a world of one when run alone */
    DdpReducer *reducer;    /* NULL with one rank */
    DdpStepGraphs *graphs;  /* the training step's graphs, one per batch shape */
    int launched;           /* this process only started the ranks */
    int launch_status;      /* their exit status */
} Trainer;

/* ---- data ----------------------------------------------------------------- */

/* "1x28x28" or "784": the net's input as the .net file wrote it. */
static void input_text(const DdpNet *net, char *buf, size_t len)
{
    if (net->sample_rank == 3)
        snprintf(buf, len, "%lldx%lldx%lld", (long long)net->sample_shape[0], (long long)net->sample_shape[1],
                 (long long)net->sample_shape[2]);
    else
        snprintf(buf, len, "%lld", (long long)net->sample_numel);
}

/* "1x28x28 IDX": the samples and their format, for the first line. */
static void data_text(const DdpDataSet *set, char *buf, size_t len)
{
    snprintf(buf, len, "%dx%dx%d %s", set->channels, set->rows, set->cols, set->format);
}

/* The images must be what the net's input says: channels x rows x cols for
 * a C x H x W input, as many features for a flat one. */
static DdpStatus check_sample_shape(const DdpNet *net, const DdpDataSet *set)
{
    int ok = net->sample_rank == 3 ? net->sample_shape[0] == set->channels && net->sample_shape[1] == set->rows &&
                                         net->sample_shape[2] == set->cols
                                   : net->sample_numel == ddp_data_sample_values(set);
    if (ok && net->sample_numel == ddp_data_sample_values(set))
        return DDP_OK;
    char want[64];
    input_text(net, want, sizeof want);
    return DDP_ERR(DDP_BAD_INPUT, "%s: the images are %dx%dx%d (channels x rows x columns), but the net's input is %s",
                   set->images_path, set->channels, set->rows, set->cols, want);
}

/* A sample of the net's input as channels x rows x columns: a features
 * input is 1 x 1 x features. */
static void sample_chw(const DdpNet *net, int *c, int *h, int *w)
{
    int flat = net->sample_rank != 3;
    *c = flat ? 1 : (int)net->sample_shape[0];
    *h = flat ? 1 : (int)net->sample_shape[1];
    *w = flat ? (int)net->sample_numel : (int)net->sample_shape[2];
}

static DdpDataOptions data_options(const Trainer *t)
{
    DdpDataOptions options = {.coarse_labels = t->flags.coarse_labels,
                              .channels_first = t->flags.channels_first,
                              .channels_last = t->flags.channels_last,
                              .fit = {.flat = t->net->sample_rank != 3, .sizing = t->data.sizing}};
    sample_chw(t->net, &options.fit.channels, &options.fit.rows, &options.fit.cols);
    return options;
}

static DdpStatus load_data(Trainer *t)
{
    const DdpDataOptions options = data_options(t);
    DDP_CHECK(ddp_data_load(t->flags.data, 1, &options, &t->train));
    DDP_CHECK(ddp_data_load(t->flags.data, 0, &options, &t->test));
    /* one scaling for both: uint8 images are divided by 255, float ones are not */
    if (strcmp(t->train.format, t->test.format) != 0)
        return DDP_ERR(DDP_BAD_INPUT, "%s holds %s data, but %s holds %s: save both sets alike", t->train.images_path,
                       t->train.format, t->test.images_path, t->test.format);
    DDP_CHECK(check_sample_shape(t->net, &t->train));
    DDP_CHECK(check_sample_shape(t->net, &t->test));
    DDP_CHECK(ddp_data_check_classes(&t->train, t->net->num_classes));
    DDP_CHECK(ddp_data_check_classes(&t->test, t->net->num_classes));
    return DDP_OK;
}

/* How batches of SET are made (loader.h). */
static DdpLoaderSpec loader_spec(const Trainer *t, const DdpDataSet *set)
{
    DdpLoaderSpec spec = {.set = set, .data = &t->data, .seed = t->cfg.seed, .batch = t->cfg.batch};
    sample_chw(t->net, &spec.channels, &spec.rows, &spec.cols);
    spec.layout = t->layout;
    return spec;
}

/* Where the device makes the net's input of the batch's raw samples, queues
 * that behind the batch's copy (for a training batch of EPOCH >= 0, or an
 * evaluation one). Its time is the step's, not the data wait's. */
static DdpStatus make_input_on_device(Trainer *t, int n, int64_t epoch)
{
    if (!t->input_on_device)
        return DDP_OK;
    char *batch = t->batch;
    return ddp_augment_on_device(t->input_maker, t->cfg.seed, epoch, t->ctx.sample_ids, n, batch + t->layout.raw,
                                 (float *)(batch + t->layout.x), t->stream);
}

/* Gathers samples IDS[0..n) of SET into the next staging buffer, applies the
 * data { } block (its random part for a training batch of EPOCH >= 0; only
 * normalize for an evaluation one, EPOCH < 0) there or, with the input made
 * on the device, after the copy, and queues the copy to the device batch
 * that ctx.x, ctx.labels and ctx.sample_ids point into. Waits only if that
 * buffer's previous copy is still running. MAKING (or NULL) gains the
 * seconds the batch took to make on the host. */
static DdpStatus stage_batch(Trainer *t, const DdpDataSet *set, const int64_t *ids, int n, int64_t epoch,
                             double *making)
{
    int s = t->slot;
    t->slot = (t->slot + 1) % SLOTS;
    DDP_CHECK(ddp_event_wait(t->staged[s]));
    DdpLoaderSpec spec = loader_spec(t, set);
    double start = ddp_now();
    DDP_CHECK(ddp_loader_make(&spec, epoch, ids, n, t->staging[s], t->augment_scratch));
    if (making)
        *making += ddp_now() - start;
    DDP_CHECK(ddp_batch_upload(t->upload, t->batch, t->staging[s], t->layout.host_bytes, t->staged[s]));
    return make_input_on_device(t, n, epoch);
}

/* The loader's batch held since the last step back to it, once its copy
 * to the device is done. */
static DdpStatus release_held(Trainer *t)
{
    if (t->held < 0)
        return DDP_OK;
    DDP_CHECK(ddp_event_wait(t->held_copied));
    ddp_loader_release(t->loader, t->held);
    t->held = -1;
    return DDP_OK;
}

/* Training batch B of the epoch (samples ORDER[first..first + n)): gathered
 * on the device from the resident set, or from the loader, which made it
 * ahead, or made now with --workers 0. *WAITED gains
 * the seconds the step waited for it to be made (not for a buffer, which
 * on a GPU is waiting for an earlier batch's copy). */
static DdpStatus stage_training_batch(Trainer *t, int64_t epoch, int64_t b, int64_t first, int n, double *waited)
{
    if (t->resident) {
        DDP_CHECK(ddp_resident_gather(t->resident, t->order_on_device + first, n, &t->layout, t->batch, t->stream));
        return make_input_on_device(t, n, epoch);
    }
    if (!t->loader)
        return stage_batch(t, &t->train, t->order + first, n, epoch, waited);
    DDP_CHECK(release_held(t));
    void *buf;
    int made = 0;
    DDP_CHECK(ddp_loader_take(t->loader, b, &buf, &made, waited));
    t->held = b;
    if (made != n) /* the loader splits the epoch as train_epoch does */
        return DDP_ERR(DDP_FAIL, "internal error: the loader made batch %lld of %d samples, the step takes %d",
                       (long long)b, made, n);
    DDP_CHECK(ddp_batch_upload(t->upload, t->batch, buf, t->layout.host_bytes, t->held_copied));
    return make_input_on_device(t, n, epoch);
}

/* ---- set-up ---------------------------------------------------------------- */

static DdpStatus device_alloc(void **p, int64_t count, size_t elem, const char *what)
{
    if (count < 0 || (uint64_t)count > SIZE_MAX / elem)
        return DDP_ERR(DDP_FAIL, "internal error: %s needs %lld elements", what, (long long)count);
    return ddp_device_alloc(p, (size_t)count * elem);
}

/* Bytes in a GiB, for the memory figures the run states. */
static const double GIB = 1024.0 * 1024.0 * 1024.0;

/* Whether this rank opens NCCL, whose buffers take device memory. */
static int opens_nccl(const Trainer *t)
{
    return ddp_device_is_gpu() && (t->dist.world > 1 || t->flags.backend == DDP_BACKEND_NCCL);
}

/* The library ops (ops.h), with the net's convolutions and linear layers
 * registered for the run's batch; ddp_ops_finalize comes after the memory
 * check, which counts what it will allocate. */
static DdpStatus plan_ops(Trainer *t)
{
    DDP_CHECK(ddp_ops_create(&t->ops, t->stream));
    DDP_CHECK(ddp_ops_set_precision(t->ops, t->cfg.precision));
    /* the other ranks take what rank 0 times (share_conv_choices) */
    if (t->flags.conv_algorithms && ddp_conv_file_times(t->file_choices_found, t->flags.eval_only, t->dist.rank))
        ddp_ops_time_algorithms(t->ops);
    /* all that a net's plan_ops reads (model.h) */
    DdpCtx planning = {.ops = t->ops, .max_batch = (int)t->max_batch};
    return t->net->plan_ops ? t->net->plan_ops(&planning) : DDP_OK;
}

/* Refuses at start-up what cannot fit, rather than failing (or swapping for
 * hours) in the middle of an allocation or of training. AVAILABLE is the
 * free memory read before the library ops were created. On a GPU the
 * libraries' share (cuDNN's and cuBLAS's workspaces and modules, NCCL's
 * buffers: an estimate, device.h's ddp_device_library_bytes) counts with the
 * net's state; the CUDA context is already out of AVAILABLE, as the device
 * is open. The library ops' scratch (ddp_ops_planned_bytes: the operands'
 * rounded or transposed copies, im2col's matrices) grows with the batch, as
 * the activations do. */
static DdpStatus check_memory(const Trainer *t, size_t available_bytes, double *estimate)
{
    const DdpNet *net = t->net;
    int nccl = opens_nccl(t);
    double state = 4.0 * ((double)net->n_param_floats * (1 + net->opt_slots) + (double)net->n_buffer_floats) +
                   (double)net->grad_bytes * (double)net->n_param_floats;
    double libraries = (double)ddp_device_library_bytes(t->dist.world, nccl);
    double activations = 4.0 * ((double)t->max_batch * (double)net->arena_per_sample + (double)net->arena_fixed);
    double scratch = (double)ddp_ops_planned_bytes(t->ops);
    double available = (double)available_bytes;
    *estimate = state + libraries + activations + scratch;
    if (available <= 0 || *estimate <= available)
        return DDP_OK;
    char device[128];
    ddp_device_describe(device, sizeof device);
    if (state > available)
        return DDP_ERR(DDP_BAD_INPUT, "%s's parameters, gradients and optimizer state need %.1f GiB, but the %s has "
                       "%.1f GiB available: the net is too large for it", net->name, state / GIB, device,
                       available / GIB);
    if (state + libraries > available)
        return DDP_ERR(DDP_BAD_INPUT, "%s's parameters, gradients and optimizer state need %.1f GiB and cuDNN, cuBLAS "
                       "and NCCL about %.1f GiB more, but the %s has %.1f GiB available: the net is too large for it",
                       net->name, state / GIB, libraries / GIB, device, available / GIB);
    /* a rank's share of a global batch shrinks with more ranks; a batch per rank does not */
    return DDP_ERR(DDP_BAD_INPUT, "%s needs %.1f GiB at batch %lld (%.1f GiB of it activations, %.1f GiB the "
                   "layers' scratch), but the %s has %.1f GiB available: use a smaller %s", net->name,
                   *estimate / GIB, (long long)t->max_batch, activations / GIB,
                   scratch / GIB, device, available / GIB,
                   t->cfg.batch_global ? "--global-batch, or more ranks" : "--batch-size");
}

/* A rank's share of the test set as DistributedSampler pads it: the same
 * on every rank (evaluate leaves the padding out). */
static int64_t test_share_padded(const Trainer *t) { return (t->test.n + t->dist.world - 1) / t->dist.world; }

/* The most samples one step holds: the batch, or a rank's share of the
 * data where that is smaller, as a DataLoader's one short batch is. A
 * --batch-size far above the data set's size then allocates what the run
 * uses, not (at batch 100000 of mnist.net) 20 GB it never touches. The data
 * is loaded by now: the train set's share (sampler.num_samples, 0 with
 * --predict), and the test set's, which evaluate() and predict() take in
 * batches of the same size. */
static int64_t largest_step(const Trainer *t)
{
    int64_t test_share = test_share_padded(t);
    int64_t most = t->sampler.num_samples > test_share ? t->sampler.num_samples : test_share;
    return most < 1 ? 1 : most < t->cfg.batch ? most : t->cfg.batch;
}

static DdpStatus allocate(Trainer *t)
{
    const DdpNet *net = t->net;
    int64_t batch = t->max_batch = largest_step(t);
    if (net->arena_per_sample < 0 || net->arena_fixed < 0 ||
        (net->arena_per_sample && batch > (INT64_MAX / 4 - net->arena_fixed) / net->arena_per_sample))
        return DDP_ERR(DDP_BAD_INPUT, "batch %lld needs more activation memory than can be addressed", (long long)batch);
    t->memory_free = ddp_device_memory_available(); /* before the ops' handles, which the estimate counts */
    DDP_CHECK(plan_ops(t));
    DDP_CHECK(check_memory(t, t->memory_free, &t->memory_estimate));
    DDP_CHECK(device_alloc((void **)&t->params, net->n_param_floats, sizeof(float), "the parameters"));
    DdpPgType grad_type = DDP_F32; /* unused here: the call checks net->grad_bytes */
    DDP_CHECK(ddp_reducer_grad_type(net, &grad_type));
    DDP_CHECK(device_alloc(&t->grads, net->n_param_floats, (size_t)net->grad_bytes, "the gradients"));
    DDP_CHECK(device_alloc((void **)&t->opt_state, net->n_param_floats * net->opt_slots, sizeof(float),
                           "the optimizer state"));
    DDP_CHECK(device_alloc((void **)&t->buffers, net->n_buffer_floats, sizeof(float), "the buffers"));
    DDP_CHECK(device_alloc((void **)&t->arena, batch * net->arena_per_sample + net->arena_fixed, sizeof(float),
                           "the activations"));
    DDP_CHECK(device_alloc((void **)&t->train_stats, NSTATS, sizeof(double), "the statistics"));
    DDP_CHECK(device_alloc((void **)&t->eval_stats, NSTATS, sizeof(double), "the statistics"));
    DDP_CHECK(device_alloc((void **)&t->step_scalars, 1, sizeof *t->step_scalars, "the step's scalars"));

    /* the raw samples as the test set holds them: it is loaded in every mode
     * (--predict has no train set), and load_data refuses a train set held
     * otherwise (the loader checks again) */
    t->layout = ddp_batch_layout(batch, net->sample_numel, t->input_on_device ? ddp_data_raw_bytes(&t->test) : 0);
    if (t->input_on_device) {
        int c, h, w;
        sample_chw(net, &c, &h, &w);
        DDP_CHECK(ddp_augment_device_create(&t->input_maker, &t->data, c, h, w, t->test.values != NULL, t->stream));
    }
    DDP_CHECK(ddp_device_alloc(&t->batch, t->layout.bytes));
    DDP_CHECK(ddp_batch_upload_create(&t->upload, t->layout.host_bytes, t->stream));
    for (int s = 0; s < SLOTS; s++) {
        DDP_CHECK(ddp_host_alloc(&t->staging[s], t->layout.host_bytes));
        DDP_CHECK(ddp_event_create(&t->staged[s]));
    }

    /* Host copies of the weights, for initialisation and export. */
    t->host_params = calloc((size_t)net->n_param_floats + 1, sizeof(float));
    t->host_buffers = calloc((size_t)net->n_buffer_floats + 1, sizeof(float));
    t->host_opt_state = calloc((size_t)(net->n_param_floats * net->opt_slots) + 1, sizeof(float));
    t->counts = calloc((size_t)net->n_params + 1, sizeof(int64_t));
    t->counts_written = calloc((size_t)net->n_params + 1, sizeof(int64_t));
    /* copied to the device from where it lies, when the set is resident */
    DDP_CHECK(ddp_host_alloc((void **)&t->order, ((size_t)t->sampler.num_samples + 1) * sizeof(int64_t)));
    t->eval_ids = calloc((size_t)batch, sizeof(int64_t));
    t->augment_scratch = calloc((size_t)net->sample_numel, sizeof(float));
    t->conv_choices = calloc(DDP_CONV_CHOICES_TEXT, 1);
    if (!t->host_params || !t->host_buffers || !t->host_opt_state || !t->counts || !t->counts_written || !t->order ||
        !t->eval_ids || !t->augment_scratch || !t->conv_choices)
        return DDP_ERR(DDP_FAIL, "out of memory");
    /* the convs' algorithms, and the scratch check_memory counted */
    return ddp_ops_finalize(t->ops);
}

/* On a GPU, at the end of training: how much of its memory the run took
 * (free memory before anything of the net's and the libraries' was made,
 * less free memory now: modules loaded lazily, NCCL's buffers and the CUDA
 * graphs included, since nothing is freed before the end), against the
 * estimate that check_memory refused by. Another program on the same GPU
 * counts in it too (ranks never share one: NCCL refuses two ranks of a
 * host on one GPU). tests/gpu/run.sh, alone on its GPU, checks that the
 * estimate covers it. */
static void say_memory_taken(Trainer *t)
{
    size_t now = ddp_device_memory_available();
    if (!t->memory_free || !now)
        return;
    ddp_progress_note(&t->progress, "memory: the run took %.2f GiB of the GPU; the start-up check estimated %.2f GiB",
                      ((double)t->memory_free - (double)now) / GIB, t->memory_estimate / GIB);
}

/* The training set held on the device, where resident.h's rule says so
 * (WHY, WHY_LEN: what decided, for the start-up line), with room for an
 * epoch's order beside it. After allocate, against what it leaves free,
 * less what NCCL and the libraries may still take (check_memory's
 * estimate, counted whole though cuDNN's and cuBLAS's workspaces are taken
 * by now). Another program sharing the GPU may want what this run counts
 * as free: README says to set DDP_DATA_RESIDENT=0 there. */
static DdpStatus make_resident(Trainer *t, char *why, size_t why_len)
{
    size_t free_bytes = ddp_device_memory_available(),
           libraries = ddp_device_library_bytes(t->dist.world, opens_nccl(t));
    size_t available = !free_bytes ? 0 /* unknown */ : free_bytes > libraries ? free_bytes - libraries : 1 /* none */;
    int resident = 0;
    DDP_CHECK(ddp_resident_choose(getenv(DDP_DATA_RESIDENT_ENV), ddp_device_is_gpu(), t->input_on_device, &t->train,
                                  available, &resident, why, why_len));
    if (!resident)
        return DDP_OK;
    DDP_CHECK(device_alloc((void **)&t->order_on_device, t->sampler.num_samples + 1, sizeof(int64_t),
                           "the epoch's order"));
    t->memory_estimate += (double)ddp_resident_bytes(&t->train);
    DDP_CHECK(ddp_event_create(&t->order_copied));
    return ddp_resident_create(&t->resident, &t->train, t->stream);
}

/* The workers that make training batches ahead (--workers, else the
 * default for this rank), or none with --workers 0 or a resident set. */
static DdpStatus start_loader(Trainer *t)
{
    if (t->resident)
        return DDP_OK;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int workers = t->flags.workers >= 0 ? (int)t->flags.workers
                                        : ddp_loader_default_workers(ddp_device_is_gpu(), cores > 0 ? (int)cores : 1,
                                                                     t->dist.topo.local_world_size);
    if (workers == 0)
        return DDP_OK;
    /* a buffer for each worker to make a batch into, one for the step to
     * hold, and one made ahead: the step waits only when all fall behind */
    DdpLoaderSpec spec = loader_spec(t, &t->train);
    DDP_CHECK(ddp_event_create(&t->held_copied));
    return ddp_loader_create(&t->loader, workers, workers + 2, &spec);
}

/* What the generated functions see; the batch pointers never move. */
static void enter_backward(DdpCtx *ctx)
{
    ddp_times_enter(ctx->times, DDP_PHASE_BACKWARD);
}

static void fill_ctx(Trainer *t)
{
    char *batch = t->batch;
    t->ctx = (DdpCtx){
        .ops = t->ops,
        .stream = t->stream,
        .params = t->params,
        .grads = t->grads,
        .opt_state = t->opt_state,
        .buffers = t->buffers,
        .arena = t->arena,
        .max_batch = (int)t->max_batch,
        .x = (const float *)(batch + t->layout.x),
        .labels = (const int32_t *)(batch + t->layout.labels),
        .sample_ids = (const int64_t *)(batch + t->layout.ids),
        .stats = t->train_stats,
        .seed = t->cfg.seed,
        .step_scalars = t->step_scalars,
        .world_size = t->dist.world,
        .backward_begins = enter_backward,
        .debug = ddp_debug_mode(getenv("DDP_DEBUG")),
        .times = &t->times,
    };
}

/* The output files' checks: each a file its flag may write, and no two, or
 * one and --save's checkpoints, sharing one. */
static DdpStatus check_output_files(Trainer *t)
{
    if (t->flags.export_path) {
        DDP_CHECK(ddp_weights_check_writable("export", t->flags.export_path));
        if (ddp_checkpoint_file_is_one(t->flags.export_path))
            return DDP_ERR(DDP_BAD_INPUT, "--export %s: a checkpoint (--save writes those), whose optimizer state and "
                           "step the weights alone would replace: name another file", t->flags.export_path);
    }
    if (t->flags.log)
        DDP_CHECK(ddp_jsonlog_check(t->flags.log));
    if (t->flags.tensorboard)
        DDP_CHECK(ddp_tensorboard_check(t->flags.tensorboard));
    const char *const output_flags[] = {"log", "export", "conv-algorithms"};
    const char *const outputs[] = {t->flags.log, t->flags.export_path, t->flags.conv_algorithms};
    DDP_CHECK(ddp_outputs_apart(output_flags, outputs, 3, t->flags.save, DDP_CHECKPOINT_PREFIX));
    /* --init is only read, but a weights file under a checkpoint's name in
     * --save DIR would be written over, then pruned, as the run's own (it
     * may be --export's too: read, then written, as a fine-tune's) */
    const char *const init_flag[] = {"init"};
    if (!t->flags.eval_only)
        DDP_CHECK(ddp_outputs_apart(init_flag, &t->flags.init, 1, t->flags.save, DDP_CHECKPOINT_PREFIX));
    if (t->flags.conv_algorithms) { /* a record, or nothing yet where one may be written */
        if (!(t->file_choices = malloc(DDP_CONV_CHOICES_TEXT)))
            return DDP_ERR(DDP_FAIL, "out of memory");
        DDP_CHECK(ddp_conv_choices_read_file("conv-algorithms", t->flags.conv_algorithms, t->file_choices,
                                             DDP_CONV_CHOICES_TEXT, &t->file_choices_found));
    }
    return DDP_OK;
}

/* Outputs are checked at start-up, on every rank and before the ranks meet,
 * so that a bad path stops the run before any rank waits in a collective
 * for one that has failed (a launcher ends the others). --save DIR is made
 * first, so that the other outputs may lie in it on a first run (--log
 * DIR/log.jsonl); a check that then refuses the run removes DIR if this
 * process made it (the directory itself: parents mkdir -p made stay; one
 * that another run made meanwhile is that run's). An evaluation only reads
 * --save DIR (--resume's newest): it is neither made nor written. */
static DdpStatus check_outputs(Trainer *t)
{
    const char *save = t->flags.eval_only ? NULL : t->flags.save;
    int save_made = 0;
    if (save)
        DDP_CHECK(ddp_checkpoint_make_dir(save, &save_made));
    DdpStatus st = check_output_files(t);
    if (st != DDP_OK && save_made)
        (void)rmdir(save); /* empty: nothing is written into it before the checks pass */
    return st;
}

/* Seeded or --init weights, on the host, then on the device. */
static DdpStatus init_weights(Trainer *t)
{
    const DdpNet *net = t->net;
    if (t->flags.init) {
        /* a checkpoint would fail below on its optimizer state ("unexpected tensors") */
        if (ddp_checkpoint_file_is_one(t->flags.init))
            return DDP_ERR(DDP_BAD_INPUT, "--init %s: a checkpoint (--save writes those), not a weights file: to "
                           "continue training from it, use --resume %s", t->flags.init, t->flags.init);
        DDP_CHECK(ddp_weights_load(net, t->flags.init, t->host_params, t->host_buffers, t->counts));
    } else
        DDP_CHECK(ddp_weights_init(net, t->cfg.seed, t->host_params, t->host_buffers, t->counts));
    DDP_CHECK(ddp_copy_to_device(t->params, t->host_params, (size_t)net->n_param_floats * sizeof(float), t->stream));
    DDP_CHECK(ddp_copy_to_device(t->buffers, t->host_buffers, (size_t)net->n_buffer_floats * sizeof(float),
                                 t->stream));
    /* The host copies may be reused as soon as the copies are done. */
    return ddp_device_sync(t->stream);
}

/* The device's weights (and with OPT_STATE the optimizer state) into the
 * host copies; the copies are synchronous. */
static DdpStatus weights_to_host(Trainer *t, int opt_state)
{
    const DdpNet *net = t->net;
    DDP_CHECK(ddp_copy_to_host(t->host_params, t->params, (size_t)net->n_param_floats * sizeof(float), t->stream));
    DDP_CHECK(ddp_copy_to_host(t->host_buffers, t->buffers, (size_t)net->n_buffer_floats * sizeof(float),
                               t->stream));
    if (opt_state)
        DDP_CHECK(ddp_copy_to_host(t->host_opt_state, t->opt_state,
                                   (size_t)(net->n_param_floats * net->opt_slots) * sizeof(float), t->stream));
    return DDP_OK;
}

/* The training batches of STEPS steps, each one forward: STEPS under
 * --no-sync-every 1, K a step under K, but for an epoch's last step, which
 * takes what is left. */
static int64_t batches_in_steps(const Trainer *t, int64_t steps)
{
    const int64_t spe = t->steps_per_epoch, per_epoch = t->batches_per_epoch;
    if (spe <= 0)
        return steps;
    const int64_t in_epoch = steps % spe * t->flags.no_sync_every;
    return steps / spe * per_epoch + (in_epoch < per_epoch ? in_epoch : per_epoch);
}

/* The step counts (batchnorm's num_batches_tracked) as the files hold them,
 * PyTorch's: the starting count plus a training forward's 1, so plus
 * batches_in_steps. The files' writers add the step (weights.h), so the
 * counts handed to them are the starting ones plus the difference, in
 * t->counts_written; resumed_counts takes it back off what a load leaves. */
static int64_t *counted_state(Trainer *t)
{
    const int64_t extra = batches_in_steps(t, t->step) - t->step;
    for (int i = 0; i < t->net->n_params; i++)
        t->counts_written[i] = t->counts[i] + extra;
    return t->counts_written;
}

/* After a checkpoint of step STEP loaded: its counts, less its step (as
 * ddp_checkpoint_load leaves them), less what counted_state added. */
static void resumed_counts(Trainer *t, int64_t step)
{
    const int64_t extra = batches_in_steps(t, step) - step;
    for (int i = 0; i < t->net->n_params; i++)
        t->counts[i] -= extra;
}

static DdpStatus export_weights(Trainer *t)
{
    DDP_CHECK(weights_to_host(t, 0));
    if (ddp_weights_export(t->net, t->flags.export_path, t->host_params, t->host_buffers, counted_state(t),
                           t->step) == DDP_OK)
        return DDP_OK;
    /* a failure while running (exit 1), whatever it says of the path: it
     * passed its checks at start-up, so it was changed since, or the disk filled */
    char failure[DDP_ERROR_MESSAGE_LEN];
    snprintf(failure, sizeof failure, "%s", ddp_error_message());
    return DDP_ERR(DDP_FAIL, "%s", failure);
}

/* ---- checkpoints ------------------------------------------------------------------ */

/* Whether STEP is an --eval-every point: the run reports there, inside an
 * epoch (train_epoch). */
static int eval_point(const Trainer *t, int64_t step)
{
    return t->flags.eval_every > 0 && step % t->flags.eval_every == 0;
}

static DdpCheckpointRun checkpoint_run(const Trainer *t)
{
    /* Inside an epoch, its loss so far (all of it taken, by
     * save_checkpoint), and the part since its last --eval-every report:
     * none at a step that reports, as the run that never stops has it after
     * this step. A stop's checkpoint, written before the step's report,
     * keeps the report for the resumed run (report_left_out): the epoch's
     * at its end, or the span's at an --eval-every point. */
    const int at_end = t->steps_per_epoch > 0 && t->step % t->steps_per_epoch == 0;
    const DdpLossSum none = {0, 0};
    const DdpLeftOut left_out = !t->stopped                          ? DDP_LEFT_OUT_NONE
                                : at_end                            ? DDP_LEFT_OUT_EPOCH
                                : eval_point(t, t->step)            ? DDP_LEFT_OUT_EVAL
                                                                    : DDP_LEFT_OUT_NONE;
    return (DdpCheckpointRun){
        .step = t->step,
        .epoch = t->steps_per_epoch > 0 ? t->step / t->steps_per_epoch : 0,
        .seed = t->cfg.seed,
        .batch = t->cfg.batch,
        .world = t->dist.world,
        .no_sync_every = t->flags.no_sync_every,
        .shuffle = t->flags.shuffle,
        .precision = t->cfg.precision,
        .channels_last = t->net->channels_last,
        .train_samples = t->train.n,
        .epoch_loss = !at_end ? t->epoch_state.loss : none,
        .span_loss = !at_end && !eval_point(t, t->step) ? t->epoch_state.span_loss : none,
        .left_out = left_out,
        .left_out_loss = left_out == DDP_LEFT_OUT_EPOCH  ? t->epoch_state.loss
                         : left_out == DDP_LEFT_OUT_EVAL ? t->epoch_state.span_loss
                                                         : none,
        .left_out_lr = t->lr,
    };
}

static DdpCheckpointState host_state(Trainer *t)
{
    return (DdpCheckpointState){t->host_params, t->host_buffers, t->host_opt_state, t->counts, t->conv_choices};
}

static DdpStatus take_stats(Trainer *t, EpochState *e);

/* Why the state after step t->step must not be saved, into WHY ("" if it
 * may): the epoch's loss so far, summed over ranks (take_stats, just
 * before), and, on rank 0, which copies them to the host to write them,
 * the weights and optimizer state (the same on every rank). */
static DdpStatus unsavable(Trainer *t, char *why, size_t len)
{
    why[0] = '\0';
    const double loss = t->epoch_state.loss.sum;
    if (!isfinite(loss)) {
        snprintf(why, len, "the loss is %s", isnan(loss) ? "nan" : "inf");
        return DDP_OK;
    }
    if (t->dist.rank != 0)
        return DDP_OK;
    DDP_CHECK(weights_to_host(t, 1));
    DdpCheckpointState state = host_state(t);
    char tensor[256];
    DDP_CHECK(ddp_checkpoint_nonfinite(t->net, &state, tensor, sizeof tensor));
    if (tensor[0])
        snprintf(why, len, "tensor '%s' is not finite (nan or inf)", tensor);
    return DDP_OK;
}

/* --save: rank 0 writes the state after step t->step; the others go on (the
 * weights are the same everywhere) and meet it at the next collective. A
 * state that is not finite is not written, so a run that diverges keeps its
 * good checkpoints; every rank learns it (a sum over ranks, in the spare
 * evaluation accumulators) and stops at the same step. */
static DdpStatus save_checkpoint(Trainer *t)
{
    if (!t->flags.save || t->saved_step == t->step)
        return DDP_OK;
    t->saved_step = t->step;
    ddp_signals_note_activity(DDP_ACTIVITY_CHECKPOINTING, t->epoch, t->step);
    ddp_whereabouts_note(t->dist.whereabouts, t->step, "a checkpoint");
    char why[320] = "", failure[DDP_ERROR_MESSAGE_LEN] = "";
    /* Every rank makes the all-reduce below, whatever it found here: one
     * that returned early would leave the others waiting in it. Its own
     * failure counts as a bad state, and is returned after. The stats are
     * taken first, a collective too, so that the checkpoint keeps the
     * epoch's loss up to its step (checkpoint_run). */
    DdpStatus local = take_stats(t, &t->epoch_state);
    if (local == DDP_OK)
        local = unsavable(t, why, sizeof why);
    if (local != DDP_OK)
        snprintf(failure, sizeof failure, "%s", ddp_error_message());
    double bad = local != DDP_OK || why[0] != '\0';
    DDP_CHECK(ddp_copy_to_device(t->eval_stats, &bad, sizeof bad, t->stream));
    DDP_CHECK(ddp_dist_sum_stats(&t->dist, t->eval_stats, 1, DDP_PG_FOR_SAVE_CHECK));
    DDP_CHECK(ddp_copy_to_host(&bad, t->eval_stats, sizeof bad, t->stream));
    if (local != DDP_OK) {
        t->dist.agreed_failure = 1; /* the others saw it in the sum, and stop here too */
        return DDP_ERR(local, "%s", failure);
    }
    if (bad > 0) {
        /* every rank found the same sum: all stop here, and MPI may finish */
        t->dist.agreed_failure = 1;
        char kept[4200] = "";
        if (t->saved_path[0])
            snprintf(kept, sizeof kept, "; the newest good one is %s", t->saved_path);
        if (!why[0])
            return DDP_ERR(DDP_FAIL, "not saving the checkpoint of step %lld: another rank failed, or found the "
                           "weights or optimizer state not finite (it says which)%s", (long long)t->step, kept);
        return DDP_ERR(DDP_FAIL, "not saving the checkpoint of step %lld: %s, training has diverged%s",
                       (long long)t->step, why, kept);
    }
    if (t->dist.rank != 0)
        return DDP_OK;
    DdpCheckpointRun run = checkpoint_run(t);
    DdpCheckpointState state = host_state(t);
    state.counts = counted_state(t);
    char path[sizeof t->saved_path];
    const DdpStatus saved = ddp_checkpoint_save(t->net, t->flags.save, &run, &state, path, sizeof path);
    if (saved != DDP_OK) {
        if (path[0]) /* written, but not sure to outlive a crash: its message (exit 1) says so */
            return saved;
        /* a failure while running (exit 1, which --max-restarts retries),
         * whatever it says of the directory: --save passed its checks at
         * start-up, so it was changed since, or the disk filled */
        snprintf(failure, sizeof failure, "%s", ddp_error_message());
        char kept[sizeof t->saved_path + 32] = "";
        if (t->saved_path[0])
            snprintf(kept, sizeof kept, "; the newest good one is %s", t->saved_path);
        return DDP_ERR(DDP_FAIL, "not saving the checkpoint of step %lld: %s%s", (long long)t->step, failure, kept);
    }
    snprintf(t->saved_path, sizeof t->saved_path, "%s", path);
    ddp_progress_note(&t->progress, "saved %s", t->saved_path);
    return DDP_OK;
}

/* At start-up, where a launcher's ranks leave GPUs of their node idle
 * (ddp_gpus_left_idle), how many. */
static void say_gpus_left_idle(Trainer *t)
{
    const int local_ranks = t->dist.topo.local_world_size,
              idle = ddp_gpus_left_idle(t->dist.topo.launch, ddp_device_is_gpu() ? ddp_device_count() : 0,
                                        local_ranks);
    if (idle)
        ddp_progress_note(&t->progress, "note: %d rank%s on this node, which shows %d GPUs: %d stay idle (start "
                          "one rank per GPU to use them all)", local_ranks, local_ranks == 1 ? "" : "s",
                          local_ranks + idle, idle);
}

/* Rank 0's part of --resume: the checkpoint named, or the newest valid one
 * in --save DIR, into the host copies and the device, and its step into
 * *STEP; nothing when DIR has none yet (a first run started with the command
 * that will restart it). *FROM_PATH: whether that was --resume PATH's file.
 *
 * Under torchrun's agent, which restarts the ranks with the same flags
 * again, --resume PATH may only have begun the run: where DIR's newest
 * valid checkpoint is past PATH's step (or PATH is gone: pruned, as one of
 * DIR's own), it is taken as this run's, a restart's, and the run goes on
 * from there, saying so (torchrun's count of restarts is per node, so the
 * steps decide, not the count). Elsewhere such newer checkpoints are a
 * roll-back's, which resume() refuses (check_save_dir); under torchrun a
 * roll-back needs a --save DIR of its own. */
static DdpStatus load_checkpoint(Trainer *t, int64_t *step, int *from_path)
{
    DdpCheckpointRun saved, now = checkpoint_run(t);
    DdpCheckpointState state = host_state(t);
    char path[4096];
    *from_path = t->flags.resume_path != NULL;
    if (t->flags.resume_path)
        snprintf(path, sizeof path, "%s", t->flags.resume_path);
    const int restartable = t->flags.resume_path && t->flags.save && !t->flags.eval_only && t->dist.topo.restart >= 0;
    if (t->flags.resume_path && !restartable)
        DDP_CHECK(ddp_checkpoint_load(t->net, path, &saved, &state));
    if (!t->flags.resume_path || restartable) {
        char skipped[4096], newest[4096];
        int found, unusable;
        int64_t path_step = -1; /* none given, or gone: any of DIR's */
        if (restartable && access(path, F_OK) == 0)
            DDP_CHECK(ddp_checkpoint_step(t->net, path, &path_step));
        /* What a failed load leaves in the host copies must not reach a run
         * that then starts from step 0: the weights and optimizer state are
         * the device's, where init_weights put them, and read back before
         * any use; the step counts are the host's alone, kept here. */
        const size_t counts_bytes = (size_t)t->net->n_params * sizeof *t->counts;
        int64_t *counts_at_start = malloc(counts_bytes + 1);
        if (!counts_at_start)
            return DDP_ERR(DDP_FAIL, "out of memory");
        memcpy(counts_at_start, t->counts, counts_bytes);
        DdpStatus st = ddp_checkpoint_latest(t->net, t->flags.save, path_step, &saved, &state, newest, sizeof newest,
                                             &found, skipped, sizeof skipped, &unusable);
        if (st == DDP_OK && !found)
            memcpy(t->counts, counts_at_start, counts_bytes);
        free(counts_at_start);
        DDP_CHECK(st);
        /* each line a reason a newer checkpoint could not be used */
        for (char *line = skipped; *line;) {
            size_t len = strcspn(line, "\n");
            fprintf(stderr, "%s: warning: skipping %.*s\n", t->prog, (int)len, line);
            line += len + (line[len] == '\n');
        }
        if (found) {
            if (restartable && path_step >= 0)
                ddp_progress_note(&t->progress, "torchrun (restart %d of this node): going on from --save's newest, "
                                  "past step %lld of --resume's file, as this run's (a roll-back under torchrun "
                                  "needs a --save of its own)", t->dist.topo.restart, (long long)path_step);
            else if (restartable)
                ddp_progress_note(&t->progress, "torchrun (restart %d of this node): --resume's file is gone "
                                  "(pruned?): going on from --save's newest", t->dist.topo.restart);
            snprintf(path, sizeof path, "%s", newest);
            *from_path = 0;
        } else if (restartable) { /* PATH's, over what the search read */
            DDP_CHECK(ddp_checkpoint_load(t->net, path, &saved, &state));
        } else if (t->flags.eval_only) { /* seeded weights are nothing to evaluate */
            return DDP_ERR(DDP_BAD_INPUT, "--eval-only --resume: %s holds no checkpoint of net '%s' to evaluate",
                           t->flags.save, t->net->name);
        } else if (unusable) {
            ddp_progress_note(&t->progress, "no usable checkpoint in %s (%d skipped, above): starting from step 0",
                              t->flags.save, unusable);
            return DDP_OK;
        } else {
            ddp_progress_note(&t->progress, "no checkpoint in %s yet: starting from step 0", t->flags.save);
            return DDP_OK;
        }
    }
    /* an evaluation takes the weights alone: the run's seed, batch and
     * world need not be the checkpoint's (its net is, by the file's hash) */
    if (!t->flags.eval_only)
        DDP_CHECK(ddp_checkpoint_check_run(path, &saved, &now));
    *step = saved.step;
    t->resumed.epoch_loss = saved.epoch_loss;
    t->resumed.span_loss = saved.span_loss;
    t->resumed.left_out_loss = saved.left_out_loss;
    t->resumed.left_out_lr = saved.left_out_lr;
    t->resumed.left_out = saved.left_out;
    resumed_counts(t, saved.step);
    snprintf(t->saved_path, sizeof t->saved_path, "%s", path);
    if (saved.world != now.world)
        snprintf(t->resuming, sizeof t->resuming, "resuming from %s: step %lld, made on %lld rank%s x %lld, now "
                 "%lld x %lld", path, (long long)saved.step, (long long)saved.world, saved.world == 1 ? "" : "s",
                 (long long)saved.batch, (long long)now.world, (long long)now.batch);
    else
        snprintf(t->resuming, sizeof t->resuming, "resuming from %s: step %lld", path, (long long)saved.step);
    const DdpNet *net = t->net;
    DDP_CHECK(ddp_copy_to_device(t->params, t->host_params, (size_t)net->n_param_floats * sizeof(float), t->stream));
    DDP_CHECK(ddp_copy_to_device(t->buffers, t->host_buffers, (size_t)net->n_buffer_floats * sizeof(float),
                                 t->stream));
    DDP_CHECK(ddp_copy_to_device(t->opt_state, t->host_opt_state,
                                 (size_t)(net->n_param_floats * net->opt_slots) * sizeof(float), t->stream));
    return ddp_device_sync(t->stream);
}

/* Rank 0's check of --save DIR, where the run will write and prune. Without
 * --resume it must hold none of this net's checkpoints, which the run would
 * overwrite and prune. After --resume PATH at step RESUMED (a roll-back to
 * an older one, say), none past RESUMED: a later bare --resume (the command
 * a stop prints, a restart) would take those and not this run's, and once
 * this run passed their steps they would count among the ones kept, its own
 * pruned instead. Damaged ones count too: bare --resume would skip them,
 * but the pruning still counts one whose damage lies in its tensors (it
 * reads headers alone), and keeps the others beside this run's. */
static DdpStatus check_save_dir(Trainer *t, int64_t resumed)
{
    char path[4096];
    int found;
    DDP_CHECK(ddp_checkpoint_find(t->net, t->flags.save, t->flags.resume ? resumed : -1, path, sizeof path, &found));
    if (!found)
        return DDP_OK;
    if (t->flags.resume)
        return DDP_ERR(DDP_BAD_INPUT, "--save %s holds checkpoints of net '%s' past step %lld of --resume %s (the "
                       "newest: %s), which a later --resume would take instead of this run's: move them away, "
                       "give --save another directory, or give --resume without PATH to go on from the newest",
                       t->flags.save, t->net->name, (long long)resumed,
                       t->flags.resume_path, path);
    return DDP_ERR(DDP_BAD_INPUT, "--save %s already holds checkpoints of net '%s' (the newest: %s): add --resume to "
                   "continue from them, or give --save a new directory to start afresh", t->flags.save,
                   t->net->name, path);
}

/* --resume: rank 0 loads, then tells every rank whether it could, from
 * which step and the epoch's loss up to it; the state itself follows in the
 * start-up broadcast. Without
 * --resume, rank 0 checks that --save DIR is not another run's, and after
 * --resume PATH that DIR holds no newer ones (check_save_dir); it tells
 * every rank the same way, so all of them stop, or none. */
static DdpStatus resume(Trainer *t)
{
    if (!t->flags.resume && !t->flags.save)
        return DDP_OK;
    /* rank 0's status, the step, and the bits of what it read of the reports */
    enum { REPORTS = sizeof t->resumed / sizeof(int64_t) };
    _Static_assert(sizeof t->resumed % sizeof(int64_t) == 0, "t->resumed is whole int64_t's of bits");
    int64_t said[2 + REPORTS] = {DDP_OK, 0};
    DdpStatus st = DDP_OK;
    if (t->dist.rank == 0) {
        /* the lock keeps two writers apart; an evaluation, which writes and
         * prunes nothing, may read the newest of a run still training */
        st = t->flags.save && !t->flags.eval_only ? ddp_checkpoint_lock(t->net, t->flags.save) : DDP_OK;
        int from_path = 0;
        if (st == DDP_OK)
            st = t->flags.resume ? load_checkpoint(t, &said[1], &from_path) : check_save_dir(t, -1);
        /* a roll-back's newer checkpoints; not for an evaluation, which
         * writes none, nor under torchrun's agent, where the newest valid
         * past PATH would have been taken (load_checkpoint) */
        if (st == DDP_OK && from_path && t->flags.save && !t->flags.eval_only && t->dist.topo.restart < 0)
            st = check_save_dir(t, said[1]);
        said[0] = st;
        memcpy(&said[2], &t->resumed, sizeof t->resumed);
    }
    DDP_CHECK(ddp_dist_broadcast_host(&t->dist, said, 2 + REPORTS));
    if (st != DDP_OK)
        return st;
    if (said[0] != DDP_OK)
        return DDP_ERR((DdpStatus)said[0], t->flags.resume ? "rank 0 could not resume (it says why)"
                                                           : "rank 0 refused the --save directory (it says why)");
    t->step = said[1];
    memcpy(&t->resumed, &said[2], sizeof t->resumed);
    t->saved_step = t->flags.resume ? t->step : -1;
    return DDP_OK;
}

/* Makes this process run the algorithms of TEXT (conv_choices.h) where its
 * own differ; WHY, where they do not apply here, and *TAKEN. */
static DdpStatus take_conv_choices(Trainer *t, const char *text, const char *own, int *taken, char *why, size_t len)
{
    *taken = 1;
    why[0] = '\0';
    if (!text[0] || strcmp(text, own) == 0)
        return DDP_OK;
    return ddp_ops_take_conv_choices(t->ops, text, taken, why, len);
}

/* --conv-algorithms FILE, on rank 0 once the ranks run the same algorithms
 * (t->conv_choices, "" for the heuristics'): says what became of FILE's
 * record, or writes this run's where FILE held none (conv_choices_file.h
 * decides). OFFERED, TAKEN, WHY: whether FILE's record was offered to the
 * ops, taken, and why not. */
static void keep_conv_algorithms(Trainer *t, int offered, int taken, const char *why)
{
    const char *path = t->flags.conv_algorithms;
    const DdpConvFileRun run = {.gpu = ddp_device_is_gpu(), .found = t->file_choices_found,
                                .eval_only = t->flags.eval_only, .offered = offered, .taken = taken,
                                .runs_files = strcmp(t->conv_choices, t->file_choices) == 0,
                                .record = t->conv_choices[0] != '\0'};
    switch (ddp_conv_file_action(&run)) {
    case DDP_CONV_FILE_CPU:
        ddp_progress_note(&t->progress, "note: --conv-algorithms: a CPU build runs no cuDNN algorithms; %s is "
                          "neither taken nor written", path);
        return;
    case DDP_CONV_FILE_TAKEN:
        ddp_progress_note(&t->progress, "convs: cuDNN's algorithms of --conv-algorithms %s", path);
        return;
    case DDP_CONV_FILE_NOT_TAKEN:
        ddp_progress_note(&t->progress, "note: cuDNN's algorithms of --conv-algorithms %s not taken (%s): this run "
                          "chose its own, and may sum in another order than the run that wrote them", path, why);
        return;
    case DDP_CONV_FILE_CHECKPOINT_KEPT:
        ddp_progress_note(&t->progress, "note: --conv-algorithms %s not taken: a resumed run keeps the algorithms "
                          "of its checkpoint", path);
        return;
    case DDP_CONV_FILE_NOTHING_TO_WRITE:
        ddp_progress_note(&t->progress, "note: --conv-algorithms %s not written: no record of cuDNN's algorithms to "
                          "keep (a net without convs, or one with too many)", path);
        return;
    case DDP_CONV_FILE_EVAL_ONLY:
        ddp_progress_note(&t->progress, "note: --conv-algorithms %s not written: an evaluation writes no record "
                          "(a training run given it times and writes one)", path);
        return;
    case DDP_CONV_FILE_WRITE:
        /* the path was checked at start-up; a failure now (a full disk)
         * costs later runs the record, not this run its training */
        if (ddp_conv_choices_write_file("conv-algorithms", path, t->conv_choices) != DDP_OK)
            fprintf(stderr, "%s: warning: %s: the next run given --conv-algorithms %s times its own\n", t->prog,
                    ddp_error_message(), path);
        else
            ddp_progress_note(&t->progress, "convs: cuDNN's timed algorithms written to --conv-algorithms %s, for "
                              "the runs given it to take", path);
        return;
    }
}

/* cuDNN's timed algorithms (DDP_CUDNN_BENCHMARK=1, or --conv-algorithms),
 * the same on every rank and in every resumed run (conv_choices.h): rank 0
 * takes those of the checkpoint it resumed from where they apply, else
 * those of --conv-algorithms FILE where they apply, then every rank takes
 * what rank 0 runs. Nothing on CPUs, and nothing where the heuristics
 * chose, unless a checkpoint or FILE says otherwise. */
static DdpStatus share_conv_choices(Trainer *t)
{
    char *own = malloc(DDP_CONV_CHOICES_TEXT), why[256];
    if (!own)
        return DDP_ERR(DDP_FAIL, "out of memory");
    /* a record too long to keep: a resumed run times again, and is told */
    if (ddp_ops_conv_choices(t->ops, own, DDP_CONV_CHOICES_TEXT) >= DDP_CONV_CHOICES_TEXT)
        ddp_progress_note(&t->progress, "note: the convs' timed cuDNN algorithms are too many to keep in "
                          "checkpoints or to give the other ranks: each rank, and a resumed run, chooses its own");
    int taken = 1, offered = 0, resumed_record = 0;
    DdpStatus st = DDP_OK;
    if (t->dist.rank == 0) { /* t->conv_choices: the checkpoint's, or "" */
        resumed_record = t->conv_choices[0] != '\0';
        st = take_conv_choices(t, t->conv_choices, own, &taken, why, sizeof why);
        if (st == DDP_OK && !taken && ddp_device_is_gpu())
            ddp_progress_note(&t->progress, "note: cuDNN's timed algorithms of the checkpoint not taken (%s): this "
                              "run %s, and may sum in another order than the run it resumes", why,
                              t->file_choices_found ? "offers those of --conv-algorithms instead" : "chose its own");
        /* FILE's, where no checkpoint's record runs */
        if (st == DDP_OK && t->file_choices_found && (!resumed_record || !taken)) {
            offered = 1;
            st = take_conv_choices(t, t->file_choices, own, &taken, why, sizeof why);
        }
        /* after a failure too: the other ranks wait in the broadcast */
        (void)ddp_ops_conv_choices(t->ops, t->conv_choices, DDP_CONV_CHOICES_TEXT);
    }
    DdpStatus sent = ddp_dist_broadcast_text(&t->dist, t->conv_choices, DDP_CONV_CHOICES_TEXT);
    if (st == DDP_OK)
        st = sent;
    if (st == DDP_OK && t->dist.rank != 0) {
        st = take_conv_choices(t, t->conv_choices, own, &taken, why, sizeof why);
        /* rank 0 speaks for the run, and cannot know: this rank says it */
        if (st == DDP_OK && !taken && ddp_device_is_gpu())
            fprintf(stderr, "%s: rank %d: warning: cuDNN's timed algorithms of rank 0 not taken (%s): this rank "
                            "chose its own, so the ranks may sum in another order than one rank would\n",
                    t->prog, t->dist.rank, why);
    }
    /* what this process runs, for its checkpoints ("" if too long) */
    if (st == DDP_OK && ddp_ops_conv_choices(t->ops, t->conv_choices, DDP_CONV_CHOICES_TEXT) >= DDP_CONV_CHOICES_TEXT)
        t->conv_choices[0] = '\0';
    if (st == DDP_OK && t->dist.rank == 0 && t->flags.conv_algorithms)
        keep_conv_algorithms(t, offered, taken, why);
    /* a checkpoint of the heuristics' algorithms, continued with others
     * (saved_path: a checkpoint was loaded; a bare --resume may find none) */
    if (st == DDP_OK && t->dist.rank == 0 && t->saved_path[0] && !resumed_record && t->conv_choices[0] &&
        ddp_device_is_gpu())
        ddp_progress_note(&t->progress, "note: the checkpoint keeps no record of cuDNN's algorithms (its run took "
                          "the heuristics') and this run runs others (--conv-algorithms, DDP_CUDNN_BENCHMARK): it "
                          "sums in another order from here");
    free(own);
    return st;
}

/* ---- statistics and evaluation ------------------------------------------------ */

/* Reads the device accumulators STATS into OUT (a sync), zeroing them after when ZERO. */
static DdpStatus read_stats(Trainer *t, double *stats, double out[NSTATS], int zero)
{
    /* Reports happen at the same step on every rank, so their statistics
     * are summed over ranks; the progress line's peek (not zeroing) is rank
     * 0's alone, as it happens on rank 0's clock. */
    if (zero)
        DDP_CHECK(ddp_dist_sum_stats(&t->dist, stats, NSTATS, DDP_PG_FOR_TRAIN_STATS));
    DDP_CHECK(ddp_copy_to_host(out, stats, NSTATS * sizeof(double), t->stream));
    if (zero)
        DDP_CHECK(ddp_device_zero(stats, NSTATS * sizeof(double), t->stream));
    return DDP_OK;
}

static DdpStatus check_loss(const Trainer *t, double loss_sum, int64_t epoch)
{
    if (isfinite(loss_sum))
        return DDP_OK;
    return DDP_ERR(DDP_FAIL, "loss is %s at epoch %lld step %lld", isnan(loss_sum) ? "nan" : "inf",
                   (long long)epoch + 1, (long long)t->step);
}

/* The scores the loss read in the batch just run (the generated code says
 * where: DdpNet.logits_at), on the device. */
static const float *device_scores(const Trainer *t)
{
    return t->ctx.arena + t->net->logits_at * t->ctx.max_batch;
}

/* What --eval-only counts besides the loss: each sample's prediction. */
typedef struct {
    DdpConfusion matrix;
    float *scores;   /* host: a batch's scores, n x classes */
} Tally;

/* Adds the predictions of the evaluation batch just run (its N samples,
 * t->eval_ids) to TALLY. */
static DdpStatus tally_batch(Trainer *t, Tally *tally, int n)
{
    int k = t->net->num_classes;
    DDP_CHECK(ddp_copy_to_host(tally->scores, device_scores(t), (size_t)n * (size_t)k * sizeof(float), t->stream));
    for (int i = 0; i < n; i++)
        ddp_confusion_add(&tally->matrix, tally->scores + (int64_t)i * k, &t->test.labels[t->eval_ids[i]], 1);
    return DDP_OK;
}

/* The whole test set, in order, in batches of the training batch size;
 * with several ranks each takes every world-th sample (DistributedSampler
 * without shuffling) and the results are summed. Where the world size does
 * not divide the test set, DistributedSampler pads the ranks' shares to one
 * size with samples seen twice, the last of some ranks' shares: they are
 * left out (the batch that holds them is run short, or not at all), so the
 * loss, the accuracy and --eval-only's matrix count each sample once, the
 * same at every world size, as one process's evaluation does. Every rank
 * still takes as many batches, for --eval-only's stop votes. TALLY: NULL,
 * or where --eval-only counts the predictions. */
static DdpStatus evaluate(Trainer *t, double *loss, double *acc, Tally *tally)
{
    int64_t batch = t->cfg.batch, world = t->dist.world, rank = t->dist.rank;
    int64_t share = test_share_padded(t);
    /* this rank's samples that are not padding: rank + i * world < test.n */
    int64_t own = rank < t->test.n ? (t->test.n - rank + world - 1) / world : 0;
    *loss = *acc = NAN;
    DDP_CHECK(ddp_device_zero(t->eval_stats, NSTATS * sizeof(double), t->stream));
    ddp_signals_note_activity(DDP_ACTIVITY_EVALUATING, t->epoch, t->step);
    ddp_whereabouts_note(t->dist.whereabouts, t->step, "evaluation");
    t->ctx.stats = t->eval_stats;
    for (int64_t start = 0; start < share; start += batch) {
        int n = (int)(own - start < batch ? (own > start ? own - start : 0) : batch);
        if (t->flags.eval_only)
            ddp_signals_test_stop(start / batch); /* tests: its batches are the steps */
        for (int i = 0; i < n; i++)
            t->eval_ids[i] = rank + (start + i) * world;
        if (n > 0) {
            DDP_CHECK(stage_batch(t, &t->test, t->eval_ids, n, -1, NULL));
            t->net->eval_step(&t->ctx, n);
            DDP_CHECK(ddp_step_status(&t->ctx));
            DDP_CHECK(ddp_ops_status(t->ops));
        }
        if (tally && n > 0)
            DDP_CHECK(tally_batch(t, tally, n));
        /* --eval-only is the whole run: a stop asked ends it after the
         * batch the ranks agree on (every rank takes as many), as training's
         * after a step; one agreed on the last batch lets it end as it would
         * have. Training's own evaluations run to their end. */
        if (t->flags.eval_only) {
            DDP_CHECK(ddp_pg_stop_vote_alone(t->dist.pg, ddp_signals_stop_asked(), &t->stopped));
            if (start + batch >= share)
                t->stopped = 0;
            if (t->stopped) {
                t->ctx.stats = t->train_stats;
                t->eval_stopped_at = (start + n) * world < t->test.n ? (start + n) * world : t->test.n;
                return DDP_OK;
            }
        }
    }
    t->ctx.stats = t->train_stats;
    double s[NSTATS];
    DDP_CHECK(ddp_dist_sum_stats(&t->dist, t->eval_stats, NSTATS, DDP_PG_FOR_EVAL_STATS));
    DDP_CHECK(read_stats(t, t->eval_stats, s, 0));
    *loss = s[2] > 0 ? s[0] / s[2] : NAN;
    *acc = s[2] > 0 ? s[1] / s[2] : NAN;
    return DDP_OK;
}

/* Sums the ranks' confusion matrices, as the statistics are summed. */
static DdpStatus sum_confusion(Trainer *t, DdpConfusion *c)
{
    int64_t count = (int64_t)c->classes * c->classes; /* below 2^31: evaluate_only checks */
    size_t bytes = (size_t)count * sizeof(double);
    double *summed;
    DDP_CHECK(device_alloc((void **)&summed, count, sizeof(double), "the confusion matrix"));
    DdpStatus s = ddp_copy_to_device(summed, c->counts, bytes, t->stream);
    if (s == DDP_OK)
        s = ddp_dist_sum_stats(&t->dist, summed, (int)count, DDP_PG_FOR_EVAL_STATS);
    if (s == DDP_OK)
        s = ddp_copy_to_host(c->counts, summed, bytes, t->stream);
    ddp_device_free(summed);
    return s;
}

/* --eval-only: the test set once, with the weights given. Rank 0 prints the
 * loss, the accuracy and a line per class, and logs the confusion matrix. */
static DdpStatus evaluate_only(Trainer *t)
{
    int k = t->net->num_classes;
    if ((int64_t)k * k > INT32_MAX)
        return DDP_ERR(DDP_BAD_INPUT, "--eval-only: a confusion matrix of %d classes is too large to gather", k);
    Tally tally = {.scores = malloc((size_t)t->max_batch * (size_t)k * sizeof(float))};
    DdpStatus s = tally.scores ? ddp_confusion_init(&tally.matrix, k)
                               : DDP_ERR(DDP_FAIL, "out of memory: a batch of scores");
    double loss = NAN, acc = NAN;
    if (s == DDP_OK)
        s = evaluate(t, &loss, &acc, &tally);
    if (s == DDP_OK && !t->stopped)
        s = sum_confusion(t, &tally.matrix);
    if (s == DDP_OK && t->stopped && t->dist.rank == 0) {
        char name[32];
        ddp_signal_name(ddp_signals_stop_asked() ? ddp_signals_stop_asked() : t->stopped, name, sizeof name);
        fprintf(stderr, "%s" DDP_SIGNALS_EVAL_STOPPED "%s after %lld of the %lld test samples: nothing is reported of "
                "one cut short\n", t->prog, name, (long long)t->eval_stopped_at, (long long)t->test.n);
        s = ddp_progress_stop(&t->progress, name, t->step, NULL);
    } else if (s == DDP_OK && t->dist.rank == 0) {
        /* the loss is the evaluation's own, as in training; it and the
         * matrix count each sample once (evaluate) */
        int64_t samples = ddp_confusion_total(&tally.matrix);
        double accuracy = ddp_confusion_accuracy(&tally.matrix);
        ddp_progress_note(&t->progress, "test_loss %.4f  test_acc %.4f  (%lld sample%s)", loss, accuracy,
                          (long long)samples, samples == 1 ? "" : "s");
        if (!t->flags.quiet)
            ddp_confusion_print(&tally.matrix, t->test.class_names, t->test.n_class_names, stdout);
        char *json = ddp_confusion_json(&tally.matrix);
        s = json ? ddp_progress_eval_only(&t->progress, loss, accuracy, samples, json)
                 : DDP_ERR(DDP_FAIL, "out of memory: the confusion matrix for the log");
        free(json);
        /* the printed result is the evaluation's product, as the predictions
         * are --predict's: one that did not reach its reader is a failure */
        errno = 0;
        if (s == DDP_OK && !t->flags.quiet && (fflush(stdout) != 0 || ferror(stdout) || t->progress.out_failed)) {
            int failure = t->progress.out_failed > 0 ? t->progress.out_failed : errno;
            s = DDP_ERR(DDP_FAIL, "cannot write the evaluation's results to standard output (%s)",
                        failure ? strerror(failure) : "a write failed");
        }
    }
    /* as after a training stop: no rank exits before rank 0 has said so
     * (under mpirun the first to exit ends the others) */
    if (s == DDP_OK && t->stopped && t->dist.pg)
        s = ddp_pg_barrier(t->dist.pg);
    if (s == DDP_OK && t->stopped)
        ddp_signals_stopping();
    ddp_confusion_free(&tally.matrix);
    free(tally.scores);
    return s;
}

/* --predict FILE: the likeliest classes of each of its images with the
 * weights of --init, in the file's order; one rank, as nothing is shared. */
static DdpStatus predict(Trainer *t)
{
    if (t->dist.world > 1)
        return DDP_ERR(DDP_BAD_INPUT, "--predict runs on one rank: start it without mpirun, srun or --nproc-per-node");
    /* the default is capped at the net's classes; a --top asked for is not
     * cut short without a word (torch.topk refuses it too) */
    if (t->flags.given[DDP_FLAG_TOP] && t->flags.top > t->net->num_classes)
        return DDP_ERR(DDP_BAD_INPUT, "--top %lld: the net has %d class%s, so at most --top %d",
                       (long long)t->flags.top, t->net->num_classes, t->net->num_classes == 1 ? "" : "es",
                       t->net->num_classes);
    const DdpDataOptions options = data_options(t);
    DDP_CHECK(ddp_data_load_inputs(t->flags.predict, &options, &t->test));
    DDP_CHECK(check_sample_shape(t->net, &t->test));
    DDP_CHECK(ddp_device_open(t->dist.topo.local_rank, t->dist.topo.local_world_size, &t->stream));
    t->device_open = 1;
    DDP_CHECK(allocate(t));
    fill_ctx(t);
    DDP_CHECK(init_weights(t));

    int k = t->net->num_classes;
    int64_t batch = t->cfg.batch;
    float *scores = malloc((size_t)t->max_batch * (size_t)k * sizeof(float));
    double *work = malloc((size_t)k * sizeof(double));
    DdpStatus s = scores && work ? DDP_OK : DDP_ERR(DDP_FAIL, "out of memory: a batch of scores");
    /* Each line goes out whole, in a write of its own (line-buffered, in a
     * buffer that holds the longest): Ctrl-C or a kill leaves whole lines,
     * where a full buffer would have been written up to anywhere in one. */
    static char line_buffer[DDP_TOP_CLASSES_LINE_MAX];
    fflush(stdout);
    setvbuf(stdout, line_buffer, _IOLBF, sizeof line_buffer);
    for (int64_t start = 0; s == DDP_OK && start < t->test.n; start += batch) {
        int n = (int)(t->test.n - start < batch ? t->test.n - start : batch);
        for (int i = 0; i < n; i++)
            t->eval_ids[i] = start + i;
        s = stage_batch(t, &t->test, t->eval_ids, n, -1, NULL);
        if (s == DDP_OK) {
            t->net->eval_step(&t->ctx, n); /* its loss is against label 0: not used */
            s = ddp_step_status(&t->ctx);
        }
        if (s == DDP_OK)
            s = ddp_ops_status(t->ops);
        if (s == DDP_OK)
            s = ddp_copy_to_host(scores, device_scores(t), (size_t)n * (size_t)k * sizeof(float), t->stream);
        for (int i = 0; s == DDP_OK && i < n; i++)
            ddp_top_classes_print(stdout, start + i, scores + (int64_t)i * k, k, (int)t->flags.top, t->flags.json,
                                  work);
    }
    free(scores);
    free(work);
    if (s == DDP_OK && (fflush(stdout) != 0 || ferror(stdout)))
        s = DDP_ERR(DDP_FAIL, "cannot write the predictions to standard output");
    return s;
}

/* The training stats summed over ranks since they were last taken, added to
 * E's loss sums: at reports, and where a checkpoint keeps the sums. Zeroes
 * them on the device. A collective: every rank at the same step. */
static DdpStatus take_stats(Trainer *t, EpochState *e)
{
    double s[NSTATS];
    DDP_CHECK(read_stats(t, t->train_stats, s, 1));
    e->loss.sum += s[0];
    e->loss.samples += s[2];
    e->span_loss.sum += s[0];
    e->span_loss.samples += s[2];
    return DDP_OK;
}

static double mean_loss(DdpLossSum l) { return l.samples > 0 ? l.sum / l.samples : NAN; }

/* A report of KIND: reads the training stats, evaluates, and prints and
 * logs. LEFT_OUT: one that a stop left out, made by the resumed run
 * (report_left_out): its loss and evaluation are the stopped run's, its
 * time and throughput not known. */
static DdpStatus report(Trainer *t, EpochState *e, ReportKind kind, int left_out)
{
    DDP_CHECK(take_stats(t, e));
    double read_at = ddp_now();
    DDP_CHECK(check_loss(t, e->span_loss.sum, e->epoch));

    DdpReport r = {
        .epoch = e->epoch + 1,
        .epochs = t->cfg.epochs,
        .step = t->step,
        .lr = t->lr,
        .evaluated = 1,
    };
    r.loss = mean_loss(kind == REPORT_EPOCH ? e->loss : e->span_loss);
    /* a stop's left-out epoch report kept the epoch's mean alone */
    r.span_loss = e->span_loss.samples > 0 ? mean_loss(e->span_loss) : r.loss;
    r.untimed = left_out;
    if (kind == REPORT_EPOCH && !left_out) {
        double trained = read_at - e->start - e->report_seconds;
        r.samples_per_s = trained > 0 ? (double)e->samples / trained : 0;
        t->train_seconds += trained;
        t->train_samples += e->samples;
    } else if (!left_out) {
        double trained = read_at - e->span_start;
        r.samples_per_s = trained > 0 ? (double)e->span_samples / trained : 0;
    }
    DDP_CHECK(evaluate(t, &r.test_loss, &r.test_acc, NULL));
    double done = ddp_now();
    r.seconds = done - e->start;
    r.data_wait_s = e->data_wait;
    DDP_CHECK(kind == REPORT_EVAL ? ddp_progress_eval(&t->progress, &r) : ddp_progress_epoch(&t->progress, &r));
    e->report_seconds += done - read_at;
    e->span_start = done;
    e->span_samples = 0;
    /* An epoch's end starts another EpochState; one that --max-steps ends
     * keeps its span for the checkpoint after it (checkpoint_run): the run
     * that goes on reports it at its next --eval-every point. */
    if (kind == REPORT_EVAL)
        e->span_loss = (DdpLossSum){0, 0};
    t->last_progress = done;
    return DDP_OK;
}

/* The terminal's progress line: the epoch's running loss so far (the stats
 * are read but not zeroed), throughput, and the time left in the epoch, at
 * the pace of the batches this run trained in it (those from FIRST_BATCH:
 * a resumed run's first epoch has BATCHES_DONE from before). */
static DdpStatus show_progress(Trainer *t, EpochState *e, int64_t first_batch, int64_t batches_done,
                               int64_t batches)
{
    double s[NSTATS];
    DDP_CHECK(read_stats(t, t->train_stats, s, 0));
    const DdpLossSum so_far = {e->loss.sum + s[0], e->loss.samples + s[2]};
    DDP_CHECK(check_loss(t, so_far.sum, e->epoch));
    double at = ddp_now(), trained = at - e->start - e->report_seconds;
    double per_batch = batches_done > first_batch ? trained / (double)(batches_done - first_batch) : 0;
    DdpRankTimes mine;
    ddp_times_row(&t->times, &mine);
    double step_ms = ddp_times_step_ms(&mine);
    ddp_progress_update(&t->progress, e->epoch + 1, t->cfg.epochs, batches_done, batches,
                        mean_loss(so_far), trained > 0 ? (double)e->samples / trained : 0,
                        per_batch * (double)(batches - batches_done),
                        step_ms > 0 ? ddp_times_ms(&mine, DDP_PHASE_DATA) / step_ms : 0);
    t->last_progress = at;
    return DDP_OK;
}

/* ---- the loop -------------------------------------------------------------------- */

/* The order-free sums (exact_sum.h) take at most 2^DDP_EXACT_MAX_COUNT_BITS
 * parts: a step's global batches together. Checked once, at start-up. A
 * rank's part of a step is its --no-sync-every batches, or its share of the
 * epoch where that is smaller (a step ends with its epoch). The GPU build's
 * sums are floats. */
static DdpStatus check_sum_count(const Trainer *t)
{
    if (ddp_device_is_gpu())
        return DDP_OK;
    const int64_t most = (int64_t)1 << DDP_EXACT_MAX_COUNT_BITS;
    const int64_t k = t->flags.no_sync_every, share = t->sampler.num_samples;
    const int64_t per_rank = t->cfg.batch > share / k ? share : t->cfg.batch * k;
    if (per_rank > most / t->dist.world)
        return DDP_ERR(DDP_BAD_INPUT,
                       "a step of %lld samples (%lld per rank x %d rank%s) is more than the %lld the CPU build's "
                       "exact gradient sums allow", (long long)(per_rank * t->dist.world), (long long)per_rank,
                       t->dist.world, t->dist.world == 1 ? "" : "s", (long long)most);
    return DDP_OK;
}

/* The global step the run ends at: --max-steps, else none (INT64_MAX). */
static int64_t step_limit(const Trainer *t)
{
    return t->flags.max_steps < 0 ? INT64_MAX : t->flags.max_steps;
}

/* DistributedSampler shuffles epoch E by seed + E, which PyTorch's
 * manual_seed refuses past 2^64 - 1 ("Overflow when unpacking long"); the
 * sampler here would wrap to seed 0's order instead. So a seed that close
 * to the top (ddp_seed_most) is refused where the run shuffles and gets to
 * such an epoch, naming where the seed came from: --seed, or the net's
 * train { } (which ddpc held to the net's own epochs). */
static DdpStatus check_seed(const Trainer *t)
{
    const uint64_t seed = t->cfg.seed;
    if (!t->flags.shuffle || seed == 0 || t->steps_per_epoch <= 0)
        return DDP_OK;
    const uint64_t first_past = UINT64_MAX - seed + 1; /* 0-based: the first epoch past the top */
    const uint64_t steps = (uint64_t)step_limit(t);
    /* epoch E's first step is E x steps_per_epoch (0-based), trained when
     * fewer than STEPS, and within --epochs */
    const int reached = (uint64_t)t->cfg.epochs > first_past && steps > 0 &&
                        (steps - 1) / (uint64_t)t->steps_per_epoch >= first_past;
    if (!reached)
        return DDP_OK;
    return DDP_ERR(DDP_BAD_INPUT, "%s %llu: DistributedSampler shuffles each epoch by the seed plus the epochs "
                   "before it, which passes 2^64 - 1 at epoch %llu, where PyTorch refuses it; give a seed of at most "
                   "%llu for %lld epochs", t->flags.given[DDP_FLAG_SEED] ? "--seed" : "the net's seed",
                   (unsigned long long)seed, (unsigned long long)first_past + 1,
                   (unsigned long long)ddp_seed_most(t->cfg.epochs), (long long)t->cfg.epochs);
}

/* A training batch in which a batchnorm would normalize a single value per
 * channel (DdpNet.batchnorm_values_*): its output would be its bias alone
 * and its running variance that batch's 0. PyTorch refuses such a batch
 * when it comes, mid-epoch; here the run is refused before it trains. The
 * batches are each rank's full one and an epoch's last, where the steps
 * this run trains (from t->step, where it resumed, to its limit) reach one
 * (the sampler gives every rank as many samples); a synchronised batchnorm
 * sees all ranks'. */
static DdpStatus check_batchnorm_values(const Trainer *t)
{
    const DdpNet *net = t->net;
    const int64_t batch = t->cfg.batch, per_rank = t->sampler.num_samples;
    const int64_t first = t->step, end = step_limit(t), per_epoch = t->steps_per_epoch;
    if (first >= end || per_epoch <= 0 || first / per_epoch >= t->cfg.epochs)
        return DDP_OK; /* no training batch */
    /* the last step of FIRST's epoch (0-based), which holds its last batch */
    const int64_t last_step = (first / per_epoch + 1) * per_epoch - 1;
    const int reaches_last = last_step < end;
    const int64_t sizes[2] = {per_rank < batch ? per_rank : batch, reaches_last ? per_rank % batch : 0};
    for (int last = 0; last < 2; last++) {
        const int64_t n = sizes[last];
        const int single = n > 0 && ((net->batchnorm_values_local == 1 && n == 1) ||
                                     (net->batchnorm_values_synced == 1 && n * t->dist.world == 1));
        if (!single)
            continue;
        char which[160] = "a training batch of 1 sample", stop[160] = "";
        if (last || per_rank < batch)
            snprintf(which, sizeof which, "an epoch's last training batch, which holds 1 sample (%lld a rank an "
                     "epoch, batch %lld)", (long long)per_rank, (long long)batch);
        /* a resumed run keeps its checkpoint's global batch; it can stop
         * first, where it has a step to train before that batch */
        if (last && first > 0 && last_step > first)
            snprintf(stop, sizeof stop, "; or, as this run resumes after step %lld, stop it before that batch with "
                     "--max-steps %lld", (long long)first, (long long)last_step);
        return DDP_ERR(DDP_BAD_INPUT, "a batchnorm of net '%s' whose input has one value per channel in a sample "
                       "(flat, or 1x1) would normalize a single value in %s; PyTorch refuses such a batch "
                       "(\"Expected more than 1 value per channel when training\"): give a batch size (--batch-size "
                       "or --global-batch) that leaves no batch of one sample%s", net->name, which, stop);
    }
    return DDP_OK;
}

/* Samples in this rank's batch B of an epoch of N_SAMPLES, BATCH a batch:
 * all of them but in the epoch's last batch. */
static int64_t batch_samples(int64_t b, int64_t batch, int64_t n_samples)
{
    return n_samples - b * batch < batch ? n_samples - b * batch : batch;
}

/* The windows of the step whose first batch is FIRST (of BATCHES this
 * epoch, each of up to BATCH samples of N_SAMPLES per rank): its batches'
 * samples, all ranks together, and its smallest batch's, which only an
 * epoch's last batch can make smaller. The same for every rank, and for one
 * rank with the same global batches. */
static void set_step_windows(const Trainer *t, int64_t first, int64_t batches, int64_t batch, int64_t n_samples)
{
    const int64_t end = first + t->flags.no_sync_every < batches ? first + t->flags.no_sync_every : batches;
    int64_t parts = 0, smallest = INT64_MAX;
    for (int64_t b = first; b < end; b++) {
        const int64_t n = batch_samples(b, batch, n_samples);
        parts += n * t->dist.world;
        smallest = n * t->dist.world < smallest ? n * t->dist.world : smallest;
    }
    if (parts > 0)
        ddp_exact_windows_set(smallest, parts);
}

/* A sample's part too large for its exact sums' window has made its sum
 * NaN: the run is diverging. Stops it here, saying so, rather than at the
 * NaN loss a step later. */
static DdpStatus check_sum_window(const Trainer *t)
{
    double part = 0.0;
    const DdpExactWindow *w = &ddp_grad_window;
    if (!ddp_exact_overflowed(&part, &w))
        return DDP_OK;
    return DDP_ERR(DDP_FAIL,
                   "at step %lld a sample's part of a %s was %g, beyond the exact sums' limit of 2^%d "
                   "(about %g): training is diverging; a lower --lr may help%s",
                   (long long)t->step + 1, w->what, part, w->top, w->limit,
                   /* before any update has had time to grow, the scale is the data's */
                   t->step < 10 ? " (this early, the data's scale is the likelier cause: normalize it)" : "");
}

/* Every rank's times since the last call, gathered; rank 0 logs them and
 * names a straggler. Every rank calls it after the same steps. */
static DdpStatus log_rank_times(Trainer *t)
{
    if (t->times.steps == 0) /* the same on every rank: they take the same steps */
        return DDP_OK;
    DdpRankTimes mine, *all = calloc((size_t)t->dist.world, sizeof *all);
    if (!all)
        return DDP_ERR(DDP_FAIL, "out of memory");
    ddp_times_row(&t->times, &mine);
    DdpStatus st = ddp_dist_gather_times(&t->dist, &mine, all);
    int straggler;
    if (st == DDP_OK && t->dist.rank == 0)
        st = ddp_progress_rank_times(&t->progress, t->step, all, t->dist.world, &straggler);
    free(all);
    ddp_times_reset(&t->times);
    return st;
}

/* One epoch. With --no-sync-every K, K batches make one optimizer step: the
 * first K-1 accumulate their gradients locally (DDP's no_sync), the K-th adds
 * its own and the sum is all-reduced once. */
static DdpStatus train_epoch(Trainer *t, int64_t epoch, int64_t first_batch, int64_t max_steps)
{
    const DdpNet *net = t->net;
    int64_t batch = t->cfg.batch, n_samples = t->sampler.num_samples;
    int64_t k = t->flags.no_sync_every;
    int64_t batches = (n_samples + batch - 1) / batch;
    if (t->loader) { /* the workers read the order the sampler rewrites */
        DDP_CHECK(release_held(t));
        ddp_loader_stop(t->loader);
    }
    if (t->resident) /* the last epoch's copy of the order */
        DDP_CHECK(ddp_event_wait(t->order_copied));
    DDP_CHECK(ddp_sampler_epoch(&t->sampler, epoch, t->order));
    if (t->resident) {
        DDP_CHECK(ddp_copy_to_device(t->order_on_device, t->order, (size_t)n_samples * sizeof *t->order, t->stream));
        DDP_CHECK(ddp_event_record(t->order_copied, t->stream));
    }
    if (t->loader)
        ddp_loader_start(t->loader, epoch, t->order, n_samples, first_batch);
    EpochState *e = &t->epoch_state;
    *e = (EpochState){.epoch = epoch, .start = ddp_now()};
    e->span_start = e->start;
    if (first_batch > 0) { /* resumed inside the epoch: its loss so far */
        e->loss = t->resumed.epoch_loss;
        e->span_loss = t->resumed.span_loss;
    }

    int64_t b = first_batch;
    for (; b < batches && t->step < max_steps; b++) {
        int64_t first = b * batch;
        int n = (int)batch_samples(b, batch, n_samples);
        int sync = (b + 1) % k == 0 || b + 1 == batches;
        if (b % k == 0)
            set_step_windows(t, b, batches, batch, n_samples);
        ddp_times_enter(&t->times, DDP_PHASE_DATA);
        DDP_CHECK(stage_training_batch(t, epoch, b, first, n, &e->data_wait));
        ddp_times_test_delay(t->dist.rank);
        /* DDP's broadcast_buffers: rank 0's running statistics for everyone */
        if (ddp_pg_backend(t->dist.pg) != DDP_PG_NONE && net->n_buffer_floats) {
            ddp_times_enter(&t->times, DDP_PHASE_ALLREDUCE);
            ddp_pg_purpose(t->dist.pg, DDP_PG_FOR_BUFFERS);
            DDP_CHECK(ddp_pg_broadcast(t->dist.pg, t->buffers, (size_t)net->n_buffer_floats, DDP_F32, 0));
        }
        ddp_signals_note_activity(DDP_ACTIVITY_TRAINING, epoch, t->step);
        ddp_signals_test_stop(t->step);
        DdpStepScalars scalars = {
            .step = t->step,
            .epoch = epoch,
            .lr = (float)ddp_schedule_lr(&t->cfg, t->step, epoch, t->steps_per_epoch),
        };
        DDP_CHECK(ddp_device_write(t->step_scalars, &scalars, sizeof scalars, t->stream));
        t->epoch = epoch;
        t->ctx.accumulate = b % k != 0;
        DdpStepWork work = {.net = net, .ctx = t->ctx, .reducer = t->reducer, .times = &t->times, .n = n,
                            .sync = sync};
        DDP_CHECK(ddp_step_graphs_run(t->graphs, &work));
        DDP_CHECK(check_sum_window(t));
        t->times.samples += n;
        if (sync) {
            /* the vote is a collective, which on GPUs may wait for the step before */
            ddp_times_enter(&t->times, DDP_PHASE_ALLREDUCE);
            DDP_CHECK(ddp_pg_stop_vote(t->dist.pg, ddp_signals_stop_asked(), &t->stopped));
            ddp_times_enter(&t->times, DDP_PHASE_OUTSIDE);
            t->times.steps++;
            t->step++;
            t->lr = scalars.lr;
            /* a stop agreed on the run's last step: the run ends as it would have */
            if (t->step >= max_steps || (epoch + 1 == t->cfg.epochs && b + 1 == batches))
                t->stopped = 0;
            if (t->flags.log_every > 0 && t->step % t->flags.log_every == 0)
                DDP_CHECK(log_rank_times(t));
        }
        ddp_times_enter(&t->times, DDP_PHASE_OUTSIDE);
        /* Host-side flags: polling them costs no sync. */
        DDP_CHECK(ddp_ops_status(t->ops));
        if (t->dist.pg)
            DDP_CHECK(ddp_pg_status(t->dist.pg));
        /* every rank trains as many samples per step: the job's throughput */
        e->samples += (int64_t)n * t->dist.world;
        e->span_samples += (int64_t)n * t->dist.world;
        if (t->stopped) { /* the step's report, if any, is left to the resumed run (report_left_out) */
            DDP_CHECK(save_checkpoint(t));
            /* No rank may exit before rank 0 has written it: under mpirun the
             * first to exit ends the others. */
            if (t->dist.pg)
                DDP_CHECK(ddp_pg_barrier(t->dist.pg));
            ddp_signals_stopping();
            return DDP_OK;
        }

        int last = b + 1 == batches || t->step >= max_steps;
        if (sync && eval_point(t, t->step) && !last)
            DDP_CHECK(report(t, e, REPORT_EVAL, 0));
        else if (t->progress.tty && ddp_now() - t->last_progress >= PROGRESS_INTERVAL)
            DDP_CHECK(show_progress(t, e, first_batch, b + 1, batches));
        /* after the step's --eval-every report; an epoch's last step saves
         * after the epoch's, below. So only a stop's checkpoint comes before
         * a report of its step (checkpoint_run), and the newest checkpoint
         * of a run that ended does not hold one left out. (A step that
         * --max-steps ends inside an epoch saves here, before its epoch's
         * report: the uninterrupted run makes none there.) */
        if (sync && b + 1 < batches && t->flags.save_every > 0 && t->step % t->flags.save_every == 0)
            DDP_CHECK(save_checkpoint(t));
    }
    if (t->flags.log_every == 0)
        DDP_CHECK(log_rank_times(t));
    if (b > first_batch)
        DDP_CHECK(report(t, e, REPORT_EPOCH, 0));
    if (t->flags.save_every == 0 || t->step % t->flags.save_every == 0)
        DDP_CHECK(save_checkpoint(t));
    return DDP_OK;
}

/* The report that a stop left out at the step this run resumed from, if
 * the checkpoint holds one (checkpoint_run): the end of the epoch before
 * EPOCH (FIRST_BATCH 0), or an --eval-every point inside EPOCH. The weights
 * are those the run that never stopped evaluated there, and the checkpoint
 * kept the loss the report covers and the step's learning rate, so the
 * report is that run's but for the time and throughput, the stopped run's.
 * It leaves t->epoch_state as that run's after its report. Resumed from
 * --save's newest, the next save writes even at this step: a run that
 * trains no step then leaves a checkpoint without the report, which a
 * later resume does not make again. */
static DdpStatus report_left_out(Trainer *t, int64_t epoch, int64_t first_batch)
{
    const DdpLeftOut kind = (DdpLeftOut)t->resumed.left_out;
    /* (a kind that does not fit where the step falls, as with other data, is not made) */
    const int at_end = first_batch == 0 && t->step > 0;
    if (!(kind == DDP_LEFT_OUT_EPOCH && at_end && epoch <= t->cfg.epochs) &&
        !(kind == DDP_LEFT_OUT_EVAL && !at_end && epoch < t->cfg.epochs))
        return DDP_OK;
    EpochState *e = &t->epoch_state;
    *e = (EpochState){
        .epoch = at_end ? epoch - 1 : epoch,
        .start = ddp_now(),
        .loss = at_end ? t->resumed.left_out_loss : t->resumed.epoch_loss,
        .span_loss = at_end ? (DdpLossSum){0, 0} : t->resumed.left_out_loss,
    };
    e->span_start = e->start;
    t->epoch = e->epoch;
    t->lr = t->resumed.left_out_lr;
    DDP_CHECK(report(t, e, at_end ? REPORT_EPOCH : REPORT_EVAL, 1));
    if (!t->flags.resume_path) /* not a file named, which --save's of this step need not be */
        t->saved_step = -1;
    return DDP_OK;
}

static DdpStatus train(Trainer *t)
{
    int64_t max_steps = step_limit(t);
    t->last_progress = ddp_now();
    ddp_times_init(&t->times, t->dist.whereabouts, &t->step);
    /* A resumed run starts inside the epoch its step count falls in. */
    int64_t first_epoch = t->step / t->steps_per_epoch;
    int64_t first_batch = t->step % t->steps_per_epoch * t->flags.no_sync_every;
    t->first_step = t->step;
    DDP_CHECK(report_left_out(t, first_epoch, first_batch));
    for (int64_t epoch = first_epoch; epoch < t->cfg.epochs && t->step < max_steps && !t->stopped; epoch++)
        DDP_CHECK(train_epoch(t, epoch, epoch == first_epoch ? first_batch : 0, max_steps));
    if (t->stopped)
        return DDP_OK;
    /* the last state is always kept, whatever --save-every says */
    DDP_CHECK(save_checkpoint(t));
    double elapsed = ddp_now() - t->started;
    ddp_progress_summary(&t->progress, t->step, elapsed,
                         t->train_seconds > 0 ? (double)t->train_samples / t->train_seconds : 0);
    return DDP_OK;
}

/* Rank 0, after a stop the ranks agreed on: what was kept, in the log too,
 * and how to go on. Under a launcher of ours the launcher says the last,
 * from the command the user typed. */
static DdpStatus say_stopped(Trainer *t, int argc, char **argv)
{
    if (t->dist.rank != 0)
        return DDP_OK;
    char name[32], kept[4200];
    /* the signal rank 0 got itself, else the one the ranks agreed on */
    ddp_signal_name(ddp_signals_stop_asked() ? ddp_signals_stop_asked() : t->stopped, name, sizeof name);
    if (t->flags.save)
        snprintf(kept, sizeof kept, "saved %s", t->saved_path);
    else
        snprintf(kept, sizeof kept, "nothing saved (no --save DIR)");
    fprintf(stderr, "%s" DDP_SIGNALS_STOPPED_AFTER "%lld (epoch %lld of %lld) on %s: %s\n", t->prog, (long long)t->step,
            (long long)t->epoch + 1, (long long)t->cfg.epochs, name, kept);
    if (t->flags.save && !getenv(DDP_LAUNCHER_ENV)) {
        char command[4096];
        ddp_flags_resume_command(argc, argv, command, sizeof command);
        if (t->dist.topo.launch == DDP_LAUNCH_NONE)
            fprintf(stderr, "%s: to resume: %s\n", t->prog, command);
        else
            fprintf(stderr, "%s: to resume, start the ranks as before with these flags: %s\n", t->prog, command);
    }
    return ddp_progress_stop(&t->progress, name, t->step, t->flags.save ? t->saved_path : NULL);
}

/* ---- ddp_main ------------------------------------------------------------------- */

/* A global batch (`batch N global`, --global-batch N): each of the WORLD
 * ranks takes N / WORLD samples a step, so that every world size that
 * divides N takes the same steps (the world-size invariance of the CPU
 * build makes them the same bits). One that does not divide N is refused,
 * naming the world sizes that do. */
static DdpStatus share_global_batch(DdpTrainConfig *cfg, int world)
{
    enum { LISTED_MOST = 12 };
    if (!cfg->batch_global)
        return DDP_OK;
    const int64_t global = cfg->batch;
    if (global % world == 0) {
        cfg->batch = global / world;
        return DDP_OK;
    }
    char divisors[256] = "";
    size_t used = 0;
    int listed = 0, more = 0;
    for (int64_t d = 1; d <= global && !more; d++)
        if (global % d == 0) {
            if (listed == LISTED_MOST)
                more = 1;
            else
                used += (size_t)snprintf(divisors + used, sizeof divisors - used, "%s%lld", listed++ ? ", " : "",
                                         (long long)d);
        }
    /* the nearest multiples of the world size, at least one of it */
    const int64_t below = global / world * world, first = below > 0 ? below : world;
    return DDP_ERR(DDP_BAD_INPUT, "the global batch %lld does not divide among %d ranks: run on %s%s ranks (the "
                   "divisors of %lld), or give a --global-batch that %d divides, such as %lld or %lld",
                   (long long)global, world, divisors, more ? ", ..." : "", (long long)global, world,
                   (long long)first, (long long)(first + world));
}

static DdpStatus run(Trainer *t, int argc, char **argv)
{
    const DdpNet *net = t->net;
    ddp_flags_init(&t->flags, &net->train);
    DDP_CHECK(ddp_flags_parse(&t->flags, argc, argv));
    ddp_flags_allow_tf32(&t->flags, getenv("DDP_ALLOW_TF32"), ddp_device_is_gpu());
    if (t->flags.help) {
        ddp_flags_usage(stdout, t->prog, net->name, &net->train);
        errno = 0;
        if (fflush(stdout) != 0 || ferror(stdout))
            return DDP_ERR(DDP_FAIL, "cannot write the help to standard output (%s)",
                           errno ? strerror(errno) : "a write failed");
        return DDP_OK;
    }
    t->cfg = net->train;
    ddp_flags_apply(&t->flags, &t->cfg);
    int c, h, w;
    sample_chw(net, &c, &h, &w);
    DDP_CHECK(ddp_augment_check(&net->data, c, h, w));
    t->data = t->flags.augment ? net->data : ddp_augment_fixed_part(&net->data);
    DDP_CHECK(ddp_augment_choose_device(ddp_device_is_gpu(), &t->input_on_device));
    if (t->cfg.batch < 1 || t->cfg.batch > DDP_FLAGS_MAX_BATCH || t->cfg.epochs < 1)
        return DDP_ERR(DDP_BAD_INPUT, "the net's train block asks for batch %lld and %lld epochs; "
                       "give %s (1 to %d) and --epochs", (long long)t->cfg.batch, (long long)t->cfg.epochs,
                       t->cfg.batch_global ? "--global-batch" : "--batch-size", DDP_FLAGS_MAX_BATCH);
    /* Who this process is, and whether it starts ranks of its own: decided
     * first, so that a launch refused leaves nothing behind (--save DIR). */
    DDP_CHECK(ddp_dist_topology(&t->dist, &t->flags));
    int nproc;
    DDP_CHECK(ddp_dist_ranks_to_launch(&t->dist, &t->flags, &nproc));
    DDP_CHECK(check_outputs(t));

    /* Several ranks: started here (the parent only waits for them), or we are one. */
    if (nproc > 0) {
        t->launched = 1;
        t->launch_status = ddp_dist_launch(nproc, argc, argv, &t->flags);
        return DDP_OK;
    }
    if (t->flags.predict)
        return predict(t);
    int rank = t->dist.rank, world = t->dist.world;
    ddp_signals_install(t->prog, rank, world,
                        t->dist.topo.launch == DDP_LAUNCH_MPIRUN || t->dist.topo.launch == DDP_LAUNCH_SPAWN,
                        rank == 0 && !getenv(DDP_LAUNCHER_ENV));
    /* An evaluation has nothing to save: a pipe whose reader has ended
     * (`| head`) ends it as it would any filter (as it ends --predict,
     * which starts no handlers), and its printed result is its product */
    if (t->flags.eval_only)
        ddp_signals_pipe_as_inherited();
    DDP_CHECK(share_global_batch(&t->cfg, world));

    DDP_CHECK(load_data(t));
    /* DistributedSampler(train, num_replicas=world, rank, shuffle, seed, drop_last=False) */
    DDP_CHECK(ddp_sampler_init(&t->sampler, t->train.n, world, rank, t->flags.shuffle, (int64_t)t->cfg.seed, 0));
    int64_t batches = (t->sampler.num_samples + t->cfg.batch - 1) / t->cfg.batch;
    t->batches_per_epoch = batches;
    t->steps_per_epoch = (batches + t->flags.no_sync_every - 1) / t->flags.no_sync_every;
    if (!t->flags.eval_only) { /* an evaluation sums no gradients, and shuffles nothing */
        DDP_CHECK(check_sum_count(t));
        DDP_CHECK(check_seed(t));
    }

    DDP_CHECK(ddp_device_open(t->dist.topo.local_rank, t->dist.topo.local_world_size, &t->stream));
    t->device_open = 1;
    DDP_CHECK(allocate(t));
    fill_ctx(t);
    char resident_why[160] = "";
    if (!t->flags.eval_only) {
        DDP_CHECK(make_resident(t, resident_why, sizeof resident_why));
        DDP_CHECK(start_loader(t));
    }
    DDP_CHECK(ddp_dist_join(&t->dist, &t->flags, t->stream));
    char kernels[96];
    ddp_ops_describe_kernels(t->ops, kernels, sizeof kernels);
    /* a step that waits inside itself cannot be captured; and every rank
     * captures its collectives, or none does */
    const int graphs_here = t->flags.cuda_graph && !t->ctx.debug && !ddp_sync_launches(getenv("DDP_SYNC_LAUNCHES"));
    DDP_CHECK(ddp_dist_check_same(&t->dist, net, &t->flags, &t->train, &t->test, kernels, graphs_here));
    const int graphs = graphs_here && t->dist.call_by_call_rank < 0;
    /* Rank 0 speaks for the run; the others only say what goes wrong. The
     * log (emptied unless resuming) and TensorBoard's directory are opened
     * once the checks of --init and --save (its lock, the checkpoints it
     * holds) have passed: a run refused there leaves an earlier log as it
     * was, even one that another run is still writing. */
    ddp_progress_init(&t->progress, t->prog, stdout, t->flags.quiet || rank != 0);
    t->progress.out_is_result = t->flags.eval_only;
    DDP_CHECK(init_weights(t));
    DDP_CHECK(resume(t));
    if (!t->flags.eval_only) /* once the step a run resumes at is known */
        DDP_CHECK(check_batchnorm_values(t));
    DDP_CHECK(share_conv_choices(t));
    if (t->flags.tensorboard && rank == 0)
        DDP_CHECK(ddp_tensorboard_open(t->flags.tensorboard, &t->tb));
    if (t->tb && t->flags.resume) /* a crashed run's points past the checkpoint (or all: step 0) come again */
        DDP_CHECK(ddp_tensorboard_resumed(t->tb, t->step));
    if (t->flags.log && rank == 0)
        DDP_CHECK(ddp_jsonlog_open(t->flags.log, t->flags.resume, &t->log));
    if (t->resuming[0])
        ddp_progress_note(&t->progress, "%s", t->resuming);
    ddp_progress_attach(&t->progress, t->log, t->tb);
    DDP_CHECK(ddp_dist_broadcast_weights(&t->dist, net, t->params, t->buffers, t->opt_state, t->counts));
    /* world > 1, or one rank on a real NCCL communicator (--backend nccl) */
    if (ddp_pg_backend(t->dist.pg) != DDP_PG_NONE) {
        DDP_CHECK(ddp_reducer_create(&t->reducer, t->dist.pg, net, t->grads,
                                     t->flags.given[DDP_FLAG_BUCKET_CAP_MB] ? t->flags.bucket_cap_mb : -1.0));
        /* the benchmark's "without overlap": every bucket after the whole backward */
        const char *overlap = getenv("DDP_OVERLAP");
        if (overlap && strcmp(overlap, "0") == 0)
            ddp_reducer_set_overlap(t->reducer, 0);
        DDP_CHECK(ddp_reducer_note_places(t->reducer, t->dist.whereabouts));
        t->ctx.grad_ready = ddp_reducer_grad_ready;
        t->ctx.reducer = t->reducer;
        t->ctx.pg = t->dist.pg;
    }
    DDP_CHECK(ddp_step_graphs_create(&t->graphs, graphs, t->dist.pg, t->stream));

    char device[128];
    ddp_device_describe(device, sizeof device);
    char ranks[64] = "";
    if (world > 1)
        snprintf(ranks, sizeof ranks, " x %d ranks", world);
    char data[96];
    data_text(&t->train, data, sizeof data);
    char plan[96] = "the test set only (--eval-only)";
    if (!t->flags.eval_only)
        snprintf(plan, sizeof plan, "%lld step%s per epoch, %lld epoch%s", (long long)t->steps_per_epoch,
                 t->steps_per_epoch == 1 ? "" : "s", (long long)t->cfg.epochs, t->cfg.epochs == 1 ? "" : "s");
    ddp_progress_note(&t->progress, "%s: %lld train / %lld test samples of %s, batch %lld per rank (%lld global%s), "
                      "%s, on %s%s", net->name, (long long)t->train.n, (long long)t->test.n, data,
                      (long long)t->cfg.batch, (long long)(t->cfg.batch * world), t->cfg.batch_global ? ", as set" : "",
                      plan, device, ranks);
    const char *not_invariant = ddp_device_not_bit_invariant();
    if (!not_invariant)
        not_invariant = ddp_dist_not_bit_invariant(&t->dist);
    if (not_invariant && world > 1)
        ddp_progress_note(&t->progress, "note: %s", not_invariant);
    say_gpus_left_idle(t);
    char augment[256];
    ddp_augment_describe(&t->data, augment, sizeof augment);
    if (augment[0])
        ddp_progress_note(&t->progress, "data { }: %s%s%s, %s", augment,
                          ddp_augment_is_random(&t->data) ? "; the crop and flips in training only" : "",
                          ddp_augment_is_random(&net->data) && !ddp_augment_is_random(&t->data)
                              ? " (--no-augment: no crop or flips)" : "",
                          t->input_on_device ? "on the device" : "on the host");
    if (!t->flags.eval_only && (t->resident || ddp_device_is_gpu())) {
        const char *path = t->resident ? "the training set held on the device, each batch gathered there"
                           : ddp_batch_upload_overlaps(t->upload)
                               ? "each training batch copied from the host on a stream of its own, during the step before"
                               : "each training batch copied from the host";
        ddp_progress_note(&t->progress, "data: %s%s%s%s", path, resident_why[0] ? " (" : "", resident_why,
                          resident_why[0] ? ")" : "");
    }
    char precision[256];
    ddp_ops_describe_precision(t->ops, precision, sizeof precision);
    if (precision[0])
        ddp_progress_note(&t->progress, "precision %s: %s", ddp_precision_name(t->cfg.precision), precision);
    if (graphs_here && !graphs && !t->flags.eval_only)
        ddp_progress_note(&t->progress, "note: every rank runs its steps call by call, as rank %d does "
                          "(--no-cuda-graph, DDP_DEBUG or DDP_SYNC_LAUNCHES there): a collective must be in a "
                          "CUDA graph on every rank or on none", t->dist.call_by_call_rank);
    if (t->ctx.debug)
        ddp_progress_note(&t->progress, "note: DDP_DEBUG=1: each layer's work is waited for and checked (slow)");
    if (ddp_device_is_gpu())
        ddp_progress_note(&t->progress, "steps: %s", graphs ? "one CUDA graph per batch shape, captured on its second step"
                                                           : "call by call, without a CUDA graph");
    DDP_CHECK(ddp_progress_start(&t->progress, net->name, data, world, t->cfg.batch, t->cfg.batch_global, graphs,
                                 not_invariant));
    const char *restart = getenv(DDP_RESTART_ENV), *cause = getenv(DDP_RESTART_CAUSE_ENV);
    if (restart)
        DDP_CHECK(ddp_progress_restart(&t->progress, strtoll(restart, NULL, 10), cause ? cause : ""));

    if (t->flags.eval_only) { /* --export: a checkpoint's weights as a weights file */
        DDP_CHECK(evaluate_only(t));
        if (t->flags.export_path && rank == 0 && !t->stopped)
            DDP_CHECK(export_weights(t));
        /* a stop keeps its own status, which a job script requeues on */
        return t->stopped ? DDP_OK : ddp_progress_lost_records(&t->progress);
    }
    DDP_CHECK(train(t));
    if (ddp_device_is_gpu()) {
        int made = ddp_step_graphs_count(t->graphs);
        ddp_progress_note(&t->progress, "steps: %d CUDA graph%s made, one per batch shape", made, made == 1 ? "" : "s");
        say_memory_taken(t);
        char fusion[256];
        ddp_ops_describe_fusion(t->ops, fusion, sizeof fusion);
        if (fusion[0])
            ddp_progress_note(&t->progress, "products: %s", fusion);
    }
    if (t->stopped)
        return say_stopped(t, argc, argv);
    ddp_signals_note_activity(DDP_ACTIVITY_FINISHING, t->epoch, t->step);
    if (world > 1) {
        DDP_CHECK(ddp_copy_to_host(t->host_params, t->params, (size_t)net->n_param_floats * sizeof(float),
                                   t->stream));
        DDP_CHECK(ddp_dist_check_identical(&t->dist, t->host_params, net->n_param_floats));
        /* On a GPU the host queues the all-reduces and never waits for them
         * (a replayed graph does not even queue them): no figure to give */
        if (ddp_device_is_gpu())
            ddp_progress_note(&t->progress, "weights identical on all %d ranks", world);
        else
            ddp_progress_note(&t->progress, "weights identical on all %d ranks; all-reduce not hidden by backward: "
                              "%.2f ms per step", world,
                              t->step > t->first_step
                                  ? 1e3 * ddp_reducer_exposed_seconds(t->reducer) / (double)(t->step - t->first_step)
                                  : 0.0);
    }
    if (t->flags.export_path && rank == 0)
        DDP_CHECK(export_weights(t));
    DDP_CHECK(ddp_device_sync(t->stream));
    return ddp_progress_lost_records(&t->progress);
}

/* Frees whatever RUN got to; the logs' close status, since losing their
 * last lines is a failure. */
static DdpStatus trainer_free(Trainer *t, int failed)
{
    ddp_reducer_destroy(t->reducer);
    ddp_step_graphs_destroy(t->graphs);
    /* A collective stuck in MPI may still write into device memory (the
     * gradients, the statistics, batchnorm's sums in the arena): then none
     * of it is freed, and the process's exit, which follows, takes it. */
    int stuck = ddp_dist_close(&t->dist, failed);
    ddp_ops_destroy(t->ops);
    /* The held batch's copy may still read its buffer; behind a stuck
     * collective it may never run, and waiting for it would hang: then the
     * loader is left to the process's exit too. */
    if (!stuck) {
        if (t->loader)
            (void)release_held(t); /* a failure here changes nothing */
        ddp_loader_destroy(t->loader);
        ddp_event_destroy(t->held_copied);
        ddp_batch_upload_destroy(t->upload); /* waits for its copies */
        ddp_device_free(t->params);
        ddp_device_free(t->grads);
        ddp_device_free(t->opt_state);
        ddp_device_free(t->buffers);
        ddp_device_free(t->arena);
        ddp_device_free(t->train_stats);
        ddp_device_free(t->eval_stats);
        ddp_device_free(t->step_scalars);
        ddp_device_free(t->order_on_device);
        ddp_resident_destroy(t->resident);
        ddp_device_free(t->batch);
        ddp_augment_device_destroy(t->input_maker);
    }
    for (int s = 0; s < SLOTS; s++) {
        ddp_host_free(t->staging[s]);
        ddp_event_destroy(t->staged[s]);
    }
    ddp_event_destroy(t->order_copied);
    if (t->device_open)
        ddp_device_close(t->stream);
    free(t->host_params);
    free(t->host_buffers);
    free(t->host_opt_state);
    free(t->counts);
    free(t->counts_written);
    ddp_host_free(t->order);
    free(t->eval_ids);
    free(t->augment_scratch);
    free(t->conv_choices);
    free(t->file_choices);
    ddp_data_free(&t->train);
    ddp_data_free(&t->test);
    DdpStatus tb = ddp_tensorboard_close(t->tb);
    DdpStatus log = ddp_jsonlog_close(t->log);
    return log != DDP_OK ? log : tb;
}

/* A standard stream the program was started without (2>&-) is opened on
 * /dev/null: the next file opened would otherwise take its number, and the
 * messages meant for stderr would land in --log or a checkpoint's lock. */
static void hold_standard_streams(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
            int null = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
            if (null >= 0 && null != fd) /* the lowest free number: FD itself, unless a lower one was free too */
                close(null);
        }
}

int ddp_main(int argc, char **argv, const DdpNet *net)
{
    hold_standard_streams();
    const char *prog = ddp_prog_name(argc > 0 ? argv[0] : NULL);
    Trainer *t = calloc(1, sizeof *t);
    if (!t) {
        fprintf(stderr, "%s: error: out of memory\n", prog);
        return DDP_FAIL;
    }
    t->net = net;
    t->prog = prog;
    t->started = ddp_now();
    t->saved_step = -1;
    t->held = -1;
    ddp_error_clear();
    /* A rank started by a launcher of ours or mpirun takes a stop asked
     * during its start-up (the launcher's SIGUSR1 would kill it) until its
     * topology is read (ddp_signals_install again, then). Any other process
     * may become a launcher, which installs its own handlers: until then a
     * signal ends it as it always did. */
    const char *rank_env = getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : getenv("RANK");
    if (getenv(DDP_LAUNCHER_ENV) && getenv("OMPI_COMM_WORLD_SIZE")) /* our launcher's, through mpirun */
        ddp_signals_mark_stops();
    if (getenv("DDP_SPAWNED") || getenv("OMPI_COMM_WORLD_SIZE"))
        ddp_signals_install(prog, rank_env ? atoi(rank_env) : 0, 2, 1, 0);
    DdpStatus st = run(t, argc, argv);
    ddp_progress_end(&t->progress);
    /* The run's own failure is the one to report, not a later one in clean-up. */
    char message[DDP_ERROR_MESSAGE_LEN], who[64] = "";
    snprintf(message, sizeof message, "%s", ddp_error_message());
    if (t->dist.world > 1)
        snprintf(who, sizeof who, "rank %d: ", t->dist.rank);
    /* Say why before tearing down: an aborted group ends the other ranks. */
    if (st != DDP_OK)
        fprintf(stderr, "%s: %serror: %s\n", prog, who, message);
    DdpStatus closed = trainer_free(t, st != DDP_OK);
    if (st == DDP_OK && closed != DDP_OK) {
        st = closed;
        fprintf(stderr, "%s: %serror: %s\n", prog, who, ddp_error_message());
    }
    if (st == DDP_OK && t->launched)
        st = (DdpStatus)t->launch_status;
    if (st == DDP_OK && t->stopped)
        st = (DdpStatus)DDP_EXIT_STOPPED;
    free(t);
    return (int)st;
}
