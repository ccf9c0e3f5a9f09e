/*
 * device_cuda.cu: device.h on an NVIDIA GPU, through the CUDA runtime.
 *
 * One process drives one GPU, the one numbered by its local rank (torchrun's
 * LOCAL_RANK, as torch.cuda.set_device(local_rank) in a DDP script), and does
 * all its work on one stream created non-blocking, so nothing it queues waits
 * on the legacy default stream that libraries or a debugger might use.
 *
 * The batch goes host -> device through pinned staging memory
 * (cudaMallocHost): only pinned memory lets cudaMemcpyAsync return before the
 * copy is done, which is what lets the host gather the next batch while the
 * GPU trains on this one. Events (timing disabled: cheaper) tell the host
 * when a staging buffer is free again.
 *
 * Set-up calls (allocation) may synchronise; the per-step calls only queue.
 * Every failure becomes DDP_FAIL naming the call and CUDA's error name and
 * text; a kernel failure surfaces at the next ddp_device_sync or
 * ddp_copy_to_host, which also collect launch errors (cudaGetLastError).
 */
#include "device.h"
#include "cuda_check.h"  // CUDA_TRY

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

DdpStatus ddp_device_open(int local_rank, void **stream)
{
    *stream = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        /* the usual cause is a CUDA build on a machine without a GPU: say
         * what to do, not only what CUDA said */
        (void)cudaGetLastError();
        return DDP_ERR(DDP_FAIL, "this program was built for CUDA and no GPU is visible here (cudaGetDeviceCount: %s); "
                       "to train on the CPU, build it with ddpc NET.net --target cpu",
                       e != cudaSuccess ? cudaGetErrorName(e) : "0 devices");
    }
    if (local_rank < 0 || local_rank >= count)
        return DDP_ERR(DDP_FAIL, "local rank %d has no GPU: this machine shows %d (CUDA_VISIBLE_DEVICES decides which)",
                       local_rank, count);
    CUDA_TRY(cudaSetDevice(local_rank));
    cudaStream_t s = NULL;
    CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *stream = s;
    return DDP_OK;
}

void ddp_device_close(void *stream)
{
    if (!stream)
        return;
    /* Errors here cannot change the outcome any more: the run has ended. */
    (void)cudaStreamSynchronize((cudaStream_t)stream);
    (void)cudaStreamDestroy((cudaStream_t)stream);
}

int ddp_device_is_gpu(void) { return 1; }

const char *ddp_device_not_bit_invariant(void)
{
    return "on GPUs, N ranks x B match 1 rank x N*B up to float summation order: cuDNN, cuBLAS and NCCL sum "
           "in float, in orders of their own";
}

size_t ddp_device_memory_available(void)
{
    size_t free_bytes = 0, total = 0;
    return cudaMemGetInfo(&free_bytes, &total) == cudaSuccess ? free_bytes : 0;
}

int ddp_device_count(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or no GPU: not sticky, clear it */
        return 0;
    }
    return count;
}

void ddp_device_describe(char *buf, size_t len)
{
    int dev = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(buf, len, "GPU (unknown)");
        return;
    }
    snprintf(buf, len, "GPU %d: %s (sm_%d%d, %.1f GiB)", dev, prop.name, prop.major, prop.minor,
             (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
}

DdpStatus ddp_device_alloc(void **p, size_t bytes)
{
    *p = NULL;
    if (bytes == 0)
        return DDP_OK;
    cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) {
        *p = NULL;
        return DDP_ERR(DDP_FAIL, "cudaMalloc of %zu bytes: %s (%s)", bytes, cudaGetErrorName(e),
                       cudaGetErrorString(e));
    }
    /* cudaMemset runs on the legacy stream, which our non-blocking stream does
     * not wait for: finish it here, at set-up, rather than race the first step. */
    e = cudaMemset(*p, 0, bytes);
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        (void)cudaFree(*p);
        *p = NULL;
        return DDP_ERR(DDP_FAIL, "cudaMemset of %zu bytes: %s (%s)", bytes, cudaGetErrorName(e),
                       cudaGetErrorString(e));
    }
    return DDP_OK;
}

void ddp_device_free(void *p)
{
    if (p)
        (void)cudaFree(p);
}

DdpStatus ddp_host_alloc(void **p, size_t bytes)
{
    *p = NULL;
    if (bytes == 0)
        return DDP_OK;
    cudaError_t e = cudaMallocHost(p, bytes);
    if (e != cudaSuccess) {
        *p = NULL;
        return DDP_ERR(DDP_FAIL, "cudaMallocHost of %zu bytes: %s (%s)", bytes, cudaGetErrorName(e),
                       cudaGetErrorString(e));
    }
    memset(*p, 0, bytes);
    return DDP_OK;
}

void ddp_host_free(void *p)
{
    if (p)
        (void)cudaFreeHost(p);
}

DdpStatus ddp_copy_to_device(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes)
        CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)stream));
    return DDP_OK;
}

DdpStatus ddp_copy_to_host(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes)
        CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)stream));
    return ddp_device_sync(stream);
}

DdpStatus ddp_device_zero(void *p, size_t bytes, void *stream)
{
    if (bytes)
        CUDA_TRY(cudaMemsetAsync(p, 0, bytes, (cudaStream_t)stream));
    return DDP_OK;
}

DdpStatus ddp_device_sync(void *stream)
{
    CUDA_TRY(cudaStreamSynchronize((cudaStream_t)stream));
    /* A kernel that failed to launch leaves its error here, not in the stream. */
    CUDA_TRY(cudaGetLastError());
    return DDP_OK;
}

DdpStatus ddp_event_create(void **event)
{
    *event = NULL;
    cudaEvent_t e = NULL;
    CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    *event = e;
    return DDP_OK;
}

void ddp_event_destroy(void *event)
{
    if (event)
        (void)cudaEventDestroy((cudaEvent_t)event);
}

DdpStatus ddp_event_record(void *event, void *stream)
{
    CUDA_TRY(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
    return DDP_OK;
}

DdpStatus ddp_event_wait(void *event)
{
    CUDA_TRY(cudaEventSynchronize((cudaEvent_t)event));
    return DDP_OK;
}
