/*
 * image_resize.h: what torchvision does to a PIL image on its way into a
 * net, redone on uint8 pixels bit for bit, so that an image-folder data set
 * reads the same numbers here as in PyTorch.
 *
 * Images are H x W x C bytes, channels interleaved (rows of W * C bytes), as
 * a decoder writes them; C is 1 (PIL's "L") or 3 ("RGB"). The pieces:
 *
 *   Resize(size)      ddp_image_resize_shorter for the output size, then
 *                     ddp_image_resize: PIL's resize(..., BILINEAR), the
 *                     antialiased filter PIL always applies (Pillow 9.x,
 *                     libImaging/Resample.c);
 *   CenterCrop(h, w)  ddp_image_center_crop_chw, which also writes the crop
 *                     out channel-major (C x h x w), the layout data sets hold;
 *   convert("L")      ddp_image_rgb_to_l, for a grey net fed colour files.
 *
 * Exactness needs PIL's own arithmetic, not just its formula: fixed-point
 * weights of 22 bits rounded PIL's way, two passes rounded to bytes between.
 */
#ifndef DDPRT_IMAGE_RESIZE_H
#define DDPRT_IMAGE_RESIZE_H

#include <stdint.h>

#include "status.h"  // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

/* The longest side an image may have, in and out: callers check decoded
 * sizes against it, so that no product of sizes here overflows and no
 * intermediate image is out of reason (16384 x 16384 x 3 is 768 MiB). */
#define DDP_IMAGE_MOST_SIDE 16384

/* The most pixels an image file may hold: PIL's own limit, above which it
 * refuses a file as a decompression bomb (2 x Image.MAX_IMAGE_PIXELS). */
#define DDP_IMAGE_MOST_PIXELS 178956970

static inline int ddp_image_side_ok(int side) { return side >= 1 && side <= DDP_IMAGE_MOST_SIDE; }

/* The data { } block's resize and center_crop: how an image file of any
 * size becomes a sample of the net's (0: none). */
typedef struct {
    int resize_h, resize_w;  /* resize HxW: to exactly this size */
    int resize_shorter;      /* resize N: the shorter side to N, the longer in proportion */
    int center_h, center_w;  /* center_crop HxW */
} DdpImageSizing;

static inline int ddp_image_sizing_any(const DdpImageSizing *s)
{
    return s->resize_h != 0 || s->resize_w != 0 || s->resize_shorter != 0 || s->center_h != 0 || s->center_w != 0;
}

/* PIL's im.resize((out_w, out_h), Image.BILINEAR) of SRC (h x w x c) into
 * DST (out_h x out_w x c); every size in 1..DDP_IMAGE_MOST_SIDE, c >= 1, DST
 * apart from SRC. Each channel is resampled alone, as PIL does L and RGB
 * (not LA or RGBA, which PIL premultiplies by alpha first). An unchanged size
 * copies. The intermediate image of the two passes is allocated here:
 * DDP_FAIL when memory runs out or a size is out of range (the caller
 * checks sizes first: an internal error). */
DdpStatus ddp_image_resize(const uint8_t *src, int h, int w, int c, uint8_t *dst, int out_h, int out_w);

/* The size torchvision's Resize(SIZE) gives a W x H image (width first, as
 * PIL says sizes): the shorter side (the width when they are equal) becomes
 * SIZE, the longer int(SIZE * long / short) in double, as Python's true
 * division and int(). An image already of that size comes out as it is
 * (ddp_image_resize copies). DDP_BAD_INPUT, *OUT_W and *OUT_H untouched
 * and no message set (the caller's names the file), when a size is below 1
 * or the result is over DDP_IMAGE_MOST_SIDE on a side: a long thin file can
 * ask for that of a SIZE within bounds. */
DdpStatus ddp_image_resize_shorter(int w, int h, int size, int *out_w, int *out_h);

/* torchvision's CenterCrop((crop_h, crop_w)) of SRC (h x w x c), written to
 * DST as c x crop_h x crop_w (DST apart from SRC). A side shorter than its
 * crop is first padded with zeros, (crop - side) // 2 before and the rest
 * after; otherwise the crop starts at round((side - crop) / 2) with Python's
 * round, half to even. With the crop the image's size this is the
 * HWC -> CHW transpose. */
void ddp_image_center_crop_chw(const uint8_t *src, int h, int w, int c, uint8_t *dst, int crop_h, int crop_w);

/* PIL's convert("L") of one RGB pixel: ITU-R 601-2 luma in 16-bit fixed
 * point, rounded (Convert.c's L24). */
static inline uint8_t ddp_image_rgb_to_l(uint8_t r, uint8_t g, uint8_t b)
{
    return (uint8_t)((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

#ifdef __cplusplus
}
#endif

#endif
