/*
 * resident_cuda.cu: resident_gather.h's gather on an NVIDIA GPU: one kernel
 * on the step's stream, a thread a unit of a sample (a 4-byte word, or a
 * byte), the arithmetic the CPU build's loop runs too.
 */
#include "resident_gather.h"
#include "device.h"        // ddp_device_launched
#include "launch_shape.h"  // DDP_BLOCK, ddp_grid: a launch's threads

#include <cuda_runtime.h>

template <typename Unit>
__global__ static void gather_resident_batch(const Unit *samples, const int32_t *labels, const int64_t *ids, int n,
                                             int64_t units, Unit *raw, int64_t *batch_ids, int32_t *batch_labels)
{
    int64_t total = (int64_t)n * units;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)blockDim.x * gridDim.x) {
        int64_t i;
        int first;
        raw[e] = samples[ddp_resident_source(ids, units, e, &i, &first)];
        if (first) {
            batch_ids[i] = ids[i];
            batch_labels[i] = labels[ids[i]];
        }
    }
}

DdpStatus ddp_resident_gather_units(const DdpResidentSet *r, const int64_t *ids, int n, void *raw,
                                    int64_t *batch_ids, int32_t *labels, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    size_t unit = ddp_resident_unit(r->sample_bytes);
    int64_t units = (int64_t)(r->sample_bytes / unit);
    if (unit == 4)
        gather_resident_batch<uint32_t><<<ddp_grid((int64_t)n * units), DDP_BLOCK, 0, s>>>(
            (const uint32_t *)r->samples, r->labels, ids, n, units, (uint32_t *)raw, batch_ids, labels);
    else
        gather_resident_batch<unsigned char><<<ddp_grid((int64_t)n * units), DDP_BLOCK, 0, s>>>(
            r->samples, r->labels, ids, n, units, (unsigned char *)raw, batch_ids, labels);
    /* named, and under DDP_SYNC_LAUNCHES waited for, as a generated kernel is */
    return ddp_device_launched("gather_resident_batch", stream);
}
