/*
 * loader.h: training batches made ahead of the step, on worker threads.
 *
 * A batch is made on the host: its samples gathered from the data set
 * (pixel / 255), the data { } block applied (augment.h), its labels and
 * sample ids beside them, in one buffer that the trainer copies to the
 * device. Where the device makes the net's input (augment_device.h: a GPU
 * build's default), the samples are only gathered, as the data set holds
 * them; where it holds the training set too (resident.h), no loader makes
 * training batches at all. Made on the thread that runs the step, that work adds to every
 * step; on a GPU, whose step is short, it can be most of it. Here WORKERS
 * threads make the epoch's batches in order, each into a buffer of its own
 * (a ring of SLOTS), while the trainer takes them one by one: the step
 * waits only when the workers fall behind, and the trainer measures that
 * wait (data_wait_s in the log).
 *
 * Nothing a batch holds depends on which worker made it or when: a sample's
 * crop and flips are drawn from (seed, epoch, sample index). So the workers
 * change no result, and --workers 0 (the batch made by the trainer itself,
 * as before there were workers) gives the same bytes.
 */
#ifndef DDPRT_LOADER_H
#define DDPRT_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "augment.h"  // DdpDataConfig
#include "dataset.h"  // DdpDataSet
#include "status.h"   // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

/* Where a batch's parts lie in its buffer, in bytes: the trainer's layout of
 * the device batch, whose first HOST_BYTES the buffer holds and is copied
 * to. The host makes the net's input X, or, where the device makes it
 * (augment_device.h), the samples as the data set holds them, RAW. */
typedef struct {
    size_t ids, labels;
    size_t raw, raw_sample; /* RAW_SAMPLE: a raw sample's bytes; 0: none, the host makes X */
    size_t x;
    size_t host_bytes, bytes;
} DdpBatchLayout;

/* The layout of a batch of BATCH samples of NUMEL floats: ids, labels, the
 * raw samples when the device makes the input (RAW_SAMPLE bytes each; 0:
 * none), then the input; each part at a multiple of 256 bytes, which
 * cudaMalloc gives a whole allocation. */
DdpBatchLayout ddp_batch_layout(int64_t batch, int64_t numel, size_t raw_sample);

/* What the batches are made of. The loader keeps the pointers: SET, DATA
 * and each epoch's ORDER must outlive their use. */
typedef struct {
    const DdpDataSet *set;
    const DdpDataConfig *data;
    uint64_t seed;           /* the crop's and flips' */
    int channels, rows, cols;/* a sample as the net takes it (augment.h) */
    int64_t batch;           /* samples in a batch but an epoch's last */
    DdpBatchLayout layout;
} DdpLoaderSpec;

typedef struct DdpLoader DdpLoader;

/* WORKERS threads (1 or more) and SLOTS buffers (more than WORKERS, so that
 * a buffer is free while the trainer holds one), of host memory that copies
 * to the device fast (device.h's ddp_host_alloc). */
DdpStatus ddp_loader_create(DdpLoader **out, int workers, int slots, const DdpLoaderSpec *spec);

/* The workers start on EPOCH's batches FIRST, FIRST + 1, ... of the N
 * samples ORDER lists (each BATCH of them, the last fewer), until the ring
 * is full. A previous epoch's batches are dropped. ORDER must not change
 * until ddp_loader_stop. */
void ddp_loader_start(DdpLoader *l, int64_t epoch, const int64_t *order, int64_t n, int64_t first);

/* Batch B of the epoch (the one after the last taken), once made: *BUF
 * holds it, laid out as the spec says, until ddp_loader_release(l, B); *N
 * its samples. *WAITED gains the seconds spent waiting for it. A worker's
 * failure making it is returned here; a batch that is not being made (taken
 * twice, out of order, or after a stop) is an internal error, not a wait. */
DdpStatus ddp_loader_take(DdpLoader *l, int64_t b, void **buf, int *n, double *waited);

/* The buffer of batch B may be made into another batch. */
void ddp_loader_release(DdpLoader *l, int64_t b);

/* The workers finish the batch in hand and make no more; every buffer but
 * the one the trainer holds (until it releases it) is free after it. Call
 * before ORDER changes. */
void ddp_loader_stop(DdpLoader *l);

/* Stops and joins the workers, frees the buffers. NULL: nothing. */
void ddp_loader_destroy(DdpLoader *l);

/* The --workers default for a rank (flags.c's help says it in words): on a
 * GPU build the cores of the machine shared by its LOCAL_RANKS, less the one
 * that drives the device, at least 1 and at most DDP_LOADER_MOST_WORKERS; on
 * a CPU build 1, as the step's own threads use every core. */
#define DDP_LOADER_MOST_WORKERS 8
int ddp_loader_default_workers(int on_gpu, int cores, int local_ranks);

/* Makes a batch of samples IDS[0..n) into BUF on the calling thread:
 * gathered, the data { } block applied (its crop and flips drawn for EPOCH;
 * EPOCH < 0, an evaluation batch: normalize only), or gathered raw for the
 * device to make the input of, their ids and labels beside them. What a worker does, and what the trainer does itself for
 * evaluation batches and with --workers 0. SCRATCH holds one sample. */
DdpStatus ddp_loader_make(const DdpLoaderSpec *spec, int64_t epoch, const int64_t *ids, int n, void *buf,
                          float *scratch);

#ifdef __cplusplus
}
#endif

#endif
