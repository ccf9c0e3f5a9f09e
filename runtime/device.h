/*
 * device.h: the memory, copies and stream the trainer works with, so that one
 * trainer.c serves the CPU and the GPU builds.
 *
 * One interface, two implementations, and a program links exactly one, as with
 * ops.h: device_cpu.c (host memory, no stream: every call is plain memory work)
 * sits in libddprt.a; device_cuda.cu (cudart: one device per process chosen by
 * its local rank, one non-blocking compute stream, pinned staging memory,
 * async copies, and further streams for copies that overlap it) is linked
 * ahead of the library by a GPU program, so device_cpu.o is never pulled in.
 * Both must define exactly the same symbols.
 *
 * Shaped for a training loop that never waits on the device per step: a
 * batch crosses towards the device on a copy stream of its own while the
 * previous step runs (batch_upload.h), and the host reuses a staging buffer
 * only after the event recorded behind its last copy has passed. Only
 * ddp_copy_to_host, ddp_device_sync and the teardown of a stream wait, and
 * the trainer calls the first two at log points.
 *
 * Failures are DDP_FAIL with the device library's own words ("cudaMalloc:
 * cudaErrorMemoryAllocation (out of memory)") recorded through status.h.
 */
#ifndef DDPRT_DEVICE_H
#define DDPRT_DEVICE_H

#include <stddef.h>

#include "status.h"  // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

/* Binds this process to its device and makes the stream every later call is
 * given (*STREAM is NULL on CPU). On CUDA the GPU is the only one visible, or
 * else GPU number LOCAL_RANK (of LOCAL_WORLD_SIZE ranks on this node):
 * ddp_gpu_choose_device, device_rules.h. */
DdpStatus ddp_device_open(int local_rank, int local_world_size, void **stream);
/* Waits for the stream's work, then destroys it; NULL is fine. */
void ddp_device_close(void *stream);

/* 1 in a GPU build (device memory, NCCL), 0 in a CPU build (host memory, MPI). */
int ddp_device_is_gpu(void);
/* NULL where N ranks x batch B take the same steps as 1 rank x N*B, to the
 * bit (the CPU build: its products have a fixed order, gemm_cpu.h, and its
 * gradients are order-free sums, exact_sum.h, rounded once); else one line
 * saying why not, which the program prints at start-up and logs. */
const char *ddp_device_not_bit_invariant(void);
/* How many ranks this machine's devices host when no topology is given: the
 * visible GPUs on CUDA (0 if none or no driver), 1 on CPU. */
int ddp_device_count(void);
/* One line naming the device for the start-up message, e.g.
 * "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" or "CPU (2 cores)". */
void ddp_device_describe(char *buf, size_t len);

/* Bytes the device can still give: free GPU memory, or on a CPU the memory
 * the kernel reports available (MemAvailable), or less where this
 * process's control groups allow less (a container's limit:
 * cgroup_memory.h). 0 when it cannot tell. */
size_t ddp_device_memory_available(void);

/* Device memory that the device's libraries will take beyond the trainer's own
 * buffers, estimated before they are opened (cuDNN's and cuBLAS's workspaces,
 * NCCL's buffers when NCCL is to be opened for WORLD_SIZE ranks, the
 * libraries' modules): ddp_gpu_memory_estimate, device_rules.h. 0 on CPU. */
size_t ddp_device_library_bytes(int world_size, int nccl);

/* Device memory, zeroed, aligned for any element type (at least 64 bytes).
 * BYTES 0 gives *P NULL. Allocation is set-up work: it may synchronise. */
DdpStatus ddp_device_alloc(void **p, size_t bytes);
void ddp_device_free(void *p);

/* Host memory the device copies from fast (pinned on CUDA), zeroed, aligned
 * to at least 64 bytes. BYTES 0 gives *P NULL. */
DdpStatus ddp_host_alloc(void **p, size_t bytes);
void ddp_host_free(void *p);

/* Queues a copy of BYTES from host SRC to device DST on STREAM; it may still
 * be running when this returns, so SRC must stay untouched until an event
 * recorded after it has passed (ddp_event_wait). */
DdpStatus ddp_copy_to_device(void *dst, const void *src, size_t bytes, void *stream);
/* Copies BYTES from device SRC to host DST after all the stream's earlier
 * work, and waits for it: DST is ready on return. */
DdpStatus ddp_copy_to_host(void *dst, const void *src, size_t bytes, void *stream);
/* Queues a copy of BYTES from device SRC to device DST on STREAM (the two
 * may overlap on CPUs: a world of one's allgather in place). */
DdpStatus ddp_copy_on_device(void *dst, const void *src, size_t bytes, void *stream);
/* The most bytes one ddp_device_write carries. */
#define DDP_DEVICE_WRITE_MAX 64
/* Queues writing BYTES (at most DDP_DEVICE_WRITE_MAX) of host SRC to device
 * DST on STREAM, the bytes taken when this is called: SRC may change as soon
 * as it returns (on CUDA a kernel's argument carries them, so neither pinned
 * memory nor an event is needed), and a CUDA graph launched after it reads
 * them. How a step's scalars reach the device (step_scalars.h). */
DdpStatus ddp_device_write(void *dst, const void *src, size_t bytes, void *stream);
/* Queues zeroing BYTES of device memory at P. */
DdpStatus ddp_device_zero(void *p, size_t bytes, void *stream);
/* Waits for all of the stream's work, and reports any failure of it (a
 * kernel that could not launch or faulted). */
DdpStatus ddp_device_sync(void *stream);

/* Called by DDP_LAUNCH (kernel.h) right after it queues generated kernel
 * KERNEL on STREAM: reports a launch that failed, naming the kernel, without
 * waiting. With DDP_SYNC_LAUNCHES=1 or DDP_DEBUG=1 in the environment it also
 * waits for the kernel, so that one that faults is named too
 * (ddp_sync_launches, ddp_debug_mode). Never
 * called on CPU, where it returns DDP_OK. */
DdpStatus ddp_device_launched(const char *kernel, void *stream);

/* A marker in the stream: the host can wait until the work queued before it
 * is done without waiting for later work. On CPU all four do nothing and
 * *EVENT is NULL. */
DdpStatus ddp_event_create(void **event);
void ddp_event_destroy(void *event);
DdpStatus ddp_event_record(void *event, void *stream);
DdpStatus ddp_event_wait(void *event);

/* A stream of its own for copies that overlap the compute stream's work
 * (batch_upload.h), with the compute stream made to wait for them on the
 * device, not the host: ddp_stream_wait queues, on STREAM, a wait for
 * EVENT's work. On CPU, where nothing overlaps, the stream is NULL and the
 * wait does nothing. */
DdpStatus ddp_stream_create(void **stream);
void ddp_stream_destroy(void *stream);
DdpStatus ddp_stream_wait(void *stream, void *event);

#ifdef __cplusplus
}
#endif

#endif
