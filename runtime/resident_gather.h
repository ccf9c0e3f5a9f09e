/*
 * resident_gather.h: what the two implementations of a batch's gather from
 * the resident set (resident.h) share: the set's layout, which resident.c
 * makes through device.h for both builds, and one item of the gather, which
 * the GPU's kernel (resident_cuda.cu) and the CPU's loop (resident_cpu.c)
 * both compute, so that the CPU tests run the GPU's index arithmetic.
 *
 * A sample is gathered in units: 4-byte words where its bytes are a
 * multiple of 4 (28 x 28 bytes, 3 x 32 x 32, any float data), so that
 * consecutive GPU threads read and write consecutive words; else bytes.
 */
#ifndef DDPRT_RESIDENT_GATHER_H
#define DDPRT_RESIDENT_GATHER_H

#include <stddef.h>
#include <stdint.h>

#include "host_device.h"  // DDP_HOST_DEVICE
#include "resident.h"     // DdpResidentSet
#include "status.h"       // DdpStatus

struct DdpResidentSet {
    unsigned char *samples; /* device memory: the set's samples, sample_bytes each, as it holds them */
    int32_t *labels;        /* device memory */
    size_t sample_bytes;
};

/* The unit a sample of SAMPLE_BYTES is gathered in: 4 or 1 bytes. */
static inline DDP_HOST_DEVICE size_t ddp_resident_unit(size_t sample_bytes)
{
    return sample_bytes % 4 == 0 ? 4 : 1;
}

/* Item E of a batch whose samples are UNITS units each, the samples'
 * indices in the set IDS: the unit of the set it copies (counted in
 * units), and its sample in the batch (*SAMPLE); *FIRST is 1 for a
 * sample's first unit, whose item also copies the sample's index and
 * label. */
static inline DDP_HOST_DEVICE int64_t ddp_resident_source(const int64_t *ids, int64_t units, int64_t e,
                                                         int64_t *sample, int *first)
{
    int64_t i = e / units, u = e % units;
    *sample = i;
    *first = u == 0;
    return ids[i] * units + u;
}

#ifdef __cplusplus
extern "C" {
#endif

/* Queues on STREAM the N samples IDS[0..n) of R into RAW (n samples of
 * R's), their indices into BATCH_IDS and labels into LABELS: the items
 * above, on the CPU's threads (resident_cpu.c) or a GPU kernel
 * (resident_cuda.cu). */
DdpStatus ddp_resident_gather_units(const DdpResidentSet *r, const int64_t *ids, int n, void *raw,
                                    int64_t *batch_ids, int32_t *labels, void *stream);

#ifdef __cplusplus
}
#endif

#endif
