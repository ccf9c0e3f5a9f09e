/*
 * ops_failure.h: how both implementations of the library ops (ops_cpu.c,
 * ops_cuda.cu) keep the first failure of a per-step call. The per-step calls
 * return nothing (a hot path), so the failure is recorded here with where it
 * was seen, and ddp_ops_status reports it once per step.
 */
#ifndef DDPRT_OPS_FAILURE_H
#define DDPRT_OPS_FAILURE_H

#include <stdarg.h>
#include <stdio.h>

#include "status.h"  // DdpStatus, ddp_error_at

typedef struct {
    DdpStatus status;
    const char *file;
    int line;
    char message[256];
} DdpOpsFailure;

/* Keeps the first failure only: later ones are usually its consequences. */
__attribute__((format(printf, 4, 5)))
static inline void ddp_ops_failure_record(DdpOpsFailure *f, const char *file, int line, const char *fmt, ...)
{
    if (f->status != DDP_OK)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
    f->status = DDP_FAIL;
    f->file = file;
    f->line = line;
}

/* No failure kept, as at the start. */
static inline void ddp_ops_failure_clear(DdpOpsFailure *f)
{
    f->status = DDP_OK;
    f->file = NULL;
    f->line = 0;
    f->message[0] = '\0';
}

/* DDP_OK, or the failure raised again as the runtime's last error. */
static inline DdpStatus ddp_ops_failure_status(const DdpOpsFailure *f)
{
    if (f->status == DDP_OK)
        return DDP_OK;
    return ddp_error_at(f->status, f->file, f->line, "%s", f->message);
}

#endif
