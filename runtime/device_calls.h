/*
 * device_calls.h: a count of the device calls that make the host wait or take
 * memory, so that a step that should do neither can be shown to do neither.
 *
 * A training step on a GPU is meant to queue its work and go on: no wait for
 * the stream, no cudaMalloc (each costs tens of microseconds to milliseconds,
 * and a wait leaves the GPU idle while the host catches up). Both device
 * layers (device_cpu.c, device_cuda.cu) count their calls alike, the CPU's
 * being plain memory work, so the CPU build, which runs everywhere, checks
 * what the trainer asks of the device per step. The trainer adds up what
 * falls inside its steps (step_times.h) and the log reports it per window
 * ("rank_times": device_syncs, host_waits, device_allocs).
 *
 * What each build adds of its own, beyond the device layer: on GPUs, NCCL's
 * stop vote waits once a step for the step before's (pg_nccl.cu), and
 * DDP_SYNC_LAUNCHES syncs after every kernel; on CPUs the products' scratch
 * grows on first use (ops_cpu.c), in a run's first steps. So a sync or an
 * allocation added to ops_cuda.cu or pg_nccl.cu alone shows only on a GPU
 * (tests/gpu/run.sh checks the same as tests/distributed/steady_step.sh).
 *
 * Three kinds:
 *  - a sync waits for all the work queued on the stream (ddp_device_sync,
 *    ddp_copy_to_host, a library's stream synchronisation);
 *  - a wait waits for an event recorded earlier (a staging buffer's copy a
 *    step or two back, NCCL's vote of the step before): the host may not run
 *    ahead of the device by more than the buffers allow, but the device
 *    keeps its queue;
 *  - an allocation takes device or pinned memory (ddp_device_alloc,
 *    ddp_host_alloc, a library's scratch growing).
 */
#ifndef DDPRT_DEVICE_CALLS_H
#define DDPRT_DEVICE_CALLS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DDP_CALL_SYNC, DDP_CALL_WAIT, DDP_CALL_ALLOC, DDP_CALL_KINDS } DdpDeviceCall;

typedef struct {
    int64_t count[DDP_CALL_KINDS];
} DdpDeviceCalls;

/* Notes one call of KIND (any thread). */
void ddp_device_call_note(DdpDeviceCall kind);
/* The calls counted since the program started. */
DdpDeviceCalls ddp_device_calls_read(void);
/* "device_syncs", "host_waits", "device_allocs": the log's names. */
const char *ddp_device_call_name(DdpDeviceCall kind);

#ifdef __cplusplus
}
#endif

#endif
