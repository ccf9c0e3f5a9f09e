/*
 * The loader's workers (runtime/loader.c) on a data set made here: every
 * batch they make holds the bytes the trainer's own thread makes of the same
 * samples (ddp_loader_make), in order, whatever the number of workers and
 * buffers; an epoch stopped in the middle and another started (a resumed
 * one, from a later batch) take up the new order; a worker's failure reaches
 * the trainer with its message; the workers end when the loader is
 * destroyed, waiting or not.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader.h"
#include "testutil.h"

enum { SAMPLES = 50, C = 2, H = 4, W = 5, BATCH = 8 };

/* A loader that lost a wakeup would hang its test: SIGALRM ends the run
 * instead ("Alarm clock"), long before CI's time runs out. */
enum { HANG_SECONDS = 60 };

static uint8_t pixels[SAMPLES * C * H * W];
static int32_t labels[SAMPLES];

static DdpDataSet data_set(void)
{
    for (int i = 0; i < SAMPLES * C * H * W; i++)
        pixels[i] = (uint8_t)(i * 7 + i / 13);
    for (int i = 0; i < SAMPLES; i++) /* past a byte's 255 too */
        labels[i] = i * 97 % 1000;
    return (DdpDataSet){.n = SAMPLES, .channels = C, .rows = H, .cols = W, .num_classes = 1000, .pixels = pixels,
                        .labels = labels, .format = "test"};
}

static const double mean[] = {0.5, 0.25}, stdev[] = {0.2, 0.3};
static const DdpDataConfig augment = {.channels = C, .mean = mean, .std = stdev, .crop_h = H, .crop_w = W,
                                      .pad = 2, .flip_h = 0.5};

static DdpLoaderSpec spec_for(const DdpDataSet *set)
{
    DdpLoaderSpec spec = {.set = set, .data = &augment, .seed = 11, .channels = C, .rows = H, .cols = W,
                          .batch = BATCH};
    spec.layout = ddp_batch_layout(BATCH, C * H * W, 0);
    return spec;
}

/* Takes batches FIRST.. of the epoch from L and checks each against the
 * batch made here of the same samples; false at the first difference. */
static int epoch_matches(DdpLoader *l, const DdpLoaderSpec *spec, int64_t epoch, const int64_t *order, int64_t first)
{
    void *want = malloc(spec->layout.bytes);
    float scratch[C * H * W];
    int same = 1;
    int64_t batches = (SAMPLES + BATCH - 1) / BATCH;
    for (int64_t b = first; b < batches && same; b++) {
        int n = (int)(SAMPLES - b * BATCH < BATCH ? SAMPLES - b * BATCH : BATCH);
        memset(want, 0, spec->layout.bytes);
        CU_ASSERT_EQUAL_FATAL(ddp_loader_make(spec, epoch, order + b * BATCH, n, want, scratch), DDP_OK);
        void *got = NULL;
        double waited = 0;
        int made = 0;
        CU_ASSERT_EQUAL_FATAL(ddp_loader_take(l, b, &got, &made, &waited), DDP_OK);
        CU_ASSERT(waited >= 0);
        CU_ASSERT_EQUAL(made, n);
        /* the batch's parts: its N ids, samples and labels (the rest of a short last batch is stale) */
        same = memcmp(got, want, (size_t)n * sizeof(int64_t)) == 0 &&
               memcmp((char *)got + spec->layout.x, (char *)want + spec->layout.x,
                      (size_t)n * C * H * W * sizeof(float)) == 0 &&
               memcmp((char *)got + spec->layout.labels, (char *)want + spec->layout.labels,
                      (size_t)n * sizeof(int32_t)) == 0;
        ddp_loader_release(l, b);
    }
    free(want);
    return same;
}

static void shuffle(int64_t *order, unsigned seed)
{
    for (int i = 0; i < SAMPLES; i++)
        order[i] = i;
    for (int i = SAMPLES - 1; i > 0; i--) {
        seed = seed * 1103515245u + 12345u;
        int j = (int)(seed % (unsigned)(i + 1));
        int64_t k = order[i];
        order[i] = order[j];
        order[j] = k;
    }
}

static void test_batches_as_made_here(void)
{
    alarm(HANG_SECONDS);
    DdpDataSet set = data_set();
    DdpLoaderSpec spec = spec_for(&set);
    static const int shapes[][2] = {{1, 2}, {2, 4}, {4, 5}};
    int64_t order[SAMPLES];
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        DdpLoader *l = NULL;
        CU_ASSERT_EQUAL_FATAL(ddp_loader_create(&l, shapes[k][0], shapes[k][1], &spec), DDP_OK);
        for (int64_t epoch = 0; epoch < 3; epoch++) {
            shuffle(order, (unsigned)(epoch + 1));
            ddp_loader_start(l, epoch, order, SAMPLES, 0);
            CU_ASSERT(epoch_matches(l, &spec, epoch, order, 0));
        }
        ddp_loader_destroy(l);
    }
    alarm(0);
}

/* An epoch left after two batches, with the workers ahead of it; the next
 * (as a resumed run's first) from its batch 3. */
static void test_epochs_stopped_and_resumed(void)
{
    alarm(HANG_SECONDS);
    DdpDataSet set = data_set();
    DdpLoaderSpec spec = spec_for(&set);
    DdpLoader *l = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_loader_create(&l, 2, 4, &spec), DDP_OK);
    int64_t order[SAMPLES];
    shuffle(order, 5);
    ddp_loader_start(l, 0, order, SAMPLES, 0);
    void *buf;
    double waited = 0;
    int n = 0;
    CU_ASSERT_EQUAL(ddp_loader_take(l, 0, &buf, &n, &waited), DDP_OK);
    ddp_loader_release(l, 0);
    CU_ASSERT_EQUAL(ddp_loader_take(l, 1, &buf, &n, &waited), DDP_OK);
    /* stopped while the trainer holds batch 1: its buffer stays untouched
     * until released (a copy may still read it) */
    void *held = buf;
    char before[64];
    memcpy(before, held, sizeof before);
    ddp_loader_stop(l);
    shuffle(order, 9);
    ddp_loader_start(l, 5, order, SAMPLES, 0);
    CU_ASSERT_EQUAL_FATAL(ddp_loader_take(l, 0, &buf, &n, &waited), DDP_OK);
    CU_ASSERT_PTR_NOT_EQUAL(buf, held);
    ddp_loader_release(l, 0);
    /* batch 1 needs the held slot: refused rather than waited for (the
     * trainer releases its batch before it stops the loader) */
    CU_ASSERT_EQUAL(ddp_loader_take(l, 1, &buf, &n, &waited), DDP_FAIL);
    CU_ASSERT(memcmp(before, held, sizeof before) == 0);
    ddp_loader_release(l, 1); /* the old hold */
    CU_ASSERT_EQUAL(ddp_loader_take(l, 1, &buf, &n, &waited), DDP_OK);
    ddp_loader_release(l, 1);
    ddp_loader_stop(l);
    /* a batch not being made is refused, not waited for */
    CU_ASSERT_EQUAL(ddp_loader_take(l, 0, &buf, &n, &waited), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "is not being made"));
    shuffle(order, 6); /* the sampler rewrites the order once the loader has stopped */
    ddp_loader_start(l, 1, order, SAMPLES, 3);
    CU_ASSERT(epoch_matches(l, &spec, 1, order, 3));
    /* destroyed with batches made ahead and workers waiting for buffers */
    shuffle(order, 7);
    ddp_loader_start(l, 2, order, SAMPLES, 0);
    ddp_loader_destroy(l);
    alarm(0);
}

static void test_failure_reaches_the_trainer(void)
{
    alarm(HANG_SECONDS);
    DdpDataSet set = data_set();
    DdpLoaderSpec spec = spec_for(&set);
    DdpLoader *l = NULL;
    CU_ASSERT_EQUAL_FATAL(ddp_loader_create(&l, 2, 3, &spec), DDP_OK);
    int64_t order[SAMPLES];
    shuffle(order, 1);
    order[BATCH + 3] = SAMPLES + 4; /* in batch 1: no such sample */
    ddp_loader_start(l, 0, order, SAMPLES, 0);
    void *buf;
    double waited = 0;
    int n = 0;
    CU_ASSERT_EQUAL(ddp_loader_take(l, 0, &buf, &n, &waited), DDP_OK);
    ddp_loader_release(l, 0);
    CU_ASSERT_EQUAL(ddp_loader_take(l, 1, &buf, &n, &waited), DDP_FAIL);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "sample index 54 is outside the data set (0..49)"));
    ddp_loader_destroy(l);

    CU_ASSERT_EQUAL(ddp_loader_create(&l, 2, 2, &spec), DDP_FAIL); /* no buffer to spare */
    CU_ASSERT_PTR_NULL(l);
    alarm(0);
}

/* With the input made on the device, a batch holds the samples as the set
 * holds them, after the ids and labels, each part 256-byte aligned; only
 * that much is the host's. A layout for samples of another size is refused,
 * not overrun. */
static void test_raw_batches(void)
{
    DdpDataSet set = data_set();
    DdpLoaderSpec spec = spec_for(&set);
    spec.layout = ddp_batch_layout(BATCH, C * H * W, C * H * W);
    DdpBatchLayout plain = ddp_batch_layout(BATCH, C * H * W, 0);
    CU_ASSERT(spec.layout.labels % 256 == 0 && spec.layout.raw % 256 == 0 && spec.layout.x % 256 == 0);
    CU_ASSERT(spec.layout.raw >= spec.layout.labels + BATCH * sizeof(int32_t));
    CU_ASSERT(spec.layout.x >= spec.layout.raw + BATCH * C * H * W);
    CU_ASSERT_EQUAL(spec.layout.host_bytes, spec.layout.x);
    CU_ASSERT_EQUAL(spec.layout.bytes, spec.layout.x + (plain.bytes - plain.x));
    CU_ASSERT_EQUAL(plain.host_bytes, plain.bytes);

    char *buf = calloc(1, spec.layout.bytes);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    const int64_t ids[3] = {49, 0, 17};
    CU_ASSERT_EQUAL(ddp_loader_make(&spec, 2, ids, 3, buf, NULL), DDP_OK);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT(memcmp(buf + spec.layout.raw + (size_t)i * C * H * W, pixels + ids[i] * C * H * W, C * H * W) == 0);
        CU_ASSERT_EQUAL(((int32_t *)(buf + spec.layout.labels))[i], labels[ids[i]]);
        CU_ASSERT_EQUAL(((int32_t *)(buf + spec.layout.labels))[i], (int32_t)ids[i] * 97 % 1000);
        CU_ASSERT_EQUAL(((int64_t *)(buf + spec.layout.ids))[i], ids[i]);
    }
    spec.layout = ddp_batch_layout(BATCH, C * H * W, C * H * W * sizeof(float)); /* floats, but the set holds bytes */
    CU_ASSERT_EQUAL(ddp_loader_make(&spec, 2, ids, 3, buf, NULL), DDP_FAIL);
    free(buf);
}

static void test_default_workers(void)
{
    CU_ASSERT_EQUAL(ddp_loader_default_workers(0, 64, 1), 1); /* CPUs: the step's threads have the cores */
    CU_ASSERT_EQUAL(ddp_loader_default_workers(1, 16, 1), 8);
    CU_ASSERT_EQUAL(ddp_loader_default_workers(1, 16, 4), 3);
    CU_ASSERT_EQUAL(ddp_loader_default_workers(1, 8, 8), 1);
    CU_ASSERT_EQUAL(ddp_loader_default_workers(1, 2, 4), 1);
}

void suite_loader(void)
{
    static const TestCase cases[] = {
        {"workers make the batches the trainer would, in order (1, 2 and 4 workers)", test_batches_as_made_here},
        {"an epoch stopped midway (a batch held), the next started from a later batch", test_epochs_stopped_and_resumed},
        {"a worker's failure reaches the trainer with its message", test_failure_reaches_the_trainer},
        {"--workers' default: 1 on CPUs, the rank's cores less one on GPUs", test_default_workers},
        {"raw batches for the device: the set's bytes, aligned; another sample size refused", test_raw_batches},
        {NULL, NULL},
    };
    test_add_suite("loader", cases);
}
