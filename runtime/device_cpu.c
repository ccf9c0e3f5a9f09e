/*
 * device_cpu.c: device.h for the CPU build, where "device" memory is host
 * memory and work is done when the call returns.
 *
 * Nothing here is asynchronous, so there is no stream (it is NULL) and events
 * are no-ops; the copies are memcpy. Memory is 64-byte aligned (a cache line,
 * and enough for any vector load the generated kernels or the ops make) and
 * zeroed, as ddp_device_alloc promises on both builds.
 */
#include "device.h"
#include "cgroup_memory.h"  // ddp_cgroup_memory_left: a container's limit
#include "device_calls.h"  // ddp_device_call_note: counted as on GPUs, so that the CPU build checks the GPU's steps

#include <stdint.h>  // SIZE_MAX
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { CPU_ALIGN = 64 };

DdpStatus ddp_device_open(int local_rank, int local_world_size, void **stream)
{
    (void)local_rank;
    (void)local_world_size;
    *stream = NULL;
    return DDP_OK;
}

void ddp_device_close(void *stream) { (void)stream; }

size_t ddp_device_library_bytes(int world_size, int nccl)
{
    (void)world_size;
    (void)nccl;
    return 0;
}

DdpStatus ddp_device_launched(const char *kernel, void *stream)
{
    (void)kernel;
    (void)stream;
    return DDP_OK;
}

int ddp_device_is_gpu(void) { return 0; }

const char *ddp_device_not_bit_invariant(void) { return NULL; }

int ddp_device_count(void) { return 1; }

void ddp_device_describe(char *buf, size_t len)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(buf, len, "CPU (%ld core%s)", cores > 0 ? cores : 1, cores > 1 ? "s" : "");
}

/* The machine's available memory, as the kernel estimates it; 0 unknown. */
static size_t machine_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    if (kib)
        return (size_t)(kib * 1024ull);
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

/* The less of the machine's and what this process's control groups allow:
 * a container's limit, which MemAvailable does not see. */
size_t ddp_device_memory_available(void)
{
    size_t machine = machine_available(), groups = ddp_cgroup_memory_left();
    if (groups == SIZE_MAX)
        return machine;
    return machine && machine < groups ? machine : groups;
}

/* Aligned, zeroed memory; *P NULL for 0 bytes. */
static DdpStatus aligned_zeroed(void **p, size_t bytes, const char *what)
{
    *p = NULL;
    if (bytes == 0)
        return DDP_OK;
    ddp_device_call_note(DDP_CALL_ALLOC);
    int err = posix_memalign(p, CPU_ALIGN, bytes);
    if (err != 0) {
        *p = NULL;
        return DDP_ERR(DDP_FAIL, "%s: cannot allocate %zu bytes: %s", what, bytes, strerror(err));
    }
    memset(*p, 0, bytes);
    return DDP_OK;
}

DdpStatus ddp_device_alloc(void **p, size_t bytes) { return aligned_zeroed(p, bytes, "device memory"); }
void ddp_device_free(void *p) { free(p); }

DdpStatus ddp_host_alloc(void **p, size_t bytes) { return aligned_zeroed(p, bytes, "host memory"); }
void ddp_host_free(void *p) { free(p); }

DdpStatus ddp_copy_to_device(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)stream;
    if (bytes)
        memcpy(dst, src, bytes);
    return DDP_OK;
}

DdpStatus ddp_copy_on_device(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)stream;
    if (bytes)
        memmove(dst, src, bytes);
    return DDP_OK;
}

DdpStatus ddp_copy_to_host(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)stream;
    if (bytes)
        memcpy(dst, src, bytes);
    ddp_device_call_note(DDP_CALL_SYNC); /* one, as device_cuda.cu's through its ddp_device_sync */
    return DDP_OK;
}

DdpStatus ddp_device_write(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)stream;
    if (bytes > DDP_DEVICE_WRITE_MAX)
        return DDP_ERR(DDP_FAIL, "internal error: ddp_device_write of %zu bytes, more than %d", bytes,
                       DDP_DEVICE_WRITE_MAX);
    memcpy(dst, src, bytes);
    return DDP_OK;
}

DdpStatus ddp_device_zero(void *p, size_t bytes, void *stream)
{
    (void)stream;
    if (bytes)
        memset(p, 0, bytes);
    return DDP_OK;
}

DdpStatus ddp_device_sync(void *stream)
{
    (void)stream;
    ddp_device_call_note(DDP_CALL_SYNC);
    return DDP_OK;
}

DdpStatus ddp_event_create(void **event)
{
    *event = NULL;
    return DDP_OK;
}

void ddp_event_destroy(void *event) { (void)event; }

DdpStatus ddp_event_record(void *event, void *stream)
{
    (void)event;
    (void)stream;
    return DDP_OK;
}

DdpStatus ddp_event_wait(void *event)
{
    (void)event;
    ddp_device_call_note(DDP_CALL_WAIT);
    return DDP_OK;
}

DdpStatus ddp_stream_create(void **stream)
{
    *stream = NULL;
    return DDP_OK;
}

void ddp_stream_destroy(void *stream) { (void)stream; }

DdpStatus ddp_stream_wait(void *stream, void *event)
{
    (void)stream;
    (void)event;
    return DDP_OK;
}
