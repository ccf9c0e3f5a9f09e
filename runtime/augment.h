/*
 * augment.h: the `data { }` block of the .net, applied to a batch on its way
 * from the data set to the net.
 *
 * In training a sample is cropped at a random place of itself padded (zero
 * or reflect), then mirrored with some probability, as torchvision's
 * RandomCrop(size, padding) and RandomHorizontalFlip do; then every sample,
 * test and --predict inputs too, is normalized per channel as Normalize:
 * (x - mean) / std in float, the mean and std rounded from double to float.
 *
 * The draws are not a random stream but a hash of (seed, epoch, sample index
 * in the data set), as dropout's masks are (dropout_mask.h): the same sample
 * in the same epoch gets the same crop and flips on any rank count, batch
 * split or thread count, a resumed run draws what the first run would have,
 * and `ddpc --emit torch` writes a transform that computes the same bits.
 * Draw k of a sample is dropout's key for the sample at layer 0, which no
 * dropout has (they count from 1), and element k:
 *
 *   key     = hash(layer_key(seed, 0, epoch) ^ sample)
 *   crop at row hash(key ^ 1) % (H + 2 pad - crop_h + 1), column hash(key ^ 2) % (...)
 *   flip left-right when hash(key ^ 3) < flip_h * 2^32, upside down when hash(key ^ 4) < flip_v * 2^32
 */
#ifndef DDPRT_AUGMENT_H
#define DDPRT_AUGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "dropout_mask.h"  // ddp_hash32, ddp_dropout_layer_key
#include "image_resize.h"  // DdpImageSizing
#include "status.h"        // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DDP_PAD_ZERO, DDP_PAD_REFLECT } DdpPadMode;

/* The data { } block, as ddpc wrote it into the program. */
typedef struct {
    int channels;              /* normalize: a mean and std per channel; 0: no normalize */
    const double *mean, *std;
    int crop_h, crop_w, pad;   /* random_crop: crop_h 0 for none */
    DdpPadMode pad_mode;
    double flip_h, flip_v;     /* probabilities of a left-right and an upside-down flip */
    DdpImageSizing sizing;     /* resize, center_crop: an image file into a sample, before all the above */
} DdpDataConfig;

/* The widest padding a program's table may ask for (ddpc allows no more). */
#define DDP_AUGMENT_MOST_PAD (1 << 20)

enum { DDP_DRAW_CROP_ROW = 1, DDP_DRAW_CROP_COLUMN = 2, DDP_DRAW_FLIP_H = 3, DDP_DRAW_FLIP_V = 4 };

static inline DDP_HOST_DEVICE uint32_t ddp_augment_key(uint64_t seed, int64_t epoch, int64_t sample)
{
    return ddp_hash32(ddp_dropout_layer_key(seed, 0, epoch) ^ (uint32_t)sample);
}

static inline DDP_HOST_DEVICE uint32_t ddp_augment_draw(uint32_t key, uint32_t k)
{
    return ddp_hash32(key ^ k);
}

/* A pixel as ToTensor makes it: pixel / 255 in float, correctly rounded as
 * div(255) is (not pixel * (1 / 255.0f)), the floats PyTorch feeds its first
 * layer. */
static inline DDP_HOST_DEVICE float ddp_pixel_to_float(uint8_t pixel)
{
    return (float)pixel / 255.0f;
}

/* Nonzero when D changes a sample in training (a crop or a flip). */
static inline DDP_HOST_DEVICE int ddp_augment_is_random(const DdpDataConfig *d)
{
    return d->crop_h > 0 || d->flip_h > 0 || d->flip_v > 0;
}

/* One sample's draws: where its crop starts in it padded by PAD (0, 0 and
 * no padding without a crop), and its flips. */
typedef struct {
    int top, left, pad, mirror, upside_down;
} DdpAugmentDraws;

static inline DDP_HOST_DEVICE int ddp_augment_flips(uint32_t key, uint32_t k, double p)
{
    return p > 0 && (double)ddp_augment_draw(key, k) < p * 4294967296.0;
}

static inline DDP_HOST_DEVICE DdpAugmentDraws ddp_augment_draws(const DdpDataConfig *d, uint32_t key, int h, int w)
{
    DdpAugmentDraws r = {0, 0, 0, 0, 0};
    if (d->crop_h > 0) {
        r.pad = d->pad;
        r.top = (int)(ddp_augment_draw(key, DDP_DRAW_CROP_ROW) % (uint32_t)(h + 2 * r.pad - d->crop_h + 1));
        r.left = (int)(ddp_augment_draw(key, DDP_DRAW_CROP_COLUMN) % (uint32_t)(w + 2 * r.pad - d->crop_w + 1));
    }
    r.mirror = ddp_augment_flips(key, DDP_DRAW_FLIP_H, d->flip_h);
    r.upside_down = ddp_augment_flips(key, DDP_DRAW_FLIP_V, d->flip_v);
    return r;
}

/* Row (or column) I of N of a cropped and flipped sample: the one of the
 * sample it reads, or -1 for a zero of the padding. The crop starts at
 * OFFSET of the sample padded by PAD; FLIPPED reverses the order. Reflect
 * padding mirrors about the edge without repeating it (torch's "reflect");
 * ddpc keeps PAD below N. */
static inline DDP_HOST_DEVICE int ddp_augment_source(int i, int n, int flipped, int offset, int pad, DdpPadMode mode)
{
    i = offset + (flipped ? n - 1 - i : i) - pad;
    if (i >= 0 && i < n)
        return i;
    if (mode != DDP_PAD_REFLECT)
        return -1;
    return i < 0 ? -i : 2 * (n - 1) - i;
}

/* Element E of a batch of n x C x H x W, made from RAW (the batch's samples
 * as the data set holds them: bytes, or floats when RAW_FLOATS) with D
 * applied: what ddp_data_gather then ddp_augment_batch compute, one element
 * at a time, as a GPU thread does (augment_device.h). IDS are the samples'
 * indices in the data set; MEAN and STD D's, rounded to float. */
static inline DDP_HOST_DEVICE float ddp_augment_element(const DdpDataConfig *d, const float *mean, const float *std,
                                                        uint64_t seed, int64_t epoch, const int64_t *ids,
                                                        const void *raw, int raw_floats, int c, int h, int w,
                                                        size_t e)
{
    size_t plane = (size_t)h * (size_t)w, numel = (size_t)c * plane;
    size_t sample = e / numel;
    int ch = (int)(e % numel / plane), y = (int)(e % plane / (size_t)w), x = (int)(e % (size_t)w);
    if (epoch >= 0 && ddp_augment_is_random(d)) {
        DdpAugmentDraws r = ddp_augment_draws(d, ddp_augment_key(seed, epoch, ids[sample]), h, w);
        y = ddp_augment_source(y, h, r.upside_down, r.top, r.pad, d->pad_mode);
        x = ddp_augment_source(x, w, r.mirror, r.left, r.pad, d->pad_mode);
    }
    float v = 0.0f;
    if (y >= 0 && x >= 0) {
        size_t at = sample * numel + (size_t)ch * plane + (size_t)y * (size_t)w + (size_t)x;
        v = raw_floats ? ((const float *)raw)[at] : ddp_pixel_to_float(((const uint8_t *)raw)[at]);
    }
    return ch < d->channels ? (v - mean[ch]) / std[ch] : v; /* Normalize's sub_ then div_ */
}

/* DDP_BAD_INPUT when D does not fit samples of C x H x W or asks what
 * cannot be done (a hand-edited program's table): normalize's channels, a
 * mean or std not finite in float or a std of 0, a padding mode unknown or
 * too wide, a crop of another size, a probability outside [0, 1], a resize
 * or center_crop of no size, of more than DDP_IMAGE_MOST_SIDE, of both
 * kinds, or not ending at the sample's size. */
DdpStatus ddp_augment_check(const DdpDataConfig *d, int c, int h, int w);

/* A digest of D, for ranks to compare (distributed.c). */
uint64_t ddp_augment_digest(const DdpDataConfig *d);

/* D less its random part (the random crop and the flips): --no-augment. */
DdpDataConfig ddp_augment_fixed_part(const DdpDataConfig *d);

/* Nonzero when D changes anything. */
int ddp_augment_any(const DdpDataConfig *d);

/* D on samples IDS[0..n) of IMAGES, in place: n samples of C x H x W floats
 * (pixel / 255; a features input is 1 x 1 x numel). With EPOCH >= 0 (a
 * training batch of that epoch, from SEED) the crop and flips first, then
 * normalize; with EPOCH < 0 normalize only. SCRATCH holds C x H x W floats. */
void ddp_augment_batch(const DdpDataConfig *d, uint64_t seed, int64_t epoch, const int64_t *ids, int n, int c, int h,
                       int w, float *images, float *scratch);

/* D's mean and std rounded to float, as ddp_augment_batch uses them: TABLE
 * receives D's channels means, then as many stds (what
 * ddp_augment_element takes, in both augment_device implementations). */
void ddp_augment_float_table(const DdpDataConfig *d, float *table);

/* Where the net's input is made of a batch's raw samples (*ON_DEVICE 1:
 * augment_device.h) or on the host, by the loader (0): DDP_AUGMENT_ON=device
 * or host in the environment, else the device when it is a GPU (ON_GPU).
 * The same bits either way; DDP_BAD_INPUT for another value. */
#define DDP_AUGMENT_ON_ENV "DDP_AUGMENT_ON"
DdpStatus ddp_augment_choose_device(int on_gpu, int *on_device);

/* One line saying what D does ("normalize 3 channels, random crop 32x32
 * padded 4 (zero), flip left-right p=0.5"), or "" when nothing. */
void ddp_augment_describe(const DdpDataConfig *d, char *out, int size);

#ifdef __cplusplus
}
#endif

#endif
