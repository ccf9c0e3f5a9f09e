/*
 * The data { } block on samples made by hand (runtime/augment.c): crops at
 * the corners, zero and reflect padding, flips, normalize, against arrays
 * written out here; the draws a function of (seed, epoch, sample) alone, so
 * that a sample augments alike in any batch; the start-up check of a
 * program's table. (tests/unit/test_emit_torch.c checks the emitted
 * module's transform against this code, bit for bit.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"
#include "augment_device.h"  // ddp_augment_on_device: the input made of raw samples
#include "testutil.h"

enum { H = 3, W = 4, NUMEL = H * W };

/* v[y][x] = 10 y + x, one channel of H x W */
static void fill(float *x)
{
    for (int y = 0; y < H; y++)
        for (int c = 0; c < W; c++)
            x[y * W + c] = (float)(10 * y + c);
}

/* A sample id whose crop, of D on H x W images with seed 0 in epoch 0,
 * starts at (TOP, LEFT) of the padded image; -1 if none of the first
 * 10,000 does. */
static int64_t id_cropped_at(const DdpDataConfig *d, int top, int left)
{
    uint32_t rows = (uint32_t)(H + 2 * d->pad - d->crop_h + 1), cols = (uint32_t)(W + 2 * d->pad - d->crop_w + 1);
    for (int64_t id = 0; id < 10000; id++) {
        uint32_t key = ddp_augment_key(0, 0, id);
        if (ddp_augment_draw(key, DDP_DRAW_CROP_ROW) % rows == (uint32_t)top &&
            ddp_augment_draw(key, DDP_DRAW_CROP_COLUMN) % cols == (uint32_t)left)
            return id;
    }
    return -1;
}

static void expect_sample(const DdpDataConfig *d, int64_t id, const float want[NUMEL], const char *what)
{
    float x[NUMEL], scratch[NUMEL];
    fill(x);
    ddp_augment_batch(d, 0, 0, &id, 1, 1, H, W, x, scratch);
    int same = memcmp(x, want, sizeof x) == 0;
    if (!same) {
        fprintf(stderr, "\n%s (sample %lld):", what, (long long)id);
        for (int i = 0; i < NUMEL; i++)
            fprintf(stderr, "%s%g/%g", i % W ? " " : "\n  ", x[i], want[i]);
    }
    CU_ASSERT(same);
}

static void test_crops_at_the_corners(void)
{
    DdpDataConfig d = {.crop_h = H, .crop_w = W, .pad = 1};
    int64_t first = id_cropped_at(&d, 0, 0), last = id_cropped_at(&d, 2, 2), middle = id_cropped_at(&d, 1, 1);
    CU_ASSERT_FATAL(first >= 0 && last >= 0 && middle >= 0);
    /* the window's top left at the padding's corner: a zero row and column first */
    static const float zero_top_left[NUMEL] = {0, 0, 0, 0, 0, 0, 1, 2, 0, 10, 11, 12};
    expect_sample(&d, first, zero_top_left, "zero padding, crop at (0, 0)");
    static const float zero_bottom_right[NUMEL] = {11, 12, 13, 0, 21, 22, 23, 0, 0, 0, 0, 0};
    expect_sample(&d, last, zero_bottom_right, "zero padding, crop at (2, 2)");
    static const float unmoved[NUMEL] = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23};
    expect_sample(&d, middle, unmoved, "crop at (1, 1): the image itself");

    /* reflect: row -1 is row 1, column -1 column 1, row 3 row 1, column 4 column 2 */
    d.pad_mode = DDP_PAD_REFLECT;
    static const float reflect_top_left[NUMEL] = {11, 10, 11, 12, 1, 0, 1, 2, 11, 10, 11, 12};
    expect_sample(&d, first, reflect_top_left, "reflect padding, crop at (0, 0)");
    static const float reflect_bottom_right[NUMEL] = {11, 12, 13, 12, 21, 22, 23, 22, 11, 12, 13, 12};
    expect_sample(&d, last, reflect_bottom_right, "reflect padding, crop at (2, 2)");
}

static void test_flips_and_normalize(void)
{
    DdpDataConfig mirror = {.flip_h = 1};
    static const float left_right[NUMEL] = {3, 2, 1, 0, 13, 12, 11, 10, 23, 22, 21, 20};
    expect_sample(&mirror, 5, left_right, "flip horizontal p=1");
    DdpDataConfig upside_down = {.flip_v = 1};
    static const float top_bottom[NUMEL] = {20, 21, 22, 23, 10, 11, 12, 13, 0, 1, 2, 3};
    expect_sample(&upside_down, 5, top_bottom, "flip vertical p=1");

    /* normalize: (x - mean) / std, each rounded to float, in training and after */
    static const double mean[] = {0.1}, std[] = {0.3};
    DdpDataConfig norm = {.channels = 1, .mean = mean, .std = std};
    float want[NUMEL];
    fill(want);
    for (int i = 0; i < NUMEL; i++)
        want[i] = (want[i] - 0.1f) / 0.3f;
    expect_sample(&norm, 5, want, "normalize mean=0.1 std=0.3");
    float x[NUMEL], scratch[NUMEL];
    fill(x);
    int64_t id = 5;
    ddp_augment_batch(&norm, 0, -1, &id, 1, 1, H, W, x, scratch);
    CU_ASSERT(memcmp(x, want, sizeof x) == 0);

    /* an evaluation batch (epoch < 0) is normalized, not flipped */
    DdpDataConfig both = {.channels = 1, .mean = mean, .std = std, .flip_h = 1};
    fill(x);
    ddp_augment_batch(&both, 0, -1, &id, 1, 1, H, W, x, scratch);
    CU_ASSERT(memcmp(x, want, sizeof x) == 0);
}

/* Every channel of a sample takes the same crop and flip. */
static void test_channels_move_together(void)
{
    static const double mean[] = {0, 0}, std[] = {1, 1};
    DdpDataConfig d = {.channels = 2, .mean = mean, .std = std, .crop_h = H, .crop_w = W, .pad = 2, .flip_h = 0.5};
    float x[2 * NUMEL], scratch[2 * NUMEL];
    for (int64_t id = 0; id < 50; id++) {
        fill(x);
        fill(x + NUMEL);
        for (int i = 0; i < NUMEL; i++)
            x[NUMEL + i] += 100;
        ddp_augment_batch(&d, 9, 4, &id, 1, 2, H, W, x, scratch);
        for (int i = 0; i < NUMEL; i++)
            CU_ASSERT(x[NUMEL + i] == (x[i] == 0 ? 0 : x[i] + 100) || (x[i] == 0 && x[NUMEL + i] == 100));
    }
}

/* A sample's draws depend on (seed, epoch, sample id) only: alone or in a
 * batch, first or last, it augments alike; another epoch or seed draws anew. */
static void test_draws_follow_the_sample(void)
{
    DdpDataConfig d = {.crop_h = H, .crop_w = W, .pad = 1, .flip_h = 0.5, .flip_v = 0.5};
    enum { N = 64 };
    int64_t ids[N];
    float *batch = malloc(sizeof(float) * N * NUMEL), scratch[NUMEL], alone[NUMEL];
    CU_ASSERT_PTR_NOT_NULL_FATAL(batch);
    for (int i = 0; i < N; i++) {
        ids[i] = 1000 + 37 * (int64_t)i;
        fill(batch + i * NUMEL);
    }
    ddp_augment_batch(&d, 3, 2, ids, N, 1, H, W, batch, scratch);
    int unmoved = 0, other_epoch = 0, other_seed = 0;
    for (int i = 0; i < N; i++) {
        fill(alone);
        ddp_augment_batch(&d, 3, 2, &ids[i], 1, 1, H, W, alone, scratch);
        CU_ASSERT(memcmp(alone, batch + i * NUMEL, sizeof alone) == 0);
        float untouched[NUMEL];
        fill(untouched);
        unmoved += memcmp(alone, untouched, sizeof alone) == 0;
        fill(alone);
        ddp_augment_batch(&d, 3, 3, &ids[i], 1, 1, H, W, alone, scratch);
        other_epoch += memcmp(alone, batch + i * NUMEL, sizeof alone) != 0;
        fill(alone);
        ddp_augment_batch(&d, 4, 2, &ids[i], 1, 1, H, W, alone, scratch);
        other_seed += memcmp(alone, batch + i * NUMEL, sizeof alone) != 0;
    }
    free(batch);
    /* 9 crops x 4 flips: 1 in 36 leaves a sample as it was */
    CU_ASSERT(unmoved < N / 8);
    CU_ASSERT(other_epoch > N / 2);
    CU_ASSERT(other_seed > N / 2);

    /* p = 0.5 flips about half; every crop place is drawn */
    int flipped = 0, places[3] = {0};
    for (int64_t id = 0; id < 10000; id++) {
        uint32_t key = ddp_augment_key(7, 1, id);
        flipped += (double)ddp_augment_draw(key, DDP_DRAW_FLIP_H) < 0.5 * 4294967296.0;
        places[ddp_augment_draw(key, DDP_DRAW_CROP_ROW) % 3]++;
    }
    CU_ASSERT(flipped > 4800 && flipped < 5200);
    for (int i = 0; i < 3; i++)
        CU_ASSERT(places[i] > 3000);
}

static void test_table_checked_at_start(void)
{
    static const double mean[] = {0.5, 0.5}, std[] = {0.2, 0}, one_std[] = {0.2, 0.2};
    DdpDataConfig ok = {.channels = 2, .mean = mean, .std = one_std, .crop_h = 8, .crop_w = 6, .pad = 5,
                        .pad_mode = DDP_PAD_REFLECT, .flip_h = 0.5};
    CU_ASSERT_EQUAL(ddp_augment_check(&ok, 2, 8, 6), DDP_OK);
    DdpDataConfig none = {0};
    CU_ASSERT_EQUAL(ddp_augment_check(&none, 3, 1, 1), DDP_OK);
    CU_ASSERT(!ddp_augment_any(&none));

    DdpDataConfig bad = ok;
    CU_ASSERT_EQUAL(ddp_augment_check(&bad, 3, 8, 6), DDP_BAD_INPUT); /* 2 channels normalized of 3 */
    CU_ASSERT(strstr(ddp_error_message(), "normalizes 2 channels, but a sample has 3") != NULL);
    bad.std = std;
    CU_ASSERT_EQUAL(ddp_augment_check(&bad, 2, 8, 6), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), "each must be finite in float, and std above 0") != NULL);
    bad = ok;
    CU_ASSERT_EQUAL(ddp_augment_check(&bad, 2, 8, 8), DDP_BAD_INPUT); /* the crop is not the sample's size */
    bad.pad = 6;
    CU_ASSERT_EQUAL(ddp_augment_check(&bad, 2, 8, 6), DDP_BAD_INPUT); /* reflect past the edge */
    CU_ASSERT(strstr(ddp_error_message(), "crops 8x6 padded by 6 (reflect), but a sample is 8x6") != NULL);
    bad = ok;
    bad.pad_mode = (DdpPadMode)2; /* neither mode: would have been read as reflect */
    CU_ASSERT_EQUAL(ddp_augment_check(&bad, 2, 8, 6), DDP_BAD_INPUT);
    bad = ok;
    bad.mean = NULL;
    CU_ASSERT_EQUAL(ddp_augment_check(&bad, 2, 8, 6), DDP_BAD_INPUT);
    static const double tiny[] = {0.2, 1e-50}; /* 0 in float */
    bad = ok;
    bad.std = tiny;
    CU_ASSERT_EQUAL(ddp_augment_check(&bad, 2, 8, 6), DDP_BAD_INPUT);
    bad = ok;
    bad.flip_v = 1.5;
    CU_ASSERT_EQUAL(ddp_augment_check(&bad, 2, 8, 6), DDP_BAD_INPUT);

    char text[256];
    ddp_augment_describe(&ok, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, "random crop 8x6 of the sample padded by 5 (reflect), left-right flip p=0.5, then "
                                 "normalize 2 channels");
    ddp_augment_describe(&none, text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, "");
    char tight[20]; /* cut short, never past the end */
    ddp_augment_describe(&ok, tight, sizeof tight);
    CU_ASSERT_STRING_EQUAL(tight, "random crop 8x6 of ");

    /* the ranks compare a digest of the table: each field counts */
    uint64_t digest = ddp_augment_digest(&ok);
    bad = ok;
    bad.flip_h = 0.25;
    CU_ASSERT_NOT_EQUAL(ddp_augment_digest(&bad), digest);
    static const double other_mean[] = {0.5, 0.4};
    bad = ok;
    bad.mean = other_mean;
    CU_ASSERT_NOT_EQUAL(ddp_augment_digest(&bad), digest);
    bad = ok;
    bad.pad = 4;
    CU_ASSERT_NOT_EQUAL(ddp_augment_digest(&bad), digest);
}

/* The device's input of raw samples, one element at a time
 * (augment_device.h; this build's device is the host, and the GPU build runs
 * the same ddp_augment_element), against the host's: the samples as floats
 * (pixel / 255, or the floats themselves), then ddp_augment_batch. Bytes
 * and floats; a crop of a non-square sample padded by zeros and by
 * reflection, flips, normalize of 3 channels, each alone and together;
 * training batches of two epochs and an evaluation batch. */
static void test_device_input_is_the_hosts(void)
{
    enum { N = 6, C = 3, HH = 7, WW = 9, SAMPLE = C * HH * WW };
    static const double mean[C] = {0.49, 0.48, 0.45}, stdev[C] = {0.25, 0.24, 0.26};
    const DdpDataConfig blocks[] = {
        {.channels = C, .mean = mean, .std = stdev, .crop_h = HH, .crop_w = WW, .pad = 3, .flip_h = 0.5},
        {.crop_h = HH, .crop_w = WW, .pad = 2, .pad_mode = DDP_PAD_REFLECT, .flip_v = 0.3},
        {.flip_h = 0.5, .flip_v = 0.5},
        {.channels = C, .mean = mean, .std = stdev},
        {0},
    };
    const int64_t ids[N] = {0, 1, 17, 40000, 4000000000LL, 3};
    const int64_t epochs[] = {0, 5, -1};
    uint8_t bytes[N * SAMPLE];
    float floats[N * SAMPLE], host[N * SAMPLE], device[N * SAMPLE], scratch[SAMPLE];
    srand(5);
    for (int i = 0; i < N * SAMPLE; i++) {
        bytes[i] = (uint8_t)(rand() & 255);
        floats[i] = (float)(rand() - RAND_MAX / 2) / 1e6f;
    }
    int checked = 0, changed = 0;
    for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++)
        for (int raw_floats = 0; raw_floats < 2; raw_floats++)
            for (size_t e = 0; e < sizeof epochs / sizeof *epochs; e++) {
                for (int i = 0; i < N * SAMPLE; i++)
                    host[i] = raw_floats ? floats[i] : (float)bytes[i] / 255.0f;
                float plain = host[N * SAMPLE - 1];
                ddp_augment_batch(&blocks[b], 9, epochs[e], ids, N, C, HH, WW, host, scratch);
                changed += host[N * SAMPLE - 1] != plain;
                DdpAugmentDevice *a = NULL;
                CU_ASSERT_EQUAL_FATAL(ddp_augment_device_create(&a, &blocks[b], C, HH, WW, raw_floats, NULL), DDP_OK);
                memset(device, 0xff, sizeof device);
                CU_ASSERT_EQUAL(ddp_augment_on_device(a, 9, epochs[e], ids, N, raw_floats ? (void *)floats :
                                                      (void *)bytes, device, NULL), DDP_OK);
                ddp_augment_device_destroy(a);
                checked++;
                if (memcmp(host, device, sizeof host) != 0) {
                    CU_FAIL("the device's input differs from the host's");
                    printf("\n  block %zu, %s, epoch %lld\n", b, raw_floats ? "floats" : "bytes",
                           (long long)epochs[e]);
                }
            }
    CU_ASSERT_EQUAL(checked, 30);
    CU_ASSERT(changed > 10); /* the blocks did something to the samples compared */
}

void suite_augment(void)
{
    static const TestCase cases[] = {
        {"crops at the padding's corners, zero and reflect", test_crops_at_the_corners},
        {"flips and normalize; evaluation batches only normalized", test_flips_and_normalize},
        {"a sample's channels take one crop and flip", test_channels_move_together},
        {"draws follow (seed, epoch, sample), not the batch", test_draws_follow_the_sample},
        {"a program's data table is checked at start-up", test_table_checked_at_start},
        {"the device's input of raw samples: the host's bits, bytes and floats", test_device_input_is_the_hosts},
        {NULL, NULL},
    };
    test_add_suite("augment", cases);
}
