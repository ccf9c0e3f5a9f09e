/*
 * image_resize.c: PIL's bilinear resize, torchvision's shorter-side size and
 * center crop, and PIL's RGB -> L, on uint8 images (image_resize.h).
 *
 * The resize follows Pillow's libImaging/Resample.c step for step, because
 * any other arithmetic, however close, moves some pixels by one:
 *
 *   - Each output index i of a side of IN resampled to OUT gets taps over
 *     the input: with scale = IN / OUT and filterscale = max(scale, 1), the
 *     tent filter (bilinear's, support 1) is stretched to filterscale, which
 *     is what antialiases a reduction; it is centred on (i + 0.5) * scale and
 *     spans the inputs from (int)(center - support + 0.5) up to, not
 *     including, (int)(center + support + 0.5), both clamped to the image.
 *   - The weights are normalized to sum 1 in double, then made 22-bit fixed
 *     point (32 bits less 8 for the pixel, less 2 for filters that overshoot),
 *     rounded half away from zero.
 *   - A pixel is 2^21 (one half, so the shift rounds) plus the sum of byte
 *     times weight, shifted down 22 and clipped to 0..255.
 *   - The horizontal pass runs first, into a byte image out_w wide and h
 *     high, then the vertical one; a pass whose side keeps its size is not
 *     run at all, and an unchanged size is a copy. (PIL skips the few rows
 *     at the edges that no output row reads; computing them changes nothing.)
 */
#include "image_resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PRECISION_BITS = 32 - 8 - 2 };

/* The taps of one pass: output index i reads inputs first[i] ..
 * first[i] + count[i] - 1 with weights k[i * room ..]. */
typedef struct {
    int room; /* the most taps an index can have: 2 ceil(support) + 1 */
    int *first, *count;
    int32_t *k;
} Taps;

static void taps_free(Taps *t)
{
    free(t->first);
    free(t->count);
    free(t->k);
}

/* The tent of bilinear interpolation. */
static double tent(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static DdpStatus taps_make(Taps *t, int in, int out)
{
    double scale = (double)in / out, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale, ss = 1.0 / filterscale;
    t->room = (int)ceil(support) * 2 + 1;
    t->first = malloc(sizeof *t->first * (size_t)out);
    t->count = malloc(sizeof *t->count * (size_t)out);
    t->k = malloc(sizeof *t->k * (size_t)out * (size_t)t->room);
    double *w = malloc(sizeof *w * (size_t)t->room);
    if (!t->first || !t->count || !t->k || !w) {
        free(w);
        taps_free(t);
        return DDP_ERR(DDP_FAIL, "out of memory for the weights of resizing %d pixels to %d", in, out);
    }
    for (int i = 0; i < out; i++) {
        double center = (i + 0.5) * scale, sum = 0.0;
        /* truncated, not floored: a first below 0 comes out 0 either way */
        int first = (int)(center - support + 0.5), end = (int)(center + support + 0.5);
        if (first < 0)
            first = 0;
        if (end > in)
            end = in;
        int n = end - first;
        /* each term in PIL's order, so every double rounds as there */
        for (int x = 0; x < n; x++) {
            w[x] = tent((x + first - center + 0.5) * ss);
            sum += w[x];
        }
        int32_t *k = t->k + (size_t)i * t->room;
        for (int x = 0; x < n; x++) {
            double v = sum != 0.0 ? w[x] / sum : w[x];
            k[x] = (int32_t)(v < 0 ? -0.5 + v * (1 << PRECISION_BITS) : 0.5 + v * (1 << PRECISION_BITS));
        }
        t->first[i] = first;
        t->count[i] = n;
    }
    free(w);
    return DDP_OK;
}

/* One output byte from a sum of byte times weight: a half for rounding
 * is in the sum already; a tent's weights are not negative, but clip as PIL
 * does all the same. */
static uint8_t clip8(int32_t sum)
{
    if (sum < 0)
        return 0;
    sum >>= PRECISION_BITS;
    return (uint8_t)(sum > 255 ? 255 : sum);
}

/* SRC (h x w x c) to DST (h x out_w x c) along the rows. */
static void resample_rows(const uint8_t *src, int h, int w, int c, const Taps *t, uint8_t *dst, int out_w)
{
    for (int y = 0; y < h; y++) {
        const uint8_t *row = src + (size_t)y * w * c;
        uint8_t *out = dst + (size_t)y * out_w * c;
        for (int i = 0; i < out_w; i++) {
            const int32_t *k = t->k + (size_t)i * t->room;
            const uint8_t *p = row + (size_t)t->first[i] * c;
            for (int ch = 0; ch < c; ch++) {
                int32_t sum = 1 << (PRECISION_BITS - 1);
                for (int x = 0; x < t->count[i]; x++)
                    sum += p[x * c + ch] * k[x];
                out[i * c + ch] = clip8(sum);
            }
        }
    }
}

/* SRC (h x w x c) to DST (out_h x w x c) along the columns. */
static void resample_columns(const uint8_t *src, int w, int c, const Taps *t, uint8_t *dst, int out_h)
{
    size_t stride = (size_t)w * c;
    for (int i = 0; i < out_h; i++) {
        const int32_t *k = t->k + (size_t)i * t->room;
        const uint8_t *top = src + (size_t)t->first[i] * stride;
        uint8_t *out = dst + (size_t)i * stride;
        for (size_t e = 0; e < stride; e++) {
            int32_t sum = 1 << (PRECISION_BITS - 1);
            for (int y = 0; y < t->count[i]; y++)
                sum += top[y * stride + e] * k[y];
            out[e] = clip8(sum);
        }
    }
}

DdpStatus ddp_image_resize(const uint8_t *src, int h, int w, int c, uint8_t *dst, int out_h, int out_w)
{
    if (!ddp_image_side_ok(h) || !ddp_image_side_ok(w) || !ddp_image_side_ok(out_h) || !ddp_image_side_ok(out_w) ||
        c < 1)
        return DDP_ERR(DDP_FAIL, "internal error: cannot resize a %dx%d image (height x width) of %d channels "
                       "to %dx%d: sides are 1 to %d", h, w, c, out_h, out_w, DDP_IMAGE_MOST_SIDE);
    if (out_h == h && out_w == w) {
        memcpy(dst, src, (size_t)h * w * c);
        return DDP_OK;
    }
    Taps across = {0}, down = {0};
    uint8_t *between = NULL;
    DdpStatus st = DDP_OK;
    if (out_w != w && out_h != h) {
        between = malloc((size_t)h * out_w * c);
        if (!between)
            return DDP_ERR(DDP_FAIL, "out of memory resizing a %dx%d image (height x width) to %dx%d", h, w,
                           out_h, out_w);
    }
    if (out_w != w) {
        st = taps_make(&across, w, out_w);
        if (st == DDP_OK)
            resample_rows(src, h, w, c, &across, between ? between : dst, out_w);
        taps_free(&across);
    }
    if (st == DDP_OK && out_h != h) {
        st = taps_make(&down, h, out_h);
        if (st == DDP_OK)
            resample_columns(between ? between : src, out_w, c, &down, dst, out_h);
        taps_free(&down);
    }
    free(between);
    return st;
}

DdpStatus ddp_image_resize_shorter(int w, int h, int size, int *out_w, int *out_h)
{
    /* no message here: the caller's names the file */
    if (h < 1 || w < 1 || size < 1)
        return DDP_BAD_INPUT;
    int shorter = w <= h ? w : h, longer = w <= h ? h : w;
    /* size * longer is exact in double, and one division rounds as Python's */
    double scaled = (double)size * longer / shorter;
    if (size > DDP_IMAGE_MOST_SIDE || scaled >= DDP_IMAGE_MOST_SIDE + 1.0)
        return DDP_BAD_INPUT;
    int resized = (int)scaled;
    *out_w = w <= h ? size : resized;
    *out_h = w <= h ? resized : size;
    return DDP_OK;
}

/* Where a crop of CROP from a side of N starts, in the side's own indices;
 * below 0 where the side is padded. Python's round((n - crop) / 2.0) is
 * half to even: an odd difference 2k + 1 starts at k when k is even and at
 * k + 1 when odd. */
static int crop_start(int n, int crop)
{
    if (crop > n)
        return -((crop - n) / 2);
    int d = n - crop, half = d / 2;
    return half + (d & half & 1);
}

void ddp_image_center_crop_chw(const uint8_t *src, int h, int w, int c, uint8_t *dst, int crop_h, int crop_w)
{
    int top = crop_start(h, crop_h), left = crop_start(w, crop_w);
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < crop_h; y++) {
            int sy = top + y;
            uint8_t *out = dst + ((size_t)ch * crop_h + y) * crop_w;
            for (int x = 0; x < crop_w; x++) {
                int sx = left + x;
                out[x] = sy < 0 || sy >= h || sx < 0 || sx >= w ? 0 : src[((size_t)sy * w + sx) * c + ch];
            }
        }
}
