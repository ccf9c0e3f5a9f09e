/*
 * augment_device_cuda.cu: augment_device.h on an NVIDIA GPU: one kernel, a
 * thread per element of the net's input (grid-stride), on the trainer's
 * stream behind the batch's copy.
 */
#include "augment_device.h"
#include "device.h"  // ddp_device_alloc, ddp_copy_to_device, ddp_device_sync, ddp_device_launched
#include "launch_shape.h"  // DDP_BLOCK, ddp_grid: the generated kernels' launch shape

#include <cuda_runtime.h>
#include <stdlib.h>

struct DdpAugmentDevice {
    DdpDataConfig d;   /* by value into the kernel; its mean and std pointers are the host's, unused there */
    float *mean, *std; /* device: the block's, rounded to float */
    int c, h, w, raw_floats;
};

static __global__ void make_input(DdpDataConfig d, const float *mean, const float *std, uint64_t seed, int64_t epoch,
                                  const int64_t *ids, const void *raw, int raw_floats, int c, int h, int w,
                                  size_t total, float *x)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x)
        x[e] = ddp_augment_element(&d, mean, std, seed, epoch, ids, raw, raw_floats, c, h, w, e);
}

extern "C" DdpStatus ddp_augment_device_create(DdpAugmentDevice **out, const DdpDataConfig *d, int c, int h, int w,
                                               int raw_floats, void *stream)
{
    *out = NULL;
    DdpAugmentDevice *a = (DdpAugmentDevice *)calloc(1, sizeof *a);
    float *host = (float *)calloc(2 * (size_t)d->channels + 1, sizeof(float));
    if (!a || !host) {
        free(a);
        free(host);
        return DDP_ERR(DDP_FAIL, "out of memory: the data { } block's table");
    }
    ddp_augment_float_table(d, host);
    a->d = *d;
    a->c = c, a->h = h, a->w = w, a->raw_floats = raw_floats;
    DdpStatus s = DDP_OK;
    if (d->channels > 0) {
        size_t bytes = 2 * (size_t)d->channels * sizeof(float);
        s = ddp_device_alloc((void **)&a->mean, bytes);
        if (s == DDP_OK) {
            a->std = a->mean + d->channels;
            s = ddp_copy_to_device(a->mean, host, bytes, stream);
        }
        if (s == DDP_OK) /* before HOST goes, and before any kernel reads the table */
            s = ddp_device_sync(stream);
    }
    free(host);
    if (s != DDP_OK) {
        ddp_augment_device_destroy(a);
        return s;
    }
    *out = a;
    return DDP_OK;
}

extern "C" void ddp_augment_device_destroy(DdpAugmentDevice *a)
{
    if (!a)
        return;
    ddp_device_free(a->mean); /* std lies in the same allocation */
    free(a);
}

extern "C" DdpStatus ddp_augment_on_device(const DdpAugmentDevice *a, uint64_t seed, int64_t epoch,
                                           const int64_t *ids, int n, const void *raw, float *x, void *stream)
{
    size_t total = (size_t)n * (size_t)a->c * (size_t)a->h * (size_t)a->w;
    if (total == 0)
        return DDP_OK;
    make_input<<<ddp_grid((int64_t)total), DDP_BLOCK, 0, (cudaStream_t)stream>>>(a->d, a->mean, a->std, seed, epoch,
                                                                                 ids, raw, a->raw_floats, a->c, a->h,
                                                                                 a->w, total, x);
    return ddp_device_launched("make_input (the data { } block)", stream);
}
