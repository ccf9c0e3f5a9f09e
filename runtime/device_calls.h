/*
 * device_calls.h: a count of the device calls that make the host wait or take
 * memory, so that a step that should do neither can be shown to do neither.
 *
 * A training step on a GPU is meant to queue its work and go on: no wait for
 * the stream, no cudaMalloc (each costs tens of microseconds to milliseconds,
 * and a wait leaves the GPU idle while the host catches up). Both device
 * layers count the same calls at the same places (device_cpu.c's are plain
 * memory work, counted alike), so the CPU build, which runs everywhere,
 * checks what the GPU build does per step. The trainer adds up what falls
 * inside its steps (step_times.h) and the log reports it per window
 * ("rank_times": device_syncs, host_waits, device_allocs).
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

/* Counts one call of KIND (any thread). */
void ddp_device_call(DdpDeviceCall kind);
/* The calls counted since the program started. */
DdpDeviceCalls ddp_device_calls(void);
/* "device_syncs", "host_waits", "device_allocs": the log's names. */
const char *ddp_device_call_name(DdpDeviceCall kind);

#ifdef __cplusplus
}
#endif

#endif
