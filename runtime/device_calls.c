/*
 * device_calls.c: the counters of device_calls.h, one per kind, atomic
 * because the loader's threads allocate their staging memory while the
 * trainer may be counting its own calls.
 */
#include "device_calls.h"

#include <stdatomic.h>

static _Atomic int64_t counts[DDP_CALL_KINDS];

void ddp_device_call_note(DdpDeviceCall kind)
{
    if (kind >= 0 && kind < DDP_CALL_KINDS)
        atomic_fetch_add_explicit(&counts[kind], 1, memory_order_relaxed);
}

DdpDeviceCalls ddp_device_calls_read(void)
{
    DdpDeviceCalls c;
    for (int k = 0; k < DDP_CALL_KINDS; k++)
        c.count[k] = atomic_load_explicit(&counts[k], memory_order_relaxed);
    return c;
}

const char *ddp_device_call_name(DdpDeviceCall kind)
{
    switch (kind) {
    case DDP_CALL_SYNC: return "device_syncs";
    case DDP_CALL_WAIT: return "host_waits";
    case DDP_CALL_ALLOC: return "device_allocs";
    case DDP_CALL_KINDS: break;
    }
    return "device_calls";
}
