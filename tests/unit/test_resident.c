/*
 * Tests of runtime/resident.c and resident_cpu.c: when the training set is
 * held on the device (DDP_DATA_RESIDENT, a GPU's quarter of free memory),
 * and that a batch gathered from the resident set is, byte for byte, the
 * batch the loader makes on the host for the same samples. (The GPU's
 * gather, resident_cuda.cu, is checked against the host's path end to end
 * by tests/gpu/run.sh; tests/distributed/resident.sh trains both ways.)
 */
#include <stdlib.h>
#include <string.h>

#include "loader.h"    // ddp_loader_make, ddp_batch_layout: the host's batch
#include "resident.h"  // ddp_resident_*
#include "testutil.h"

enum { N = 50, C = 1, H = 3, W = 5 };

static uint8_t pixels[N * C * H * W];
static float values[N * C * H * W];
static int32_t labels[N];

static DdpDataSet set_of(int floats)
{
    for (int i = 0; i < N * C * H * W; i++) {
        pixels[i] = (uint8_t)(i * 7 + 3);
        values[i] = (float)i * 0.25f - 3.0f;
    }
    for (int i = 0; i < N; i++)
        labels[i] = (i * 3) % 10;
    DdpDataSet s = {.n = N, .channels = C, .rows = H, .cols = W, .num_classes = 10, .labels = labels};
    if (floats)
        s.values = values;
    else
        s.pixels = pixels;
    return s;
}

static void test_choose(void)
{
    DdpDataSet s = set_of(0);
    size_t bytes = ddp_resident_bytes(&s);
    CU_ASSERT_EQUAL(bytes, (size_t)N * (C * H * W + sizeof(int32_t) + sizeof(int64_t)));
    int r = -1;
    char why[160];
    /* unset: a GPU's, within a quarter of its free memory */
    CU_ASSERT(ddp_resident_choose(NULL, 1, 1, &s, 4 * bytes, &r, why, sizeof why) == DDP_OK && r == 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "within a quarter"));
    CU_ASSERT(ddp_resident_choose(NULL, 1, 1, &s, 4 * bytes - 1, &r, why, sizeof why) == DDP_OK && r == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "more than a quarter"));
    CU_ASSERT(ddp_resident_choose("", 1, 1, &s, 0, &r, why, sizeof why) == DDP_OK && r == 0); /* free unknown */
    CU_ASSERT_STRING_EQUAL(why, "the device's free memory unknown");
    CU_ASSERT(ddp_resident_choose(NULL, 0, 1, &s, 1 << 30, &r, why, sizeof why) == DDP_OK && r == 0); /* a CPU */
    CU_ASSERT(ddp_resident_choose(NULL, 1, 0, &s, 1 << 30, &r, why, sizeof why) == DDP_OK && r == 0); /* host input */
    /* asked */
    CU_ASSERT(ddp_resident_choose("1", 0, 1, &s, 0, &r, why, sizeof why) == DDP_OK && r == 1);
    CU_ASSERT_STRING_EQUAL(why, "DDP_DATA_RESIDENT=1");
    CU_ASSERT(ddp_resident_choose("0", 1, 1, &s, 1 << 30, &r, why, sizeof why) == DDP_OK && r == 0);
    CU_ASSERT(ddp_resident_choose("yes", 1, 1, &s, 0, &r, why, sizeof why) == DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "DDP_DATA_RESIDENT=yes: say 1"));
    CU_ASSERT(ddp_resident_choose("1", 1, 0, &s, 0, &r, why, sizeof why) == DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "the net's input is made on the host"));
    CU_ASSERT(ddp_resident_choose("1", 1, 1, &s, bytes - 1, &r, why, sizeof why) == DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "larger than the device's free memory"));
    char *files[N] = {0};
    DdpDataSet images = s;
    images.pixels = NULL;
    images.files = files;
    CU_ASSERT_EQUAL(ddp_resident_bytes(&images), 0);
    CU_ASSERT(ddp_resident_choose(NULL, 1, 1, &images, 1 << 30, &r, why, sizeof why) == DDP_OK && r == 0);
    CU_ASSERT(ddp_resident_choose("1", 1, 1, &images, 1 << 30, &r, why, sizeof why) == DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "image files"));
    DdpDataSet floats = set_of(1);
    CU_ASSERT_EQUAL(ddp_resident_bytes(&floats),
                    (size_t)N * (C * H * W * sizeof(float) + sizeof(int32_t) + sizeof(int64_t)));
}

/* The loader's batch and the resident gather's, for the same indices, in
 * buffers laid out alike and filled with different garbage first. */
static void same_batch(int floats)
{
    DdpDataSet s = set_of(floats);
    enum { BATCH = 8 };
    DdpBatchLayout layout = ddp_batch_layout(BATCH, C * H * W, ddp_data_raw_bytes(&s));
    DdpLoaderSpec spec = {.set = &s, .batch = BATCH, .channels = C, .rows = H, .cols = W, .layout = layout};
    unsigned char *host = malloc(layout.bytes), *dev = malloc(layout.bytes);
    CU_ASSERT_FATAL(host && dev);
    DdpResidentSet *r = NULL;
    CU_ASSERT_FATAL(ddp_resident_create(&r, &s, NULL) == DDP_OK);
    const int64_t ids[][BATCH] = {{0, 49, 7, 7, 12, 33, 1, 48}, {5, 4, 3, 2, 1, 0, 0, 0}};
    const int counts[] = {BATCH, 5};
    for (int k = 0; k < 2; k++) {
        memset(host, 0xa5, layout.bytes);
        memset(dev, 0x5a, layout.bytes);
        CU_ASSERT(ddp_loader_make(&spec, 1, ids[k], counts[k], host, NULL) == DDP_OK);
        CU_ASSERT(ddp_resident_gather(r, ids[k], counts[k], &layout, dev, NULL) == DDP_OK);
        size_t n = (size_t)counts[k];
        CU_ASSERT(memcmp(host + layout.ids, dev + layout.ids, n * sizeof(int64_t)) == 0);
        CU_ASSERT(memcmp(host + layout.labels, dev + layout.labels, n * sizeof(int32_t)) == 0);
        CU_ASSERT(memcmp(host + layout.raw, dev + layout.raw, n * layout.raw_sample) == 0);
        CU_ASSERT_EQUAL(((int32_t *)(dev + layout.labels))[1], labels[ids[k][1]]);
    }
    DdpBatchLayout other = ddp_batch_layout(BATCH, C * H * W, ddp_data_raw_bytes(&s) + 1);
    CU_ASSERT(ddp_resident_gather(r, ids[0], BATCH, &other, dev, NULL) == DDP_FAIL);
    ddp_resident_destroy(r);
    ddp_resident_destroy(NULL);
    free(host);
    free(dev);
}

static void test_gather_bytes(void) { same_batch(0); }
static void test_gather_floats(void) { same_batch(1); }

void suite_resident(void)
{
    static const TestCase cases[] = {
        {"DDP_DATA_RESIDENT and a GPU's quarter of free memory decide; what cannot be resident is refused",
         test_choose},
        {"a batch gathered from the resident set = the loader's, bytes", test_gather_bytes},
        {"a batch gathered from the resident set = the loader's, float data", test_gather_floats},
        {NULL, NULL},
    };
    test_add_suite("resident", cases);
}
