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

static inline uint32_t ddp_augment_key(uint64_t seed, int64_t epoch, int64_t sample)
{
    return ddp_hash32(ddp_dropout_layer_key(seed, 0, epoch) ^ (uint32_t)sample);
}

static inline uint32_t ddp_augment_draw(uint32_t key, uint32_t k)
{
    return ddp_hash32(key ^ k);
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

/* Nonzero when D changes a sample in training (a crop or a flip). */
int ddp_augment_is_random(const DdpDataConfig *d);

/* Nonzero when D changes anything. */
int ddp_augment_any(const DdpDataConfig *d);

/* D on samples IDS[0..n) of IMAGES, in place: n samples of C x H x W floats
 * (pixel / 255; a features input is 1 x 1 x numel). With EPOCH >= 0 (a
 * training batch of that epoch, from SEED) the crop and flips first, then
 * normalize; with EPOCH < 0 normalize only. SCRATCH holds C x H x W floats. */
void ddp_augment_batch(const DdpDataConfig *d, uint64_t seed, int64_t epoch, const int64_t *ids, int n, int c, int h,
                       int w, float *images, float *scratch);

/* One line saying what D does ("normalize 3 channels, random crop 32x32
 * padded 4 (zero), flip left-right p=0.5"), or "" when nothing. */
void ddp_augment_describe(const DdpDataConfig *d, char *out, int size);

#ifdef __cplusplus
}
#endif

#endif
