/*
 * fuzz_image.c: libFuzzer harness for image files (runtime/image_decode.c):
 * the header check an image folder runs on every file at start-up, and the
 * decoding, resize and center crop a batch runs, through libpng and
 * libjpeg-turbo, on whatever a folder holds.
 *
 * The first byte chooses how a file becomes a sample (bit 0: 1 or 3
 * channels; bits 1-2: no resize, resize 7x9, or the shorter side to 8;
 * bit 3: center_crop 6x5, needed after a shorter-side resize); the rest is
 * the file. Beyond "no crash, no sanitizer report" it checks what the loader
 * relies on: a decode that succeeds had a header that read and fit, and
 * wrote nothing past the sample; a failure is DDP_BAD_INPUT (bad input,
 * not an internal error). Built with ASan and UBSan (make fuzz); seeds are
 * tests/fuzz/image-seeds:
 *
 *   mkdir -p build/fuzz-image-corpus && build/fuzz_image -max_total_time=600 build/fuzz-image-corpus tests/fuzz/image-seeds
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"    // CHECK
#include "image_decode.h"  // ddp_image_info_bytes, ddp_image_fits, ddp_image_decode_sample

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const int how = data[0];
    DdpImageFit fit = {.channels = how & 1 ? 3 : 1, .rows = 6, .cols = 5};
    int resize = (how >> 1) & 3, center = (how >> 3) & 1;
    if (resize == 1) {
        fit.sizing.resize_h = 7;
        fit.sizing.resize_w = 9;
    } else if (resize == 2)
        fit.sizing.resize_shorter = 8;
    if (center || resize == 2) {
        fit.sizing.center_h = 6;
        fit.sizing.center_w = 5;
    }
    if (!center && resize == 1) /* resize alone must end at the sample's size */
        fit.sizing.resize_h = 6, fit.sizing.resize_w = 5;
    const uint8_t *file = data + 1;
    const size_t len = size - 1;

    DdpImageInfo info;
    DdpStatus header = ddp_image_info_bytes(file, len, "fuzz", &info);
    CHECK(header == DDP_OK || header == DDP_BAD_INPUT);
    DdpStatus fits = header == DDP_OK ? ddp_image_fits("fuzz", &info, &fit) : header;
    CHECK(fits == DDP_OK || fits == DDP_BAD_INPUT);

    enum { SAMPLE = 3 * 6 * 5 };
    uint8_t sample[SAMPLE + 1];
    memset(sample, 0xa5, sizeof sample);
    sample[SAMPLE] = 0x5a;
    DdpStatus decoded = ddp_image_decode_sample(file, len, "fuzz", &fit, sample);
    CHECK(decoded == DDP_OK || decoded == DDP_BAD_INPUT);
    if (decoded == DDP_OK) {
        CHECK(fits == DDP_OK);
        CHECK(sample[SAMPLE] == 0x5a); /* nothing written past the sample */
    }
    return 0;
}
