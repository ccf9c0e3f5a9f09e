/*
 * weights.h: a net's parameters on the host: their seeded initialisation,
 * --init (load a safetensors file) and --export (write one).
 *
 * All three work on host copies laid out as the device buffers are (params:
 * n_param_floats, buffers: n_buffer_floats, each DdpParamInfo at its offset),
 * so they need no device and the trainer does the copies. Batchnorm's
 * num_batches_tracked (is_step_count) lives in neither buffer: COUNTS[i] holds
 * the count parameter i started from, and a file gets that plus the steps
 * taken (the trainer's counts make that the batches trained, as PyTorch
 * counts them: trainer.c's counted_state).
 */
#ifndef DDPRT_WEIGHTS_H
#define DDPRT_WEIGHTS_H

#include <stdint.h>

#include "model.h"        // DdpNet, DdpParamInfo
#include "safetensors.h"  // DdpSafetensors, DdpTensor
#include "status.h"       // DdpStatus

/* The largest step count a file may hold (num_batches_tracked, a checkpoint's
 * step): far beyond any run, and low enough that a count plus the steps taken
 * after loading it cannot overflow an int64_t. */
#define DDP_STEP_COUNT_MAX (INT64_MAX / 4)

/* Initialises every parameter and buffer as PyTorch does after
 * torch.manual_seed(SEED), building the modules in parameter order: conv and
 * linear weights kaiming_uniform_(a=sqrt(5)) and biases uniform(+-1/sqrt(fan_in)),
 * drawn from one mt19937 in order (so the same for every world size);
 * DDP_INIT_ONES and DDP_INIT_ZEROS as named; step counts 0. */
DdpStatus ddp_weights_init(const DdpNet *net, uint64_t seed, float *params, float *buffers, int64_t *counts);

/* Loads PATH, written by --export or by safetensors.torch.save_file(
 * model.state_dict()): every DdpParamInfo by name, F32 (or F64, converted) of
 * exactly its shape, step counts as I64 scalars; nothing else; every value
 * finite in float. DDP_BAD_INPUT naming PATH and the tensor otherwise. */
DdpStatus ddp_weights_load(const DdpNet *net, const char *path, float *params, float *buffers, int64_t *counts);

/* The loading part of ddp_weights_load, from a file already open (a
 * checkpoint holds more than weights): every DdpParamInfo by name, marked used. */
DdpStatus ddp_weights_read(const DdpNet *net, DdpSafetensors *f, float *params, float *buffers, int64_t *counts);

/* T[0..net->n_params): every parameter as a tensor to write, under its
 * PyTorch name, pointing into PARAMS and BUFFERS; step counts as I64 scalars
 * COUNTS[i] + STEPS, kept in STEPS_AT[0..n_params). */
void ddp_weights_tensors(const DdpNet *net, const float *params, const float *buffers, const int64_t *counts,
                         int64_t steps, DdpTensor *t, int64_t *steps_at);

/* Writes every DdpParamInfo to PATH under its PyTorch name (F32; step counts
 * as I64 scalars holding COUNTS[i] + STEPS), with metadata {"net": name,
 * "hash": hash, "format": "ddpc", "step": STEPS}, atomically (safetensors.h). */
DdpStatus ddp_weights_export(const DdpNet *net, const char *path, const float *params, const float *buffers,
                             const int64_t *counts, int64_t steps);

/* DDP_BAD_INPUT naming FLAG when PATH is not a file the export may replace
 * (dirs.h: a directory, a device, a FIFO, a path under a regular file) or its
 * directory cannot take a new file, so that a mistyped --export fails at
 * start-up rather than after training. */
DdpStatus ddp_weights_check_writable(const char *flag, const char *path);

#endif
