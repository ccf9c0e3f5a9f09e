/*
 * batch_upload.c: batch_upload.h, through device.h alone, so the CPU build
 * runs the same code (with the landing path chosen, as the tests do).
 */
#include "batch_upload.h"

#include <stdlib.h>

#include "device.h"  // ddp_stream_*, ddp_event_*, ddp_copy_*, ddp_device_alloc

enum { LANDINGS = 2 }; /* one being copied into, one being moved out of */

struct DdpBatchUpload {
    void *compute_stream;
    void *copy_stream; /* NULL without landing, and on CPU */
    int landing;       /* whether batches land first */
    size_t bytes;      /* a landing buffer's */
    void *buffer[LANDINGS];
    void *copied[LANDINGS]; /* events: the copy into buffer[i] done */
    void *moved[LANDINGS];  /* events: the move out of buffer[i] done */
    int next;               /* the landing buffer the next batch takes */
};

DdpStatus ddp_batch_upload_create(DdpBatchUpload **out, size_t bytes, void *compute_stream)
{
    return ddp_batch_upload_create_with(out, bytes, compute_stream, ddp_device_is_gpu());
}

DdpStatus ddp_batch_upload_create_with(DdpBatchUpload **out, size_t bytes, void *compute_stream, int landing)
{
    *out = NULL;
    DdpBatchUpload *u = calloc(1, sizeof *u);
    if (!u)
        return DDP_ERR(DDP_FAIL, "out of memory");
    *out = u;
    u->compute_stream = compute_stream;
    u->landing = landing;
    u->bytes = bytes;
    if (!landing)
        return DDP_OK;
    DDP_CHECK(ddp_stream_create(&u->copy_stream));
    for (int i = 0; i < LANDINGS; i++) {
        DDP_CHECK(ddp_device_alloc(&u->buffer[i], bytes));
        DDP_CHECK(ddp_event_create(&u->copied[i]));
        DDP_CHECK(ddp_event_create(&u->moved[i]));
    }
    return DDP_OK;
}

void ddp_batch_upload_destroy(DdpBatchUpload *u)
{
    if (!u)
        return;
    ddp_stream_destroy(u->copy_stream); /* waits for its copies first */
    for (int i = 0; i < LANDINGS; i++) {
        ddp_device_free(u->buffer[i]);
        ddp_event_destroy(u->copied[i]);
        ddp_event_destroy(u->moved[i]);
    }
    free(u);
}

DdpStatus ddp_batch_upload(DdpBatchUpload *u, void *dst, const void *src, size_t bytes, void *host_free)
{
    if (bytes > u->bytes)
        return DDP_ERR(DDP_FAIL, "internal error: a batch of %zu bytes for landing buffers of %zu", bytes, u->bytes);
    if (!u->landing) {
        DDP_CHECK(ddp_copy_to_device(dst, src, bytes, u->compute_stream));
        return ddp_event_record(host_free, u->compute_stream);
    }
    int i = u->next;
    u->next = (u->next + 1) % LANDINGS;
    /* an event never recorded has passed: the first two copies wait for nothing */
    DDP_CHECK(ddp_stream_wait(u->copy_stream, u->moved[i]));
    DDP_CHECK(ddp_copy_to_device(u->buffer[i], src, bytes, u->copy_stream));
    DDP_CHECK(ddp_event_record(host_free, u->copy_stream));
    DDP_CHECK(ddp_event_record(u->copied[i], u->copy_stream));
    DDP_CHECK(ddp_stream_wait(u->compute_stream, u->copied[i]));
    DDP_CHECK(ddp_copy_on_device(dst, u->buffer[i], bytes, u->compute_stream));
    return ddp_event_record(u->moved[i], u->compute_stream);
}

int ddp_batch_upload_overlaps(const DdpBatchUpload *u) { return u->landing; }
