/*
 * image_decode.c: PNG and JPEG files into samples (image_decode.h).
 */
#include "image_decode.h"

#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>  // strcasecmp

#include "dataset.h"       // ddp_data_read_file
#include "image_resize.h"  // ddp_image_resize, ddp_image_center_crop_chw, DDP_IMAGE_MOST_SIDE

#ifdef DDP_HAVE_IMAGES
#include <jpeglib.h>
#include <jerror.h>  // JWRN_JPEG_EOF
#include <png.h>
#endif

/* The largest image file read whole: a 16384 x 16384 RGB image's PNG can
 * exceed this only by storing its data uncompressed. */
#define MOST_FILE_BYTES ((uint64_t)1 << 30)

DdpImageName ddp_image_name(const char *name)
{
    /* torchvision's IMG_EXTENSIONS, matched as ImageFolder matches them:
     * name.lower().endswith(extension) */
    static const struct {
        const char *extension;
        DdpImageName kind;
    } extensions[] = {{".png", DDP_IMAGE_READ},      {".jpg", DDP_IMAGE_READ},      {".jpeg", DDP_IMAGE_READ},
                      {".bmp", DDP_IMAGE_NOT_READ},  {".ppm", DDP_IMAGE_NOT_READ},  {".pgm", DDP_IMAGE_NOT_READ},
                      {".tif", DDP_IMAGE_NOT_READ},  {".tiff", DDP_IMAGE_NOT_READ}, {".webp", DDP_IMAGE_NOT_READ}};
    size_t len = strlen(name);
    for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++) {
        size_t n = strlen(extensions[i].extension);
        if (len >= n && strcasecmp(name + len - n, extensions[i].extension) == 0)
            return extensions[i].kind;
    }
    return DDP_IMAGE_NONE;
}

/* An image decoded: HEIGHT rows of WIDTH x CHANNELS bytes (1: grey, 3: RGB). */
typedef struct {
    int width, height, channels;
    uint8_t *pixels;
} Decoded;

#ifdef DDP_HAVE_IMAGES

int ddp_image_support(void) { return 1; }

/* "not a readable PNG: <why>": one format for every such message. */
#define UNREADABLE "%s: not a readable %s: %s"

static DdpStatus check_size(const char *path, const char *kind, long long width, long long height)
{
    if (width < 1 || height < 1 || width > DDP_IMAGE_MOST_SIDE || height > DDP_IMAGE_MOST_SIDE ||
        width * height > DDP_IMAGE_MOST_PIXELS)
        return DDP_ERR(DDP_BAD_INPUT, "%s: a %s image %lld pixels wide and %lld high; this loader takes 1 to %d on a "
                       "side and %d pixels in all", path, kind, width, height, DDP_IMAGE_MOST_SIDE,
                       DDP_IMAGE_MOST_PIXELS);
    return DDP_OK;
}

static const uint8_t PNG_MAGIC[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

static int is_png(const uint8_t *bytes, size_t len)
{
    return len >= sizeof PNG_MAGIC && memcmp(bytes, PNG_MAGIC, sizeof PNG_MAGIC) == 0;
}

static int is_jpeg(const uint8_t *bytes, size_t len)
{
    return len >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff;
}

/* ---- PNG ---------------------------------------------------------------- */

typedef struct {
    const uint8_t *bytes;
    size_t len, at;
    int ran_out;        /* the bytes ended before libpng was done */
    char message[200];  /* libpng's, when it fails */
} PngSource;

static void png_read_bytes(png_structp png, png_bytep out, size_t n)
{
    PngSource *src = png_get_io_ptr(png);
    if (n > src->len - src->at) {
        src->ran_out = 1;
        png_error(png, "the file ends early");
    }
    memcpy(out, src->bytes + src->at, n);
    src->at += n;
}

static void png_failed(png_structp png, png_const_charp message)
{
    PngSource *src = png_get_error_ptr(png);
    snprintf(src->message, sizeof src->message, "%s", message);
    png_longjmp(png, 1);
}

static void png_warned(png_structp png, png_const_charp message) { (void)png, (void)message; }

/* PNG BYTES: their size into INFO (when not NULL), and unless HEADER_ONLY
 * the image into OUT at 8 bits, grey or RGB as the file holds them. With
 * HEADER_ONLY libpng reads no further than the chunks before the data.
 * *RAN_OUT (when not NULL) says whether a failure was the bytes ending. */
static DdpStatus png_read(const uint8_t *bytes, size_t len, const char *path, int header_only, DdpImageInfo *info,
                          Decoded *out, int *ran_out)
{
    PngSource src = {bytes, len, 0, 0, ""};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_failed, png_warned);
    png_infop png_info = png ? png_create_info_struct(png) : NULL;
    if (!png_info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return DDP_ERR(DDP_FAIL, "%s: out of memory for libpng", path);
    }
    /* Set before setjmp and changed after it: volatile, so that longjmp
     * leaves what was allocated in reach. */
    uint8_t *volatile pixels = NULL;
    png_bytep *volatile rows = NULL;
    DdpStatus status = DDP_OK;
    if (setjmp(png_jmpbuf(png))) {
        status = DDP_ERR(DDP_BAD_INPUT, UNREADABLE, path, "PNG", src.message);
        if (ran_out)
            *ran_out = src.ran_out;
        goto done;
    }
    png_set_read_fn(png, &src, png_read_bytes);
    png_read_info(png, png_info);
    png_uint_32 width = png_get_image_width(png, png_info), height = png_get_image_height(png, png_info);
    if ((status = check_size(path, "PNG", width, height)) != DDP_OK)
        goto done;
    if (info)
        *info = (DdpImageInfo){(int)width, (int)height};
    if (header_only)
        goto done;
    int type = png_get_color_type(png, png_info);
    /* 16-bit grey is PIL's mode "I", which convert clamps at 255; 16-bit
     * colour (and grey with alpha) PIL reads by the high byte, as
     * png_set_strip_16 does. */
    int clamp16 = type == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, png_info) == 16;
    if (!clamp16)
        png_set_strip_16(png);
    png_set_strip_alpha(png);
    png_set_packing(png);
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, png_info) < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, png_info);
    int channels = png_get_channels(png, png_info);
    size_t sample_bytes = clamp16 ? 2 : 1, row_bytes = (size_t)width * (size_t)channels * sample_bytes;
    if ((channels != 1 && channels != 3) || png_get_rowbytes(png, png_info) != row_bytes) {
        status = DDP_ERR(DDP_FAIL, "internal error: %s: libpng gives %d channels after its conversions", path,
                         channels);
        goto done;
    }
    pixels = malloc(row_bytes * height);
    rows = malloc(sizeof *rows * height);
    if (!pixels || !rows) {
        status = DDP_ERR(DDP_FAIL, "%s: out of memory for a %ux%u image", path, (unsigned)width, (unsigned)height);
        goto done;
    }
    for (png_uint_32 y = 0; y < height; y++)
        rows[y] = pixels + (size_t)y * row_bytes;
    png_read_image(png, rows);
    if (clamp16) /* big-endian 16-bit values to bytes, in place */
        for (size_t i = 0, n = (size_t)width * height; i < n; i++) {
            unsigned v = (unsigned)pixels[2 * i] << 8 | pixels[2 * i + 1];
            pixels[i] = (uint8_t)(v > 255 ? 255 : v);
        }
    /* No png_read_end: the chunks after the data (IEND) change no pixel,
     * and PIL reads a file without them. */
    *out = (Decoded){(int)width, (int)height, channels, pixels};
    pixels = NULL;
done:
    png_destroy_read_struct(&png, &png_info, NULL);
    free(pixels);
    free(rows);
    return status;
}

/* ---- JPEG --------------------------------------------------------------- */

typedef struct {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    int cut_short;  /* the data ended early: libjpeg would fill the rest with grey */
    char message[JMSG_LENGTH_MAX];
} JpegErrors;

static void jpeg_failed(j_common_ptr cinfo)
{
    JpegErrors *e = (JpegErrors *)cinfo->err;
    e->mgr.format_message(cinfo, e->message);
    longjmp(e->jump, 1);
}

/* Warnings are not printed. The one that means a file cut short is kept,
 * for the caller to refuse the image as PIL does ("image file is
 * truncated"); others (extraneous bytes, an unknown JFIF revision) PIL
 * passes over, and so does this loader, with the same pixels. */
static void jpeg_warned(j_common_ptr cinfo, int level)
{
    JpegErrors *e = (JpegErrors *)cinfo->err;
    if (level < 0 && e->mgr.msg_code == JWRN_JPEG_EOF && !e->cut_short) {
        e->cut_short = 1;
        e->mgr.format_message(cinfo, e->message);
    }
}

/* A row of libjpeg's CMYK as PIL makes RGB of it: PIL reads every CMYK JPEG
 * as Adobe's inverted "CMYK;I" (C = 255 - the byte, and so on), then
 * convert("RGB") gives each of R, G, B as (255 - K) - C (255 - K) / 255,
 * rounded as its MULDIV255: (t + (t >> 8)) >> 8 of t = C (255 - K) + 128.
 * With the bytes themselves, 255 - K is the K byte. */
static void cmyk_row_to_rgb(const uint8_t *cmyk, int width, uint8_t *rgb)
{
    for (int x = 0; x < width; x++, cmyk += 4, rgb += 3) {
        int not_k = cmyk[3];
        for (int ch = 0; ch < 3; ch++) {
            int t = (255 - cmyk[ch]) * not_k + 128;
            rgb[ch] = (uint8_t)(not_k - ((t + (t >> 8)) >> 8));
        }
    }
}

/* BYTES' header into CINFO; HEADER_ONLY stops there, else decodes into OUT
 * (grey, or RGB of a colour or a CMYK file). *RAN_OUT as for png_read. */
static DdpStatus jpeg_read(const uint8_t *bytes, size_t len, const char *path, int header_only, DdpImageInfo *info,
                           Decoded *out, int *ran_out)
{
    struct jpeg_decompress_struct cinfo;
    JpegErrors errors;
    cinfo.err = jpeg_std_error(&errors.mgr);
    errors.mgr.error_exit = jpeg_failed;
    errors.mgr.emit_message = jpeg_warned;
    errors.cut_short = 0;
    errors.message[0] = 0;
    uint8_t *volatile pixels = NULL, *volatile cmyk_row = NULL;
    DdpStatus status = DDP_OK;
    if (setjmp(errors.jump)) {
        status = DDP_ERR(DDP_BAD_INPUT, UNREADABLE, path, "JPEG", errors.message);
        if (ran_out) /* the end of the bytes, taken for an end of image, left none */
            *ran_out = errors.cut_short;
        goto done;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, bytes, (unsigned long)len);
    jpeg_read_header(&cinfo, TRUE);
    if (errors.cut_short) {
        status = DDP_ERR(DDP_BAD_INPUT, UNREADABLE, path, "JPEG", errors.message);
        if (ran_out)
            *ran_out = 1;
        goto done;
    }
    if ((status = check_size(path, "JPEG", cinfo.image_width, cinfo.image_height)) != DDP_OK)
        goto done;
    /* grey, colour (YCbCr or RGB) or CMYK (or YCCK), as PIL reads them; of
     * other counts libjpeg knows no colour space, and would refuse the
     * decoding only when a batch is made, mid-run */
    if (cinfo.num_components != 1 && cinfo.num_components != 3 && cinfo.num_components != 4) {
        status = DDP_ERR(DDP_BAD_INPUT, "%s: a JPEG of %d colour components; this loader reads those of 1 (grey), "
                         "3 (colour) or 4 (CMYK), as PIL does", path, cinfo.num_components);
        goto done;
    }
    if (info)
        *info = (DdpImageInfo){(int)cinfo.image_width, (int)cinfo.image_height};
    if (header_only)
        goto done;
    int channels = cinfo.jpeg_color_space == JCS_GRAYSCALE ? 1 : 3;
    int cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK; /* YCCK: as CMYK */
    cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(&cinfo);
    if (errors.cut_short) { /* a progressive file's scans are all read first */
        status = DDP_ERR(DDP_BAD_INPUT, UNREADABLE, path, "JPEG", errors.message);
        goto done;
    }
    size_t row = (size_t)cinfo.output_width * (size_t)channels;
    if (!(pixels = malloc(row * cinfo.output_height)) || (cmyk && !(cmyk_row = malloc(4 * (size_t)cinfo.output_width)))) {
        status = DDP_ERR(DDP_FAIL, "%s: out of memory for a %ux%u image", path, cinfo.output_width,
                         cinfo.output_height);
        goto done;
    }
    /* a file cut short stops the decoding at once: a hostile header's
     * size is not worked through in grey */
    while (cinfo.output_scanline < cinfo.output_height && !errors.cut_short) {
        uint8_t *rgb = pixels + row * cinfo.output_scanline;
        JSAMPROW at = cmyk ? cmyk_row : rgb;
        if (jpeg_read_scanlines(&cinfo, &at, 1) == 1 && cmyk)
            cmyk_row_to_rgb(cmyk_row, (int)cinfo.output_width, rgb);
    }
    if (!errors.cut_short)
        jpeg_finish_decompress(&cinfo);
    if (errors.cut_short) {
        status = DDP_ERR(DDP_BAD_INPUT, UNREADABLE, path, "JPEG", errors.message);
        goto done;
    }
    *out = (Decoded){(int)cinfo.output_width, (int)cinfo.output_height, channels, pixels};
    pixels = NULL;
done:
    jpeg_destroy_decompress(&cinfo);
    free(pixels);
    free(cmyk_row);
    return status;
}

/* ---- either ------------------------------------------------------------- */

static DdpStatus not_an_image(const char *path)
{
    return DDP_ERR(DDP_BAD_INPUT, "%s: neither a PNG nor a JPEG (by its first bytes); this loader reads those two",
                   path);
}

/* ddp_image_info_bytes, and *RAN_OUT whether a failure was the bytes ending. */
static DdpStatus header(const uint8_t *bytes, size_t len, const char *path, DdpImageInfo *info, int *ran_out)
{
    return is_png(bytes, len)    ? png_read(bytes, len, path, 1, info, NULL, ran_out)
           : is_jpeg(bytes, len) ? jpeg_read(bytes, len, path, 1, info, NULL, ran_out)
                                 : not_an_image(path);
}

DdpStatus ddp_image_info_bytes(const uint8_t *bytes, size_t len, const char *path, DdpImageInfo *info)
{
    return header(bytes, len, path, info, NULL);
}

static DdpStatus decode(const uint8_t *bytes, size_t len, const char *path, Decoded *out)
{
    return is_png(bytes, len)    ? png_read(bytes, len, path, 0, NULL, out, NULL)
           : is_jpeg(bytes, len) ? jpeg_read(bytes, len, path, 0, NULL, out, NULL)
                                 : not_an_image(path);
}

#else /* no libpng or libjpeg when this runtime was built */

int ddp_image_support(void) { return 0; }

static DdpStatus unsupported(const char *path)
{
    return DDP_ERR(DDP_BAD_INPUT, "%s: this program's runtime was built without libpng and libjpeg, so it reads "
                   "no image files (make deps installs them; then rebuild ddpc and the program)", path);
}

static DdpStatus header(const uint8_t *bytes, size_t len, const char *path, DdpImageInfo *info, int *ran_out)
{
    (void)bytes, (void)len, (void)info, (void)ran_out;
    return unsupported(path);
}

DdpStatus ddp_image_info_bytes(const uint8_t *bytes, size_t len, const char *path, DdpImageInfo *info)
{
    return header(bytes, len, path, info, NULL);
}

static DdpStatus decode(const uint8_t *bytes, size_t len, const char *path, Decoded *out)
{
    (void)bytes, (void)len, (void)out;
    return unsupported(path);
}

#endif

/* ---- into a sample ------------------------------------------------------ */

/* The first *LEN bytes of PATH, at most MOST, into BYTES; *WHOLE says
 * whether that is all of it. */
static DdpStatus read_start(const char *path, uint8_t *bytes, size_t most, size_t *len, int *whole)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return DDP_ERR(DDP_BAD_INPUT, "%s: cannot open: %s", path, strerror(errno));
    *len = fread(bytes, 1, most, f);
    *whole = *len < most || fgetc(f) == EOF;
    int failed = ferror(f), why = errno;
    fclose(f);
    if (failed)
        return DDP_ERR(DDP_BAD_INPUT, "%s: read error: %s", path, strerror(why));
    return DDP_OK;
}

DdpStatus ddp_image_info(const char *path, DdpImageInfo *info)
{
    /* The chunks or markers before the pixels are a few kilobytes (more
     * with an embedded colour profile or thumbnail): a file's start is read
     * first, the whole file only when its header goes on further. Start-up
     * reads every file of a folder so. */
    enum { START = 16 << 10 };
    uint8_t *bytes = malloc(START);
    size_t len = 0;
    int whole = 1, ran_out = 0;
    if (!bytes)
        return DDP_ERR(DDP_FAIL, "out of memory");
    DdpStatus status = read_start(path, bytes, START, &len, &whole);
    if (status == DDP_OK)
        status = header(bytes, len, path, info, &ran_out);
    free(bytes);
    if (status == DDP_OK || whole || !ran_out)
        return status;
    DDP_CHECK(ddp_data_read_file(path, MOST_FILE_BYTES, "one image", &bytes, &len));
    status = ddp_image_info_bytes(bytes, len, path, info);
    free(bytes);
    return status;
}

/* The size FIT's resize gives a WIDTH x HEIGHT image of PATH (its own
 * without one): DDP_BAD_INPUT when resizing the shorter side would make
 * the longer too long. */
static DdpStatus resized_size(const char *path, const DdpImageFit *fit, int width, int height, int *out_w,
                              int *out_h)
{
    *out_w = width;
    *out_h = height;
    if (fit->sizing.resize_h) {
        *out_w = fit->sizing.resize_w;
        *out_h = fit->sizing.resize_h;
    } else if (fit->sizing.resize_shorter && ddp_image_resize_shorter(width, height, fit->sizing.resize_shorter, out_w, out_h))
        return DDP_ERR(DDP_BAD_INPUT, "%s: a %dx%d image (height x width) with its shorter side resized to %d would "
                       "be over %d on its longer side", path, height, width, fit->sizing.resize_shorter,
                       DDP_IMAGE_MOST_SIDE);
    return DDP_OK;
}

DdpStatus ddp_image_fits(const char *path, const DdpImageInfo *info, const DdpImageFit *fit)
{
    int w, h;
    DDP_CHECK(resized_size(path, fit, info->width, info->height, &w, &h));
    if (fit->sizing.center_h || (w == fit->cols && h == fit->rows))
        return DDP_OK; /* center_crop pads a smaller image, as torchvision's does */
    return DDP_ERR(DDP_BAD_INPUT, "%s: a %dx%d image (height x width), but the net's input is %dx%d; resize or "
                   "center_crop in the .net's data { } block can fit it", path, info->height, info->width, fit->rows,
                   fit->cols);
}

/* IMG to CHANNELS (1 or 3) in place of its pixels, as PIL's convert does. */
static DdpStatus convert_channels(Decoded *img, int channels, const char *path)
{
    if (img->channels == channels)
        return DDP_OK;
    size_t n = (size_t)img->width * (size_t)img->height;
    uint8_t *to = malloc(n * (size_t)channels);
    if (!to)
        return DDP_ERR(DDP_FAIL, "%s: out of memory", path);
    const uint8_t *from = img->pixels;
    for (size_t i = 0; i < n; i++)
        if (channels == 3)
            to[3 * i] = to[3 * i + 1] = to[3 * i + 2] = from[i];
        else
            to[i] = ddp_image_rgb_to_l(from[3 * i], from[3 * i + 1], from[3 * i + 2]);
    free(img->pixels);
    img->pixels = to;
    img->channels = channels;
    return DDP_OK;
}

DdpStatus ddp_image_load_sample(const char *path, const DdpImageFit *fit, uint8_t *sample)
{
    uint8_t *bytes;
    size_t len;
    DDP_CHECK(ddp_data_read_file(path, MOST_FILE_BYTES, "one image", &bytes, &len));
    DdpStatus status = ddp_image_decode_sample(bytes, len, path, fit, sample);
    free(bytes);
    return status;
}

DdpStatus ddp_image_decode_sample(const uint8_t *bytes, size_t len, const char *path, const DdpImageFit *fit,
                                  uint8_t *sample)
{
    Decoded img = {0};
    DDP_CHECK(decode(bytes, len, path, &img));
    DdpImageInfo info = {img.width, img.height};
    DdpStatus status = ddp_image_fits(path, &info, fit);
    if (status == DDP_OK)
        status = convert_channels(&img, fit->channels, path);
    int w = img.width, h = img.height;
    if (status == DDP_OK)
        status = resized_size(path, fit, img.width, img.height, &w, &h);
    if (status == DDP_OK && (w != img.width || h != img.height)) {
        uint8_t *resized = malloc((size_t)w * (size_t)h * (size_t)img.channels);
        status = resized ? ddp_image_resize(img.pixels, img.height, img.width, img.channels, resized, h, w)
                         : DDP_ERR(DDP_FAIL, "%s: out of memory", path);
        free(img.pixels);
        img.pixels = resized;
        img.width = w;
        img.height = h;
    }
    /* a center crop of the sample's own size when the .net has none: the
     * transpose to channels x rows x columns alone */
    if (status == DDP_OK)
        ddp_image_center_crop_chw(img.pixels, img.height, img.width, img.channels, sample, fit->rows, fit->cols);
    free(img.pixels);
    return status;
}
