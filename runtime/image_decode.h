/*
 * image_decode.h: one PNG or JPEG file into one sample of a net's input, as
 * torchvision makes it from the file: PIL's decoding, convert("RGB") or
 * convert("L") to the input's channels, then the data { } block's resize and
 * center_crop (image_resize.h), then the C x H x W bytes the data sets hold.
 *
 * PNG is read with libpng, JPEG with libjpeg-turbo (the library PIL itself
 * decodes JPEG with, at its default settings), with what PIL does to each
 * kind of file:
 *  - palettes looked up, grey of 1, 2 or 4 bits scaled to 0..255;
 *  - an alpha channel or transparency dropped, not composited;
 *  - no gamma correction (PIL applies none);
 *  - grey repeated into red, green and blue for a 3-channel net; colour to
 *    grey as L = (19595 R + 38470 G + 7471 B + 2^15) >> 16 for a 1-channel one;
 *  - 16-bit colour to its high byte, 16-bit grey clamped at 255 (PIL reads
 *    it as 32-bit integers, which convert clamps).
 *  - a CMYK (or YCCK) JPEG's inks to RGB as PIL converts them (inverted,
 *    Adobe's way, then (255 - K)(255 - C) / 255 and so on), then as colour.
 * A PNG's chunks after its data are not read (PIL reads a file without
 * them). JPEGs cut short are refused, which libjpeg would fill with grey
 * and PIL refuses; libjpeg's other warnings (stray
 * bytes, an unknown JFIF revision) PIL passes over, and so does this.
 * ddp_image_info reads a file's first 16 KiB, more only when its header
 * goes on further. Images over DDP_IMAGE_MOST_PIXELS are refused, as PIL
 * refuses them.
 *
 * Without libpng and libjpeg at build time (DDP_HAVE_IMAGES undefined),
 * every call says so and returns DDP_BAD_INPUT.
 */
#ifndef DDPRT_IMAGE_DECODE_H
#define DDPRT_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "image_resize.h"  // DdpImageSizing
#include "status.h"        // DdpStatus

/* How a file becomes a sample: the net's input, and the data { } block's
 * resize and center_crop. */
typedef struct {
    int channels, rows, cols;  /* the sample: channels 1 or 3 */
    int flat;                  /* the net's input is features, not an image */
    DdpImageSizing sizing;
} DdpImageFit;

/* A file's size, from its header alone. */
typedef struct {
    int width, height;
} DdpImageInfo;

/* What a file's NAME says it holds, by its ending in any case, as
 * torchvision's ImageFolder tells images (its IMG_EXTENSIONS). */
typedef enum {
    DDP_IMAGE_NONE,     /* no image */
    DDP_IMAGE_READ,     /* .png, .jpg, .jpeg: read here */
    DDP_IMAGE_NOT_READ  /* .bmp, .ppm, .pgm, .tif, .tiff, .webp: ImageFolder reads them, this loader does not */
} DdpImageName;

DdpImageName ddp_image_name(const char *name);

/* Nonzero when this runtime was built with libpng and libjpeg. */
int ddp_image_support(void);

/* Reads PATH's header: DDP_BAD_INPUT, naming PATH, for a file that is
 * neither PNG nor JPEG, is malformed, or holds an image larger than
 * DDP_IMAGE_MOST_SIDE on a side or DDP_IMAGE_MOST_PIXELS in all. */
DdpStatus ddp_image_info(const char *path, DdpImageInfo *info);

/* The same for a file's LEN BYTES already read (PATH for messages). */
DdpStatus ddp_image_info_bytes(const uint8_t *bytes, size_t len, const char *path, DdpImageInfo *info);

/* DDP_BAD_INPUT naming PATH when an image of INFO's size cannot become a
 * sample by FIT: without resize or center_crop it must be the sample's
 * size already. */
DdpStatus ddp_image_fits(const char *path, const DdpImageInfo *info, const DdpImageFit *fit);

/* Decodes PATH into SAMPLE: FIT's channels x rows x cols bytes.
 * DDP_BAD_INPUT naming PATH for a file that does not decode or whose image
 * does not fit (ddp_image_fits); DDP_FAIL when out of memory. */
DdpStatus ddp_image_load_sample(const char *path, const DdpImageFit *fit, uint8_t *sample);

/* The same for a file's LEN BYTES already read (PATH for messages). */
DdpStatus ddp_image_decode_sample(const uint8_t *bytes, size_t len, const char *path, const DdpImageFit *fit,
                                  uint8_t *sample);

#endif
