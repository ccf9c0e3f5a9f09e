/*
 * resident_cuda.cu: resident.h on an NVIDIA GPU: the set in device memory
 * (cudaMalloc, copied once), a batch gathered by one kernel on the step's
 * stream.
 *
 * The kernel gives a thread one 4-byte word of a sample where a sample's
 * bytes are a multiple of 4 (28 x 28 bytes, 3 x 32 x 32, any float data),
 * else one byte: consecutive threads read consecutive words of a sample
 * and write consecutive words of the batch. The first n threads also copy
 * a sample's index and label.
 */
#include "resident.h"
#include "cuda_check.h"  // CUDA_TRY
#include "launch_shape.h"  // DDP_BLOCK, ddp_grid: a launch's threads

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
    CUDA_TRY(cudaMalloc(&r->samples, n * sample_bytes));
    CUDA_TRY(cudaMalloc(&r->labels, n * sizeof *r->labels));
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
    if (r->samples)
        (void)cudaFree(r->samples);
    if (r->labels)
        (void)cudaFree(r->labels);
    free(r);
}

/* Item e of n * WORDS: word e % WORDS of the batch's sample e / WORDS. */
template <typename Word>
__global__ static void gather_kernel(const Word *samples, const int32_t *labels, const int64_t *ids, int n,
                                     int64_t words, Word *raw, int64_t *batch_ids, int32_t *batch_labels)
{
    int64_t total = (int64_t)n * words;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)blockDim.x * gridDim.x) {
        int64_t i = e / words, w = e % words, id = ids[i];
        raw[e] = samples[id * words + w];
        if (w == 0) {
            batch_ids[i] = id;
            batch_labels[i] = labels[id];
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
    if (r->sample_bytes % 4 == 0) {
        int64_t words = (int64_t)(r->sample_bytes / 4);
        gather_kernel<uint32_t><<<ddp_grid((int64_t)n * words), DDP_BLOCK, 0, s>>>(
            (const uint32_t *)r->samples, r->labels, ids, n, words, (uint32_t *)(b + layout->raw), batch_ids, labels);
    } else {
        int64_t words = (int64_t)r->sample_bytes;
        gather_kernel<unsigned char><<<ddp_grid((int64_t)n * words), DDP_BLOCK, 0, s>>>(
            r->samples, r->labels, ids, n, words, (unsigned char *)(b + layout->raw), batch_ids, labels);
    }
    CUDA_TRY(cudaGetLastError());
    return DDP_OK;
}
