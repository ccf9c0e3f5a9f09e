/*
 * Tests of runtime/batch_upload.c: a host batch reaches the device batch
 * whole, through either landing buffer, and straight without landing (the
 * CPU build's path). The CPU's copies are done when they return, so the
 * events' order is what tests/gpu/run.sh checks on a GPU, end to end: runs
 * whose batches come from the host train to the bytes of runs whose set is
 * held on the device.
 */
#include <stdlib.h>
#include <string.h>

#include "batch_upload.h"
#include "device.h"  // ddp_host_alloc, ddp_device_alloc, ddp_event_create
#include "testutil.h"

enum { BYTES = 4099 }; /* odd: no multiple of a vector or a word */

/* Batches 0..5 of distinct bytes, each checked on the device batch (read
 * before the next upload, as a step reads it) and the landing buffers'
 * turn taken whole: a landing buffer read in place of another gives the
 * batch before. */
static void uploads(int landing)
{
    DdpBatchUpload *u = NULL;
    CU_ASSERT_FATAL(ddp_batch_upload_create_with(&u, BYTES, NULL, landing) == DDP_OK);
    CU_ASSERT_EQUAL(ddp_batch_upload_overlaps(u), landing);
    unsigned char *host = NULL, *dev = NULL;
    void *host_free = NULL;
    CU_ASSERT_FATAL(ddp_host_alloc((void **)&host, BYTES) == DDP_OK);
    CU_ASSERT_FATAL(ddp_device_alloc((void **)&dev, BYTES) == DDP_OK);
    CU_ASSERT_FATAL(ddp_event_create(&host_free) == DDP_OK);
    for (int b = 0; b < 6; b++) {
        CU_ASSERT(ddp_event_wait(host_free) == DDP_OK);
        for (int i = 0; i < BYTES; i++)
            host[i] = (unsigned char)(i * 31 + b * 7 + 1);
        size_t bytes = b == 5 ? BYTES - 100 : BYTES; /* an epoch's short last batch */
        memset(dev, 0xee, BYTES);
        CU_ASSERT(ddp_batch_upload(u, dev, host, bytes, host_free) == DDP_OK);
        CU_ASSERT(memcmp(dev, host, bytes) == 0);
        CU_ASSERT_EQUAL(dev[bytes - 1], host[bytes - 1]);
        if (bytes < BYTES)
            CU_ASSERT_EQUAL(dev[bytes], 0xee); /* no byte past the batch */
    }
    /* more than the landing buffers hold is refused, not written past them */
    CU_ASSERT(ddp_batch_upload(u, dev, host, BYTES + 1, host_free) == DDP_FAIL);
    ddp_batch_upload_destroy(u);
    ddp_batch_upload_destroy(NULL);
    ddp_event_destroy(host_free);
    ddp_host_free(host);
    ddp_device_free(dev);
}

static void test_landing(void) { uploads(1); }
static void test_straight(void) { uploads(0); }

/* The build's own choice: landing on a GPU, straight on CPU, where a second
 * copy would only cost. */
static void test_choice(void)
{
    DdpBatchUpload *u = NULL;
    CU_ASSERT_FATAL(ddp_batch_upload_create(&u, 16, NULL) == DDP_OK);
    CU_ASSERT_EQUAL(ddp_batch_upload_overlaps(u), ddp_device_is_gpu());
    ddp_batch_upload_destroy(u);
}

void suite_batch_upload(void)
{
    static const TestCase cases[] = {
        {"batches through two landing buffers arrive whole, each in turn", test_landing},
        {"batches copied straight arrive whole", test_straight},
        {"a CPU build copies straight, a GPU build lands first", test_choice},
        {NULL, NULL},
    };
    test_add_suite("batch_upload", cases);
}
