/*
 * resident.h: the training set held in device memory, each batch gathered
 * there from the sampler's indices.
 *
 * Where the device makes the net's input (augment_device.h), a batch crosses
 * to it as the data set holds it: for Fashion-MNIST at batch 64, 50 KB a
 * step, gathered by the loader's threads into pinned memory and copied on the
 * step's stream. A small data set fits on a GPU many times over (60,000
 * images of 28x28 bytes: 45 MiB of an H200's 141 GB), so it is copied once
 * at start-up with its labels, and then a step copies nothing: the epoch's
 * order goes to the device once an epoch, and one kernel gathers each
 * batch's indices, labels and samples from it. No host thread touches a
 * training batch, and a step's device work no longer waits behind a copy.
 *
 * A set is made resident when the device makes the input, the set is held
 * in memory (image files are decoded as their batches are gathered: never
 * resident), and DDP_DATA_RESIDENT says so: 1 always, 0 never, unset on a
 * GPU build when the set takes at most a quarter of the device's free
 * memory (ddp_resident_choose). Evaluation batches still come from the
 * host: they are outside the step's time.
 *
 * resident.c holds what is the same for both builds: the choice, and the
 * set made, copied and freed through device.h. The gather itself has two
 * implementations, as device.h: resident_cpu.c (the host's threads, for a
 * CPU build told DDP_DATA_RESIDENT=1 and DDP_AUGMENT_ON=device, so that the
 * tests run this path) and resident_cuda.cu (one kernel), over one item
 * (resident_gather.h).
 */
#ifndef DDPRT_RESIDENT_H
#define DDPRT_RESIDENT_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"  // DdpDataSet
#include "loader.h"   // DdpBatchLayout: where a batch's parts lie
#include "status.h"   // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

#define DDP_DATA_RESIDENT_ENV "DDP_DATA_RESIDENT"

/* Device bytes SET takes resident: its samples as it holds them (bytes, or
 * floats), its labels, and an epoch's order (at most the whole set's
 * indices); 0 for a set of image files. */
size_t ddp_resident_bytes(const DdpDataSet *set);

/* Whether SET is made resident (*RESIDENT 1), from ASKED (the environment's
 * DDP_DATA_RESIDENT, or NULL), ON_GPU, INPUT_ON_DEVICE (augment_device.h:
 * resident samples must become the input on the device) and AVAILABLE (the
 * device's free bytes this rank may count on: less what its libraries may
 * still take, shared among the ranks on the device; 0: unknown). WHY
 * (WHY_LEN) says what decided, for the start-up line. DDP_BAD_INPUT for an
 * ASKED other than 0 or 1, and for 1 where the set cannot be resident
 * (image files, the input made on the host, more than AVAILABLE). */
DdpStatus ddp_resident_choose(const char *asked, int on_gpu, int input_on_device, const DdpDataSet *set,
                              size_t available, int *resident, char *why, size_t why_len);

typedef struct DdpResidentSet DdpResidentSet;

/* SET's samples and labels copied to device memory through STREAM and
 * waited for (set-up work, which may synchronise). */
DdpStatus ddp_resident_create(DdpResidentSet **out, const DdpDataSet *set, void *stream);
/* NULL is fine. */
void ddp_resident_destroy(DdpResidentSet *r);

/* Queues on STREAM: the batch of the samples whose indices IDS[0..n) holds
 * (device memory, apart from BATCH) into BATCH (device memory), laid out as
 * LAYOUT: the indices, the labels and the raw samples, the bytes
 * ddp_loader_make writes for the same samples. */
DdpStatus ddp_resident_gather(const DdpResidentSet *r, const int64_t *ids, int n, const DdpBatchLayout *layout,
                              void *batch, void *stream);

#ifdef __cplusplus
}
#endif

#endif
