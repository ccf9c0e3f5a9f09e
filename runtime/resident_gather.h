/*
 * resident_gather.h: one item of a batch gathered from the resident set
 * (resident.h), shared by the GPU's kernel (resident_cuda.cu) and the CPU's
 * loop (resident_cpu.c), so that the CPU tests run the GPU's index
 * arithmetic.
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

#endif
