/*
 * device_cuda.cu: device.h on an NVIDIA GPU, through the CUDA runtime.
 *
 * One process drives one GPU: the only one it sees (a launcher that gives each
 * rank its own GPU, srun --gpus-per-task=1, shows it as GPU 0), else the one
 * numbered by its local rank (torchrun's LOCAL_RANK, as
 * torch.cuda.set_device(local_rank) in a DDP script); device_rules.c. It does
 * its work on one compute stream, and batches' copies on one of their own
 * (ddp_stream_create, batch_upload.h), all created non-blocking, so nothing
 * it queues waits on the legacy default stream that libraries or a debugger
 * might use.
 *
 * The batch goes host -> device through pinned staging memory
 * (cudaMallocHost): only pinned memory lets cudaMemcpyAsync return before the
 * copy is done, which is what lets the host gather the next batch while the
 * GPU trains on this one. Events (timing disabled: cheaper) tell the host
 * when a staging buffer is free again.
 *
 * Set-up calls (allocation) may synchronise; the per-step calls only queue.
 * Every failure becomes DDP_FAIL naming the call and CUDA's error name and
 * text. A generated kernel that cannot launch is named at once
 * (ddp_device_launched, after every DDP_LAUNCH: cudaGetLastError, no wait);
 * one that faults while running surfaces at the next ddp_device_sync or
 * ddp_copy_to_host, unless DDP_SYNC_LAUNCHES=1 (or DDP_DEBUG=1) makes every
 * launch wait and name its kernel.
 */
#include "device.h"
#include "cuda_check.h"  // CUDA_TRY
#include "device_calls.h"  // ddp_device_call_note: the waits and allocations a step should not make
#include "device_rules.h"  // ddp_gpu_choose_device, ddp_gpu_memory_estimate, ddp_sync_launches, ddp_debug_mode

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

DdpStatus ddp_device_open(int local_rank, int local_world_size, void **stream)
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
    char why[160];
    int device = ddp_gpu_choose_device(count, local_rank, local_world_size, why, sizeof why);
    if (device < 0)
        return DDP_ERR(DDP_FAIL, "%s", why);
    CUDA_TRY(cudaSetDevice(device));
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

size_t ddp_device_library_bytes(int world_size, int nccl)
{
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
        (void)cudaGetLastError(); /* major 0: the smaller, pre-Hopper cuBLAS figure */
    DdpGpuMemoryInput in = {.sm_major = major, .world_size = world_size, .nccl = nccl,
                            .nccl_buffsize = getenv("NCCL_BUFFSIZE"),
                            .nccl_max_nchannels = getenv("NCCL_MAX_NCHANNELS")};
    return ddp_gpu_memory_estimate(&in).total;
}

DdpStatus ddp_device_launched(const char *kernel, void *stream)
{
    static int sync = -1; /* read once: the environment does not change during a run */
    if (sync < 0)
        sync = ddp_sync_launches(getenv("DDP_SYNC_LAUNCHES")) || ddp_debug_mode(getenv("DDP_DEBUG"));
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return DDP_ERR(DDP_FAIL, "kernel %s could not start: %s (%s)", kernel, cudaGetErrorName(e),
                       cudaGetErrorString(e));
    if (sync) {
        ddp_device_call_note(DDP_CALL_SYNC);
        e = cudaStreamSynchronize((cudaStream_t)stream);
        if (e != cudaSuccess)
            return DDP_ERR(DDP_FAIL, "kernel %s failed: %s (%s)", kernel, cudaGetErrorName(e), cudaGetErrorString(e));
    }
    return DDP_OK;
}

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
    ddp_device_call_note(DDP_CALL_ALLOC);
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
    ddp_device_call_note(DDP_CALL_ALLOC);
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

DdpStatus ddp_copy_on_device(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes)
        CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream));
    return DDP_OK;
}

DdpStatus ddp_copy_to_host(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes)
        CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)stream));
    return ddp_device_sync(stream);
}

/* ddp_device_write's bytes, by value: a kernel's arguments are copied when
 * it is queued. */
struct DeviceWriteBytes {
    unsigned char b[DDP_DEVICE_WRITE_MAX];
};

__global__ static void device_write_kernel(unsigned char *dst, DeviceWriteBytes v, int n)
{
    if ((int)threadIdx.x < n)
        dst[threadIdx.x] = v.b[threadIdx.x];
}

DdpStatus ddp_device_write(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes > DDP_DEVICE_WRITE_MAX)
        return DDP_ERR(DDP_FAIL, "internal error: ddp_device_write of %zu bytes, more than %d", bytes,
                       DDP_DEVICE_WRITE_MAX);
    if (!bytes)
        return DDP_OK;
    DeviceWriteBytes v;
    memcpy(v.b, src, bytes);
    device_write_kernel<<<1, DDP_DEVICE_WRITE_MAX, 0, (cudaStream_t)stream>>>((unsigned char *)dst, v, (int)bytes);
    CUDA_TRY(cudaGetLastError());
    return DDP_OK;
}

DdpStatus ddp_device_zero(void *p, size_t bytes, void *stream)
{
    if (bytes)
        CUDA_TRY(cudaMemsetAsync(p, 0, bytes, (cudaStream_t)stream));
    return DDP_OK;
}

DdpStatus ddp_device_sync(void *stream)
{
    ddp_device_call_note(DDP_CALL_SYNC);
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
    ddp_device_call_note(DDP_CALL_WAIT);
    CUDA_TRY(cudaEventSynchronize((cudaEvent_t)event));
    return DDP_OK;
}

/* Non-blocking, as the compute stream is (ddp_device_open): a stream that
 * synchronised with the legacy default stream would serialise the copies. */
DdpStatus ddp_stream_create(void **stream)
{
    *stream = NULL;
    cudaStream_t s = NULL;
    CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *stream = s;
    return DDP_OK;
}

void ddp_stream_destroy(void *stream) { ddp_device_close(stream); }

DdpStatus ddp_stream_wait(void *stream, void *event)
{
    CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0));
    return DDP_OK;
}
