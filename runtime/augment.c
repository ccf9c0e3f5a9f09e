/*
 * augment.c: the data { } block on a batch (augment.h).
 */
#include "augment.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fnv1a.h"         // ddp_fnv1a: the table's digest
#include "image_resize.h"  // DDP_IMAGE_MOST_SIDE

/* The resize and center_crop part of ddp_augment_check: the image files'
 * sizes are checked as they are read (image_decode.h), the table here. */
static DdpStatus check_sizing(const DdpImageSizing *z, int c, int h, int w)
{
    int resize_exact = z->resize_h != 0 || z->resize_w != 0, center = z->center_h != 0 || z->center_w != 0;
    if ((resize_exact && !(ddp_image_side_ok(z->resize_h) && ddp_image_side_ok(z->resize_w))) ||
        (z->resize_shorter != 0 && !ddp_image_side_ok(z->resize_shorter)) ||
        (center && !(ddp_image_side_ok(z->center_h) && ddp_image_side_ok(z->center_w))) ||
        (resize_exact && z->resize_shorter != 0))
        return DDP_ERR(DDP_BAD_INPUT, "the program's data table resizes to %dx%d or a shorter side of %d, and "
                       "center-crops %dx%d: sides from 1 to %d, 0 for none, and one kind of resize at most",
                       z->resize_h, z->resize_w, z->resize_shorter, z->center_h, z->center_w, DDP_IMAGE_MOST_SIDE);
    if (!ddp_image_sizing_any(z))
        return DDP_OK;
    int end_h = center ? z->center_h : z->resize_h, end_w = center ? z->center_w : z->resize_w;
    if (c != 1 && c != 3)
        return DDP_ERR(DDP_BAD_INPUT, "the program's data table resizes or crops image files, but a sample has %d "
                       "channels; images have 1 (grey) or 3 (RGB)", c);
    if (end_h != h || end_w != w)
        return DDP_ERR(DDP_BAD_INPUT, "the program's data table makes images of %dx%d from image files (%s), but a "
                       "sample is %dx%d", end_h, end_w, center ? "center_crop" : z->resize_shorter ?
                       "resize of the shorter side only" : "resize", h, w);
    return DDP_OK;
}

DdpStatus ddp_augment_check(const DdpDataConfig *d, int c, int h, int w)
{
    if (d->channels < 0 || (d->channels > 0 && d->channels != c))
        return DDP_ERR(DDP_BAD_INPUT, "the program's data table normalizes %d channels, but a sample has %d",
                       d->channels, c);
    if (d->channels > 0 && (!d->mean || !d->std))
        return DDP_ERR(DDP_BAD_INPUT, "the program's data table normalizes %d channels but holds no mean or std",
                       d->channels);
    for (int ch = 0; ch < d->channels; ch++)
        if (!((float)d->std[ch] > 0) || !isfinite((float)d->std[ch]) || !isfinite((float)d->mean[ch]))
            return DDP_ERR(DDP_BAD_INPUT, "the program's data table normalizes channel %d with mean %g and std %g; "
                           "each must be finite in float, and std above 0", ch, d->mean[ch], d->std[ch]);
    if (d->pad_mode != DDP_PAD_ZERO && d->pad_mode != DDP_PAD_REFLECT)
        return DDP_ERR(DDP_BAD_INPUT, "the program's data table pads in mode %d; DDP_PAD_ZERO or DDP_PAD_REFLECT",
                       (int)d->pad_mode);
    if (d->crop_h != 0 && (d->crop_h != h || d->crop_w != w || d->pad < 0 || d->pad > DDP_AUGMENT_MOST_PAD ||
                           (d->pad_mode == DDP_PAD_REFLECT && (d->pad >= h || d->pad >= w))))
        return DDP_ERR(DDP_BAD_INPUT, "the program's data table crops %dx%d padded by %d (%s), but a sample is "
                       "%dx%d: the crop must be the sample's size, padding at most %d, and reflect padding below "
                       "the sample's sides", d->crop_h, d->crop_w, d->pad,
                       d->pad_mode == DDP_PAD_REFLECT ? "reflect" : "zero", h, w, DDP_AUGMENT_MOST_PAD);
    if (!(d->flip_h >= 0 && d->flip_h <= 1 && d->flip_v >= 0 && d->flip_v <= 1))
        return DDP_ERR(DDP_BAD_INPUT, "the program's data table flips with probabilities %g and %g; each must be "
                       "between 0 and 1", d->flip_h, d->flip_v);
    return check_sizing(&d->sizing, c, h, w);
}

uint64_t ddp_augment_digest(const DdpDataConfig *d)
{
    const DdpImageSizing *z = &d->sizing;
    int ints[10] = {d->channels, d->crop_h,   d->crop_w,   d->pad,      (int)d->pad_mode,
                    z->resize_h, z->resize_w, z->center_h, z->center_w, z->resize_shorter};
    double flips[2] = {d->flip_h, d->flip_v};
    uint64_t h = ddp_fnv1a(DDP_FNV1A_START, ints, sizeof ints);
    h = ddp_fnv1a(h, flips, sizeof flips);
    for (int ch = 0; ch < d->channels && d->mean && d->std; ch++) {
        h = ddp_fnv1a(h, &d->mean[ch], sizeof d->mean[ch]);
        h = ddp_fnv1a(h, &d->std[ch], sizeof d->std[ch]);
    }
    return h;
}

DdpDataConfig ddp_augment_fixed_part(const DdpDataConfig *d)
{
    DdpDataConfig fixed = {.channels = d->channels, .mean = d->mean, .std = d->std, .sizing = d->sizing};
    return fixed;
}

int ddp_augment_any(const DdpDataConfig *d)
{
    return d->channels > 0 || ddp_augment_is_random(d);
}

/* The crop and flips of one sample, from SRC into DST (both C x H x W). */
static void crop_and_flip(const DdpDataConfig *d, uint32_t key, int c, int h, int w, const float *src, float *dst)
{
    DdpAugmentDraws r = ddp_augment_draws(d, key, h, w);
    for (int ch = 0; ch < c; ch++) {
        const float *plane = src + (size_t)ch * h * w;
        for (int y = 0; y < h; y++) {
            int sy = ddp_augment_source(y, h, r.upside_down, r.top, r.pad, d->pad_mode);
            float *row = dst + ((size_t)ch * h + y) * w;
            for (int x = 0; x < w; x++) {
                int sx = ddp_augment_source(x, w, r.mirror, r.left, r.pad, d->pad_mode);
                row[x] = sy < 0 || sx < 0 ? 0.0f : plane[(size_t)sy * w + sx];
            }
        }
    }
}

void ddp_augment_batch(const DdpDataConfig *d, uint64_t seed, int64_t epoch, const int64_t *ids, int n, int c, int h,
                       int w, float *images, float *scratch)
{
    size_t numel = (size_t)c * h * w, plane = (size_t)h * w;
    int random = epoch >= 0 && ddp_augment_is_random(d);
    for (int i = 0; i < n; i++) {
        float *x = images + (size_t)i * numel;
        if (random) {
            memcpy(scratch, x, numel * sizeof *x);
            crop_and_flip(d, ddp_augment_key(seed, epoch, ids[i]), c, h, w, scratch, x);
        }
        for (int ch = 0; ch < d->channels && ch < c; ch++) {
            /* Normalize's sub_ then div_, each rounded to float */
            float mean = (float)d->mean[ch], std = (float)d->std[ch];
            for (size_t p = 0; p < plane; p++)
                x[ch * plane + p] = (x[ch * plane + p] - mean) / std;
        }
    }
}

void ddp_augment_float_table(const DdpDataConfig *d, float *table)
{
    for (int ch = 0; ch < d->channels; ch++) {
        table[ch] = (float)d->mean[ch];
        table[d->channels + ch] = (float)d->std[ch];
    }
}

DdpStatus ddp_augment_choose_device(int on_gpu, int *on_device)
{
    const char *asked = getenv(DDP_AUGMENT_ON_ENV);
    *on_device = on_gpu;
    if (!asked || !asked[0])
        return DDP_OK;
    if (strcmp(asked, "device") == 0 || strcmp(asked, "host") == 0) {
        *on_device = asked[0] == 'd';
        return DDP_OK;
    }
    return DDP_ERR(DDP_BAD_INPUT, "%s=%s: say device (the device makes the net's input of the raw samples) or host "
                   "(the loader makes it)", DDP_AUGMENT_ON_ENV, asked);
}

void ddp_augment_describe(const DdpDataConfig *d, char *out, int size)
{
    int used = 0;
    out[0] = 0;
#define ADD(...) used += snprintf(out + (used < size ? used : size - 1), used < size ? (size_t)(size - used) : 1, \
                                 __VA_ARGS__)
    if (d->sizing.resize_h > 0)
        ADD("resize to %dx%d", d->sizing.resize_h, d->sizing.resize_w);
    if (d->sizing.resize_shorter > 0)
        ADD("resize the shorter side to %d", d->sizing.resize_shorter);
    if (d->sizing.center_h > 0)
        ADD("%scenter crop %dx%d", used ? ", " : "", d->sizing.center_h, d->sizing.center_w);
    if (d->crop_h > 0)
        ADD("%srandom crop %dx%d of the sample padded by %d (%s)", used ? ", " : "", d->crop_h, d->crop_w, d->pad,
            d->pad_mode == DDP_PAD_REFLECT ? "reflect" : "zero");
    if (d->flip_h > 0)
        ADD("%sleft-right flip p=%g", used ? ", " : "", d->flip_h);
    if (d->flip_v > 0)
        ADD("%supside-down flip p=%g", used ? ", " : "", d->flip_v);
    if (d->channels > 0)
        ADD("%snormalize %d channel%s", used ? ", then " : "", d->channels, d->channels == 1 ? "" : "s");
#undef ADD
}
