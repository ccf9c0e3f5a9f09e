/*
 * model.h: the contract between a generated program and the runtime.
 *
 * ddpc writes, per net, a table describing it (DdpNet: the parameters with
 * their PyTorch names and places in the flat buffers, the training defaults of
 * the .net file) and four functions that do the numeric work on the device.
 * The runtime (trainer.c) does everything else: flags, data, the epoch loop,
 * evaluation, logging, weights files, the process group and the
 * bucketed all-reduce. The generated code never parses a flag and the
 * runtime never parses a .net file.
 *
 * Memory is owned by the runtime and handed to the generated functions in a
 * DdpCtx: trainable parameters, their gradients and the optimizer state in
 * one flat buffer each (same order, each parameter starting on 16 bytes:
 * buckets.h, so a gradient bucket is a contiguous slice, and n_param_floats
 * counts the floats between parameters too), non-trainable buffers (batchnorm running statistics) in another,
 * and one activation arena whose layout ddpc planned at compile time. No
 * allocation and no host synchronisation happens inside a step.
 */
#ifndef DDPRT_MODEL_H
#define DDPRT_MODEL_H

#include <stdint.h>

#include "augment.h" // DdpDataConfig: the data { } block
#include "ops.h"     // DdpOps: convolutions and GEMMs through the vendor libraries
#include "precision.h"  // DdpPrecision
#include "status.h"  // DdpStatus
#include "step_scalars.h"  // DdpStepScalars: lr, step and epoch in device memory

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DDP_INIT_KAIMING_UNIFORM, /* PyTorch's default for conv/linear weights and biases: U(-1/sqrt(fan_in), +) */
    DDP_INIT_ONES,            /* batchnorm weight, running_var */
    DDP_INIT_ZEROS,           /* batchnorm bias, running_mean */
} DdpInit;

typedef struct {
    const char *name;     /* as in PyTorch's state_dict: conv1.weight */
    int ndim;
    int64_t shape[4];
    int64_t numel;
    int trainable;        /* 1: in params/grads/opt state; 0: in buffers */
    int64_t offset;       /* in floats, from the start of its buffer: a multiple of DDP_PARAM_ALIGN */
    int is_step_count;    /* batchnorm's num_batches_tracked: int64 in files, the
                           * number of training steps taken, not stored on the device */
    DdpInit init;
    int64_t fan_in;       /* for DDP_INIT_KAIMING_UNIFORM */
} DdpParamInfo;

typedef enum { DDP_OPT_SGD, DDP_OPT_ADAM, DDP_OPT_ADAMW } DdpOptimizer;
typedef enum { DDP_SCHED_CONSTANT, DDP_SCHED_STEP, DDP_SCHED_COSINE } DdpSchedule;

/* The train { } block of the .net file; flags override some of these. */
typedef struct {
    int64_t batch, epochs;
    DdpOptimizer optimizer;
    double lr, momentum, dampening, weight_decay;
    int nesterov;
    double beta1, beta2, eps;
    DdpSchedule schedule;
    int64_t warmup, step_every;
    double gamma;
    int64_t bucket_cap_bytes, first_bucket_bytes;
    uint64_t seed;
    int batch_global; /* `batch N global` (or --global-batch): BATCH is the global
                       * batch, which the ranks share evenly */
    DdpPrecision precision; /* of the products' operands (or --precision) */
} DdpTrainConfig;

/* What the generated functions work on. The runtime fills it; pointers are
 * device memory on a GPU build, host memory on a CPU build. */
typedef struct DdpCtx DdpCtx;
struct DdpCtx {
    DdpOps *ops;
    void *stream;             /* cudaStream_t of the step; NULL on CPU */
    float *params;            /* n_param_floats */
    /* n_param_floats gradients of net->grad_bytes each: DdpGrad (ops.h) in the
     * generated code, order-free sums of two doubles on CPUs and floats on GPUs */
    void *grads;
    float *opt_state;         /* n_param_floats * net->opt_slots */
    float *buffers;           /* n_buffer_floats */
    float *arena;             /* activations: arena_floats(max_batch) */
    int max_batch;

    /* the current batch */
    const float *x;           /* n x sample_numel, pixels in [0,1] */
    const int32_t *labels;    /* n */
    const int64_t *sample_ids;/* n: the samples' indices in the data set (dropout masks) */

    /* device accumulators, summed over steps until the runtime reads and zeroes them:
     * [0] loss summed over samples, [1] correct predictions, [2] samples */
    double *stats;

    uint64_t seed;            /* dropout masks: (seed, epoch, sample id, layer, element) */
    /* Device memory: this step's lr, step count and epoch, which kernels read
     * there rather than as arguments, so that a CUDA graph of the step
     * replays with the new ones (step_scalars.h). */
    const DdpStepScalars *step_scalars;
    /* 1: add this step's gradients to grads (no_sync); 0: overwrite. An
     * argument of the step's kernels and library calls (cuBLAS's beta), which
     * a captured step keeps: the trainer makes a CUDA graph per value. */
    int accumulate;
    /* Ranks whose gradients the all-reduce sums: at least 1 (1 alone). The loss gradient
     * is of the mean over all their samples, n * world_size, so that the sum
     * is the global batch's gradient with no division after it: the division
     * by a world size that is not a power of two would round differently from
     * one rank's division by its whole batch. */
    int world_size;

    /* Called by the backward pass as soon as parameter P's gradient is final,
     * so that its bucket's all-reduce can start. NULL: nothing to do. */
    void (*grad_ready)(DdpCtx *ctx, int param);
    void *reducer;
    /* Called by the training step between the loss and the backward pass,
     * so that the runtime can time the two (step_times.h). NULL: nothing. */
    void (*backward_begins)(DdpCtx *ctx);
    void *times;

    /* The ranks of the run, for batchnorm statistics; NULL with one rank. The
     * first collective failure is kept in status, which the runtime checks
     * after each step (the generated functions return nothing). */
    struct DdpProcessGroup *pg; /* pg.h; opaque here */
    DdpStatus status;
    /* DDP_DEBUG=1 in the environment (device_rules.h): each layer's work is
     * waited for and checked as it ends (DDP_LAYER_DONE, kernel.h) */
    int debug;
    /* the message ddp_layer_check gave a failure, kept apart from the
     * runtime's last error, which the rest of the step may overwrite */
    char layer_failure[1024];
};

typedef struct {
    const char *name;         /* `net NAME` */
    const char *hash;         /* hex digest of the net's meaning: same hash, same net */
    int sample_rank;          /* 1 (features) or 3 (C x H x W) */
    int64_t sample_shape[3];
    int64_t sample_numel;
    int num_classes;

    const DdpParamInfo *params;
    int n_params;
    int64_t n_param_floats, n_buffer_floats;
    int opt_slots;            /* optimizer state per parameter: sgd 1 (momentum), adam 2 */
    int grad_bytes;           /* sizeof(DdpGrad) where the net was compiled: 16 on CPUs, 4 on GPUs */

    DdpTrainConfig train;
    DdpDataConfig data;

    /* The activation arena for a batch of B samples: B * arena_per_sample +
     * arena_fixed floats (per-channel statistics and the like). */
    int64_t arena_per_sample, arena_fixed;
    /* Where the scores the loss reads (num_classes per sample) lie after
     * eval_step, for --eval-only: ctx->arena + logits_at * ctx->max_batch
     * (always a layer's output: ddpc refuses a net with nothing to train). */
    int64_t logits_at;

    /* Registers the library ops (convolutions, linear layers) with ctx->ops for batches of
     * up to ctx->max_batch; called once before ddp_ops_finalize. */
    DdpStatus (*plan_ops)(DdpCtx *ctx);
    /* Forward in training mode, the loss and its gradient, backward: grads
     * hold (or, with ctx->accumulate, gain) d loss / d params, the loss being
     * the mean over N * ctx->world_size samples; stats gain the batch's loss,
     * correct count and N. */
    void (*train_step)(DdpCtx *ctx, int n);
    /* Forward in evaluation mode and the loss: stats gain loss, correct, N. */
    void (*eval_step)(DdpCtx *ctx, int n);
    /* One optimizer update of params from grads with the lr and step count
     * in ctx->step_scalars. */
    void (*optimizer_step)(DdpCtx *ctx);
    /* 1: the program stores C x H x W values channels-last (ddpc --layout),
     * which takes other library kernels on a GPU, so other bits: checkpoints
     * record it (checkpoint.h) */
    int channels_last;
    /* The fewest values per channel that one sample gives a batchnorm (the
     * pixels of a plane of its input: 1 for a flat or 1x1 one), among those
     * whose statistics are the global batch's (sync) and those that are a
     * rank's (sync=off); 0 where there is none. The trainer refuses at
     * start-up a training batch in which one would see a single value, as
     * PyTorch refuses it ("Expected more than 1 value per channel"). */
    int64_t batchnorm_values_synced, batchnorm_values_local;
} DdpNet;

/* Adds COUNT doubles (a synchronised batchnorm's per-channel sums) over
 * all ranks of ctx->pg, in place; a failure is kept in ctx->status. Nothing
 * with one rank or after a failure. (model.c: generated code sees the
 * process group only through this pointer and this call.) */
void ddp_batchnorm_allreduce(DdpCtx *ctx, double *sums, size_t count);

/* DDP_DEBUG's check at the end of a layer's work in a pass (ctx->debug):
 * waits for the device, and keeps in ctx->status the first failure of the
 * layer's kernels and library calls with WHERE (the layer, its pass and its
 * .net line) before its message. Every layer is checked, so a failure found
 * here is this layer's; once one is named, no more checks. */
void ddp_layer_check(DdpCtx *ctx, const char *where);

/* For the trainer, after a generated function: ctx->status, with the
 * message ddp_layer_check gave its failure raised again (later calls in the
 * step may have recorded others since). */
DdpStatus ddp_step_status(const DdpCtx *ctx);

#ifdef __cplusplus
}
#endif

#endif
