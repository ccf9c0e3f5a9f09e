/*
 * augment_device.h: the net's input made on the device from a batch's raw
 * samples, the data { } block applied there.
 *
 * Where the device is a GPU, the loader's threads only gather a batch's
 * samples as the data set holds them (bytes, for every format but float
 * NumPy files; image files decoded), or the device gathers them from the
 * training set it holds (resident.h), and the batch reaches the device so:
 * a quarter of the floats' bytes, and no host thread spends time on the
 * division by 255, the crop, the flips or normalize. There one thread per
 * element computes ddp_augment_element (augment.h), the same bits as
 * ddp_data_gather then ddp_augment_batch on the host.
 *
 * Two implementations, as device.h: augment_device_cpu.c (the host's
 * threads, for a CPU build told DDP_AUGMENT_ON=device, so that the tests
 * run the very arithmetic the GPU runs) and augment_device_cuda.cu (one
 * kernel on the trainer's stream).
 */
#ifndef DDPRT_AUGMENT_DEVICE_H
#define DDPRT_AUGMENT_DEVICE_H

#include <stdint.h>

#include "augment.h"  // DdpDataConfig
#include "status.h"   // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

typedef struct DdpAugmentDevice DdpAugmentDevice;

/* The block D (kept by pointer: it must outlive *OUT), its mean and std
 * put on the device through STREAM (and waited for), for samples of
 * C x H x W held as bytes, or floats when RAW_FLOATS. */
DdpStatus ddp_augment_device_create(DdpAugmentDevice **out, const DdpDataConfig *d, int c, int h, int w,
                                    int raw_floats, void *stream);

/* NULL: nothing. */
void ddp_augment_device_destroy(DdpAugmentDevice *a);

/* Queues on STREAM: X (n samples of floats, device memory) made from RAW (n
 * raw samples, device memory), as ddp_augment_batch makes them: the crop
 * and flips of the samples whose indices in the data set IDS (device
 * memory) holds, drawn for EPOCH from SEED, then normalize; EPOCH < 0 (an
 * evaluation batch): normalize only. */
DdpStatus ddp_augment_on_device(const DdpAugmentDevice *a, uint64_t seed, int64_t epoch, const int64_t *ids, int n,
                                const void *raw, float *x, void *stream);

#ifdef __cplusplus
}
#endif

#endif
