/*
 * batch_upload.h: a batch's way from pinned host memory to the device batch
 * the step reads, overlapped with the step before.
 *
 * A copy queued on the compute stream waits there behind everything the host
 * has queued already: the whole step before, as the host runs a step ahead.
 * So on a GPU each batch crosses on a copy stream of its own, into one of two
 * landing buffers on the device, while the step before still runs; the
 * compute stream then waits for that copy on the device (an event, not the
 * host) and moves the batch from the landing buffer to the device batch with
 * one device-to-device copy, a few microseconds at HBM speed. The device
 * batch itself stays where it is, so the step's CUDA graph (step_graphs.h),
 * which holds its address, stays valid.
 *
 * Two landing buffers, each with two events: "copied" (recorded on the copy
 * stream, after the copy into it) and "moved" (recorded on the compute
 * stream, after the move out of it). A copy into a landing buffer waits, on
 * the copy stream, for that buffer's last move. The host's buffer is free
 * again once the event the caller passes has passed (it is recorded after
 * the copy, on the copy stream).
 *
 * On CPU, where a copy is a memcpy done when it returns and there is no
 * second stream, the batch is copied straight to the device batch, as it
 * always was: no landing, no second copy. ddp_batch_upload_create_with runs
 * the landing path anyway, so the CPU tests check its buffers.
 */
#ifndef DDPRT_BATCH_UPLOAD_H
#define DDPRT_BATCH_UPLOAD_H

#include <stddef.h>

#include "status.h"

typedef struct DdpBatchUpload DdpBatchUpload;

/* For batches of at most BYTES, moved into device batches read on
 * COMPUTE_STREAM: landing buffers and a copy stream where the device has a
 * second stream (GPUs), none on CPU. */
DdpStatus ddp_batch_upload_create(DdpBatchUpload **out, size_t bytes, void *compute_stream);
/* The same, with the landing path (LANDING 1) or without (0) chosen by the
 * caller: the unit tests' way to run the landing path on CPU. */
DdpStatus ddp_batch_upload_create_with(DdpBatchUpload **out, size_t bytes, void *compute_stream, int landing);
void ddp_batch_upload_destroy(DdpBatchUpload *u);

/* Queues BYTES of pinned host SRC to device DST, which work queued on the
 * compute stream after this reads. HOST_FREE (an event, ddp_event_create)
 * is recorded once SRC may be written again. */
DdpStatus ddp_batch_upload(DdpBatchUpload *u, void *dst, const void *src, size_t bytes, void *host_free);

/* Whether batches land first (a copy stream of their own): for the
 * start-up line. */
int ddp_batch_upload_overlaps(const DdpBatchUpload *u);

#endif
