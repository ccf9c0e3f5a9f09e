/*
 * resident_cuda.cu: resident.h on an NVIDIA GPU: the set in device memory
 * (cudaMalloc, copied once), a batch gathered by one kernel on the step's
 * stream.
 *
 * A thread a unit of a sample (resident_gather.h: a 4-byte word, or a
 * byte), the arithmetic the CPU build's loop runs too.
 */
#include "resident.h"
#include "cuda_check.h"  // CUDA_TRY
#include "device.h"      // ddp_device_alloc, ddp_device_free, ddp_device_launched
#include "launch_shape.h"  // DDP_BLOCK, ddp_grid: a launch's threads
#include "resident_gather.h"  // ddp_resident_unit, ddp_resident_source: a thread's item

#include <cuda_runtime.h>
#include <stdlib.h>

struct DdpResidentSet {
    unsigned char *samples; /* device: n samples of sample_bytes each */
    int32_t *labels;        /* device */
    size_t sample_bytes;
};

DdpStatus ddp_resident_create(DdpResidentSet **out, const DdpDataSet *set, void *stream)
{
    *out = NULL;
    size_t sample_bytes = ddp_data_raw_bytes(set), n = (size_t)set->n;
    if (!ddp_resident_bytes(set))
        return DDP_ERR(DDP_FAIL, "internal error: a data set of image files made resident");
    DdpResidentSet *r = (DdpResidentSet *)calloc(1, sizeof *r);
    if (!r)
        return DDP_ERR(DDP_FAIL, "out of memory");
    *out = r; /* freed by the caller's ddp_resident_destroy on failure too */
    r->sample_bytes = sample_bytes;
    cudaStream_t s = (cudaStream_t)stream;
    DDP_CHECK(ddp_device_alloc((void **)&r->samples, n * sample_bytes));
    DDP_CHECK(ddp_device_alloc((void **)&r->labels, n * sizeof *r->labels));
    const void *from = set->values ? (const void *)set->values : (const void *)set->pixels;
    CUDA_TRY(cudaMemcpyAsync(r->samples, from, n * sample_bytes, cudaMemcpyHostToDevice, s));
    CUDA_TRY(cudaMemcpyAsync(r->labels, set->labels, n * sizeof *r->labels, cudaMemcpyHostToDevice, s));
    CUDA_TRY(cudaStreamSynchronize(s));
    return DDP_OK;
}

void ddp_resident_destroy(DdpResidentSet *r)
{
    if (!r)
        return;
    ddp_device_free(r->samples);
    ddp_device_free(r->labels);
    free(r);
}

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

DdpStatus ddp_resident_gather(const DdpResidentSet *r, const int64_t *ids, int n, const DdpBatchLayout *layout,
                              void *batch, void *stream)
{
    if (layout->raw_sample != r->sample_bytes)
        return DDP_ERR(DDP_FAIL, "internal error: a batch laid out for raw samples of %zu bytes, of a resident set "
                       "whose samples are %zu", layout->raw_sample, r->sample_bytes);
    if (n <= 0)
        return DDP_OK;
    char *b = (char *)batch;
    int64_t *batch_ids = (int64_t *)(b + layout->ids);
    int32_t *labels = (int32_t *)(b + layout->labels);
    cudaStream_t s = (cudaStream_t)stream;
    size_t unit = ddp_resident_unit(r->sample_bytes);
    int64_t units = (int64_t)(r->sample_bytes / unit);
    if (unit == 4)
        gather_resident_batch<uint32_t><<<ddp_grid((int64_t)n * units), DDP_BLOCK, 0, s>>>(
            (const uint32_t *)r->samples, r->labels, ids, n, units, (uint32_t *)(b + layout->raw), batch_ids, labels);
    else
        gather_resident_batch<unsigned char><<<ddp_grid((int64_t)n * units), DDP_BLOCK, 0, s>>>(
            r->samples, r->labels, ids, n, units, (unsigned char *)(b + layout->raw), batch_ids, labels);
    /* named, and under DDP_SYNC_LAUNCHES waited for, as a generated kernel is */
    return ddp_device_launched("gather_resident_batch", stream);
}
