/*
 * Image folders (runtime/image_folder.c) and image files (image_decode.c)
 * read through ddp_data_load and ddp_data_load_inputs, as the trainer reads
 * them: small grey PNGs written here with libpng, each of one value, so
 * that a gathered sample tells which file it came from. The classes' order,
 * the files' order (ImageFolder's: by folder path, then name), val labelled
 * by train's classes, more classes than a byte holds; then each way a
 * folder or a file can be wrong, and the first bad file of thousands named
 * though their headers are checked on many threads; CMYK and YCCK JPEGs
 * against PIL. (test_emit_torch.c checks decoded pixels of every kind of
 * PNG and JPEG PIL writes against PIL; test_image_resize.c checks resize
 * and center_crop.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_load.h"     // ddp_data_load, ddp_data_load_inputs; dataset.h: ddp_data_gather, ddp_data_digest
#include "python_order.h"  // ddp_python_order: ImageFolder's order of names
#include "testutil.h"

#include <zlib.h>  // crc32: a hand-made PNG chunk's

#ifdef DDP_HAVE_IMAGES
#include <jpeglib.h>  // YCCK JPEGs, which PIL cannot write
#include <png.h>      // png_image_write_to_file: the fixtures
#endif

enum { H = 3, W = 4 };

static char tmpdir[64];

/* The fit of a net with input CHANNELS x H x W and no resize or center_crop. */
static DdpDataOptions plain(int channels)
{
    return (DdpDataOptions){.fit = {.channels = channels, .rows = H, .cols = W}};
}

/* tmpdir/REL made, with every folder above it. */
static void make_dirs(const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    for (char *slash = path + strlen(tmpdir) + 1; (slash = strchr(slash, '/')); slash++) {
        *slash = 0;
        mkdir(path, 0755);
        *slash = '/';
    }
    mkdir(path, 0755);
}

/* tmpdir/REL: a grey PNG of HEIGHT x WIDTH PIXELS, interlaced (Adam7) or not. */
static void write_png_pixels(const char *rel, int height, int width, const uint8_t *pixels, int interlaced)
{
#ifdef DDP_HAVE_IMAGES
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_bytep *rows = malloc(sizeof *rows * (size_t)height);
    CU_ASSERT_FATAL(info && rows);
    if (setjmp(png_jmpbuf(png))) {
        CU_FAIL("libpng could not write a fixture");
    } else {
        png_init_io(png, f);
        png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_GRAY,
                     interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                     PNG_FILTER_TYPE_DEFAULT);
        png_write_info(png, info);
        png_set_interlace_handling(png);
        for (int y = 0; y < height; y++)
            rows[y] = (png_bytep)pixels + (size_t)y * width;
        png_write_image(png, rows);
        png_write_end(png, NULL);
    }
    png_destroy_write_struct(&png, &info);
    free(rows);
    fclose(f);
#else
    (void)rel, (void)height, (void)width, (void)pixels, (void)interlaced;
#endif
}

/* tmpdir/REL: a grey PNG of HEIGHT x WIDTH pixels, all VALUE. */
static void write_png(const char *rel, int height, int width, int value)
{
    uint8_t *pixels = malloc((size_t)height * width);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pixels);
    memset(pixels, value, (size_t)height * width);
    write_png_pixels(rel, height, width, pixels, 0);
    free(pixels);
}

#ifdef DDP_HAVE_IMAGES
/* A JPEG at PATH of H x W pixels of COMPONENTS bytes each, given as GIVEN,
 * coded as CODED: CMYK coded as JCS_CMYK, or as JCS_YCCK (colour as YCC,
 * as Photoshop writes CMYK JPEGs; libjpeg writes Adobe's marker for both),
 * or JCS_UNKNOWN both ways, of 1 to 4 components (libjpeg's default scans
 * take no more). */
static void write_jpeg(const char *path, int h, int w, int components, const uint8_t *pixels, J_COLOR_SPACE given,
                       J_COLOR_SPACE coded)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr errors;
    c.err = jpeg_std_error(&errors);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = components;
    c.in_color_space = given;
    jpeg_set_defaults(&c);
    jpeg_set_colorspace(&c, coded);
    jpeg_set_quality(&c, 90, TRUE);
    jpeg_start_compress(&c, TRUE);
    for (int y = 0; y < h; y++) {
        JSAMPROW row = (JSAMPROW)(pixels + (size_t)y * (size_t)w * (size_t)components);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    fclose(f);
}
#endif

static void write_text_file(const char *rel, const char *text, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite(text, 1, len, f);
    fclose(f);
}

/* The CRC of the chunk whose type and N data bytes start at CHUNK, after them. */
static void put_crc(unsigned char *chunk, int n)
{
    uLong crc = crc32(0, chunk, (uInt)(4 + n));
    for (int k = 0; k < 4; k++)
        chunk[4 + n + k] = (unsigned char)(crc >> (24 - 8 * k));
}

/* Nonzero (after saying so) when this build reads no images. */
static int skipped(void)
{
    if (ddp_image_support())
        return 0;
    fprintf(stderr, "\n(skipped: built without libpng and libjpeg)");
    return 1;
}

/* The value each of SET's samples IDS holds (the first pixel x 255). */
static void sample_values(const DdpDataSet *set, int n, int *values)
{
    int64_t ids[16];
    float x[16 * 3 * H * W];
    int32_t labels[16];
    for (int i = 0; i < n; i++)
        ids[i] = i;
    CU_ASSERT_EQUAL_FATAL(ddp_data_gather(set, ids, n, x, labels), DDP_OK);
    for (int i = 0; i < n; i++)
        values[i] = (int)(x[(size_t)i * (size_t)ddp_data_sample_values(set)] * 255.0f + 0.5f);
}

/* Python's order of names, as python3 gives it for these bytes
 * (sorted(names, key=lambda b: b.decode('utf-8', 'surrogateescape'))):
 * by code point, each byte of no valid character (a stray continuation,
 * C0 80's overlong form, ED A0 80's surrogate, a character cut short, FF)
 * as U+DC80 + (byte - 0x80): after U+00FF, before U+E000. */
static void test_python_order(void)
{
    static const char *const sorted[] = {"Z", "a", "\xc3\xa9", "\xc3\xbf", "\x80x", "\xc0\x80", "\xe2\x82",
                                         "\xe2\x82x", "\xed\xa0\x80", "\xff", "\xee\x80\x80", "\xf0\x9f\x98\x80"};
    const int n = (int)(sizeof sorted / sizeof sorted[0]);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int c = ddp_python_order(sorted[i], strlen(sorted[i]), sorted[j], strlen(sorted[j]));
            if ((c < 0) != (i < j) || (c == 0) != (i == j))
                fprintf(stderr, "\n  names %d and %d: %d", i, j, c);
            CU_ASSERT((c < 0) == (i < j) && (c == 0) == (i == j));
        }
    /* a prefix first; bytes as far as the lengths say */
    CU_ASSERT(ddp_python_order("ab", 2, "abc", 3) < 0 && ddp_python_order("abc", 3, "ab", 2) > 0);
    CU_ASSERT_EQUAL(ddp_python_order("abX", 2, "abY", 2), 0);
}

/* A Latin-1 name beside a UTF-8 one: classes and files in Python's order
 * ("\x80x" after "é", where bytes put it first), as ImageFolder numbers and
 * takes them. */
static void test_python_order_of_a_folder(void)
{
    if (skipped())
        return;
    test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_images_XXXXXX");
    make_dirs("d/train/\x80x");
    make_dirs("d/train/\xc3\xa9");
    write_png("d/train/\x80x/1.png", H, W, 80);
    write_png("d/train/\xc3\xa9/\x80.png", H, W, 81);
    write_png("d/train/\xc3\xa9/\xc3\xa9.png", H, W, 82);
    DdpDataOptions options = plain(1);
    DdpDataSet set;
    CU_ASSERT_EQUAL_FATAL(ddp_data_load(test_tmp_path(tmpdir, "d"), 1, &options, &set), DDP_OK);
    CU_ASSERT_FATAL(set.n == 3 && set.n_class_names == 2);
    CU_ASSERT(strcmp(set.class_names[0], "\xc3\xa9") == 0 && strcmp(set.class_names[1], "\x80x") == 0);
    int values[3];
    sample_values(&set, 3, values);
    CU_ASSERT(values[0] == 82 && values[1] == 81 && values[2] == 80);
    CU_ASSERT(set.labels[0] == 0 && set.labels[1] == 0 && set.labels[2] == 1);
    ddp_data_free(&set);
    test_remove_tmpdir(tmpdir);
}

static void test_order_and_labels(void)
{
    if (skipped())
        return;
    test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_images_XXXXXX");
    /* classes sorted by name whatever order they are made in; within a
     * class, ImageFolder's order (sorted(os.walk(...)), as python3 prints
     * it): the folder's own files by name ("10" before "2"), then folders by
     * path as strings: "x", "x-y", "x/deep" ('-' sorts before '/') */
    make_dirs("d/train/bird");
    make_dirs("d/train/ant/x/deep");
    make_dirs("d/train/ant/x-y");
    make_dirs("d/train/cat");
    make_dirs("d/val/cat");
    make_dirs("d/val/ant");
    write_png("d/train/bird/1.PNG", H, W, 50);
    write_text_file("d/train/bird/notes.txt", "not an image", 12); /* left out, as ImageFolder leaves it */
    write_png("d/train/ant/2.png", H, W, 11);
    write_png("d/train/ant/10.png", H, W, 10);
    write_png("d/train/ant/x/1.png", H, W, 12);
    write_png("d/train/ant/x/deep/1.png", H, W, 14);
    write_png("d/train/ant/x-y/1.png", H, W, 13);
    write_png("d/train/cat/a.png", H, W, 60);
    write_png("d/val/cat/z.png", H, W, 70);
    write_png("d/val/ant/z.png", H, W, 71);

    DdpDataOptions options = plain(1);
    char *dir = test_tmp_path(tmpdir, "d");
    DdpDataSet train, val;
    CU_ASSERT_EQUAL_FATAL(ddp_data_load(dir, 1, &options, &train), DDP_OK);
    CU_ASSERT_EQUAL_FATAL(ddp_data_load(dir, 0, &options, &val), DDP_OK);
    CU_ASSERT_STRING_EQUAL(train.format, val.format);
    CU_ASSERT(train.n == 7 && train.channels == 1 && train.rows == H && train.cols == W && train.num_classes == 3);
    int values[7];
    sample_values(&train, 7, values);
    static const int want_values[7] = {10, 11, 12, 13, 14, 50, 60};
    static const uint8_t want_labels[7] = {0, 0, 0, 0, 0, 1, 2};
    for (int i = 0; i < 7; i++) {
        if (values[i] != want_values[i] || train.labels[i] != want_labels[i])
            fprintf(stderr, "\nsample %d: value %d label %d, want %d and %d", i, values[i], train.labels[i],
                    want_values[i], want_labels[i]);
        CU_ASSERT(values[i] == want_values[i] && train.labels[i] == want_labels[i]);
    }
    /* the classes by name, for --eval-only's table: train's, for val too */
    CU_ASSERT_FATAL(train.n_class_names == 3 && val.n_class_names == 3);
    CU_ASSERT(strcmp(train.class_names[0], "ant") == 0 && strcmp(train.class_names[1], "bird") == 0 &&
              strcmp(train.class_names[2], "cat") == 0 && strcmp(val.class_names[1], "bird") == 0);
    /* a net of too few outputs: the first image of a class past them, by its folder */
    ddp_error_clear();
    CU_ASSERT_EQUAL(ddp_data_check_classes(&train, 2), DDP_BAD_INPUT);
    CU_ASSERT(strstr(ddp_error_message(), "d/train/cat/a.png: class 2 ('cat', of 3 class folders), but the net has 2 "
                                          "classes (0..1)") != NULL);
    /* val has no bird: cat keeps train's label 2, not val's own 1 */
    CU_ASSERT_EQUAL(val.n, 2);
    sample_values(&val, 2, values);
    CU_ASSERT(values[0] == 71 && val.labels[0] == 0 && values[1] == 70 && val.labels[1] == 2);

    /* the digest: the names below the folder and the labels, not where it is */
    uint64_t digest = ddp_data_digest(&train);
    char *moved = test_tmp_path(tmpdir, "elsewhere");
    CU_ASSERT_EQUAL_FATAL(rename(dir, moved), 0);
    DdpDataSet again;
    CU_ASSERT_EQUAL_FATAL(ddp_data_load(moved, 1, &options, &again), DDP_OK);
    CU_ASSERT_EQUAL(ddp_data_digest(&again), digest);
    ddp_data_free(&again);
    CU_ASSERT_EQUAL_FATAL(rename(test_tmp_path(tmpdir, "elsewhere/train/cat/a.png"),
                                 test_tmp_path(tmpdir, "elsewhere/train/cat/b.png")), 0);
    CU_ASSERT_EQUAL_FATAL(ddp_data_load(moved, 1, &options, &again), DDP_OK);
    CU_ASSERT_NOT_EQUAL(ddp_data_digest(&again), digest);
    ddp_data_free(&again);

    /* 3 channels: grey repeated */
    ddp_data_free(&train);
    options = plain(3);
    CU_ASSERT_EQUAL_FATAL(ddp_data_load(moved, 1, &options, &train), DDP_OK);
    float x[3 * H * W];
    int32_t label;
    int64_t id = 5;
    CU_ASSERT_EQUAL_FATAL(ddp_data_gather(&train, &id, 1, x, &label), DDP_OK);
    CU_ASSERT(label == 1 && x[0] == 50 / 255.0f && x[H * W] == 50 / 255.0f && x[3 * H * W - 1] == 50 / 255.0f);
    ddp_data_free(&train);
    ddp_data_free(&val);
    test_remove_tmpdir(tmpdir);
}

/* Loads tmpdir/d as OPTIONS say (the training set, or the test set when
 * TEST) and expects DDP_BAD_INPUT with WHAT in the message. */
static void expect_refused(const DdpDataOptions *options, int test, const char *what)
{
    DdpDataSet set;
    DdpStatus status = ddp_data_load(test_tmp_path(tmpdir, "d"), !test, options, &set);
    int said = strstr(ddp_error_message(), what) != NULL;
    if (status != DDP_BAD_INPUT || !said)
        fprintf(stderr, "\nwanted a refusal saying '%s'; got status %d: %s", what, (int)status, ddp_error_message());
    CU_ASSERT(status == DDP_BAD_INPUT && said);
    CU_ASSERT(set.n == 0 && set.files == NULL && set.labels == NULL);
    ddp_data_free(&set);
}

/* A fresh tmpdir/d holding train/a/1.png and val/a/1.png, of H x W. */
static void fresh_folder(void)
{
    test_remove_tmpdir(tmpdir);
    test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_images_XXXXXX");
    make_dirs("d/train/a");
    make_dirs("d/val/a");
    write_png("d/train/a/1.png", H, W, 1);
    write_png("d/val/a/1.png", H, W, 1);
}

static void test_refusals(void)
{
    if (skipped())
        return;
    test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_images_XXXXXX");
    DdpDataOptions grey = plain(1);

    fresh_folder();
    CU_ASSERT_EQUAL(unlink(test_tmp_path(tmpdir, "d/val/a/1.png")), 0);
    CU_ASSERT_EQUAL(rmdir(test_tmp_path(tmpdir, "d/val/a")), 0);
    expect_refused(&grey, 1, "no class folders in it (images go in val/CLASS/)");
    CU_ASSERT_EQUAL(rmdir(test_tmp_path(tmpdir, "d/val")), 0);
    expect_refused(&grey, 1, "found train/ but no val/");
    write_text_file("d/val", "x", 1);
    expect_refused(&grey, 1, "/d/val: not a folder: the test set's images go in val/CLASS/");
    CU_ASSERT_EQUAL(unlink(test_tmp_path(tmpdir, "d/val")), 0);

    fresh_folder();
    make_dirs("d/train/empty");
    expect_refused(&grey, 0, "no .png, .jpg or .jpeg images in this class's folder");

    fresh_folder();
    make_dirs("d/val/zebra");
    write_png("d/val/zebra/1.png", H, W, 1);
    expect_refused(&grey, 1, "no class of the training set");

    fresh_folder();
    write_text_file("d/train/a/2.BMP", "BM", 2);
    expect_refused(&grey, 0, "this loader reads PNG and JPEG images");

    fresh_folder();
    write_png("d/train/a/2.png", H + 2, W, 1);
    expect_refused(&grey, 0, "a 5x4 image (height x width), but the net's input is 3x4");

    fresh_folder();
    CU_ASSERT_EQUAL(symlink("nowhere.png", test_tmp_path(tmpdir, "d/train/a/3.png")), 0);
    expect_refused(&grey, 0, "3.png: cannot open: No such file or directory");

    /* a FIFO named as an image: ImageFolder lists it, a read would block */
    fresh_folder();
    CU_ASSERT_EQUAL(mkfifo(test_tmp_path(tmpdir, "d/train/a/zz.png"), 0644), 0);
    expect_refused(&grey, 0, "zz.png: not a regular file (a FIFO, socket or device), which ImageFolder would list");

    fresh_folder();
    write_text_file("d/train/a/2.png", "GIF89a, named .png", 18);
    expect_refused(&grey, 0, "neither a PNG nor a JPEG");
    write_text_file("d/train/a/2.png", "\xff\xd8\xff\xe0 a JPEG's start and then nothing", 33);
    expect_refused(&grey, 0, "not a readable JPEG");
#ifdef DDP_HAVE_IMAGES
    /* a JPEG of 2 components: no colour space, refused on loading, not when
     * its batch is made (so are those of 5 to 10, which write_jpeg cannot
     * make) */
    uint8_t samples[2 * H * W];
    for (int i = 0; i < 2 * H * W; i++)
        samples[i] = (uint8_t)(i * 37);
    write_jpeg(test_tmp_path(tmpdir, "d/train/a/2.png"), H, W, 2, samples, JCS_UNKNOWN, JCS_UNKNOWN);
    expect_refused(&grey, 0, "2.png: a JPEG of 2 colour components; this loader reads those of 1 (grey)");
#endif

    /* many files, their headers checked on 16 threads: the first bad one
     * in the set's order is named, every time */
    fresh_folder();
    enum { FILES = 4200 };
    for (int i = 0; i < FILES; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "d/train/a/%04d.png", i);
        if (i == 3001 || i == 3002 || i == 3003 || i == 4100)
            write_text_file(rel, "GIF89a, named .png", 18);
        else
            write_png(rel, H, W, i % 256);
    }
    for (int run = 0; run < 5; run++)
        expect_refused(&grey, 0, "a/3001.png: neither a PNG nor a JPEG");

    /* a header claiming 100000 x 3 pixels (its CRC right): refused before any allocation */
    fresh_folder();
    unsigned char huge[8 + 25 + 12] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                                       0, 1, 0x86, 0xa0, 0, 0, 0, 3, 8, 0, 0, 0, 0, 0, 0, 0, 0,
                                       0, 0, 0, 0, 'I', 'D', 'A', 'T', 0, 0, 0, 0};
    put_crc(huge + 12, 13);
    put_crc(huge + 37, 0);
    write_text_file("d/train/a/2.png", (const char *)huge, sizeof huge);
    expect_refused(&grey, 0, "100000 pixels wide and 3 high; this loader takes 1 to 16384 on a side");
    /* 16384 x 16384 is within the sides, not within PIL's pixels */
    memcpy(huge + 16, "\0\0\x40\0\0\0\x40\0", 8);
    put_crc(huge + 12, 13);
    write_text_file("d/train/a/2.png", (const char *)huge, sizeof huge);
    expect_refused(&grey, 0, "16384 pixels wide and 16384 high; this loader takes 1 to 16384 on a side and 178956970 "
                   "pixels in all");

    fresh_folder();
    DdpDataOptions two = plain(2);
    expect_refused(&two, 0, "images make samples of 1 channel (grey) or 3 (RGB), but the net's input has 2 channels");
    DdpDataOptions flat = {.fit = {.channels = 1, .rows = 1, .cols = H * W, .flat = 1}};
    expect_refused(&flat, 0, "but the net's input is 12 features");

    /* more classes than a byte holds (train/a and 300 more), each labelled in order */
    fresh_folder();
    enum { MANY = 300 };
    for (int k = 0; k < MANY; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "d/train/c%03d", k);
        make_dirs(rel);
        strcat(rel, "/1.png");
        write_png(rel, H, W, k % 256);
    }
    DdpDataSet many;
    CU_ASSERT_EQUAL_FATAL(ddp_data_load(test_tmp_path(tmpdir, "d"), 1, &grey, &many), DDP_OK);
    /* a, then c000 .. c299: labels 0 .. 300 */
    CU_ASSERT(many.n == MANY + 1 && many.num_classes == MANY + 1 && many.labels[MANY] == MANY &&
              many.labels[257] == 257);
    ddp_data_free(&many);

    /* resize and center_crop are for image files only */
    fresh_folder();
    DdpDataOptions resize = grey;
    resize.fit.sizing.resize_h = H;
    resize.fit.sizing.resize_w = W;
    make_dirs("idx");
    static const char idx_images[16 + H * W] = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, H, 0, 0, 0, W};
    static const char idx_labels[9] = {0, 0, 8, 1, 0, 0, 0, 1, 0};
    write_text_file("idx/train-images-idx3-ubyte", idx_images, sizeof idx_images);
    write_text_file("idx/train-labels-idx1-ubyte", idx_labels, sizeof idx_labels);
    DdpDataSet set;
    CU_ASSERT_EQUAL(ddp_data_load(test_tmp_path(tmpdir, "idx"), 1, &resize, &set), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "holds data of one size (IDX); compile the net without resize"));
    ddp_data_free(&set);
    test_remove_tmpdir(tmpdir);
}

/* A file whose header reads but whose data does not: loading passes (only
 * headers are read), the batch holding it fails, naming it. */
static void test_damaged_file_fails_its_batch(void)
{
    if (skipped())
        return;
    test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_images_XXXXXX");
    fresh_folder();
    write_png("d/train/a/2.png", H, W, 9);
    size_t len = 0;
    char *png = test_read_file(test_tmp_path(tmpdir, "d/train/a/2.png"), &len);
    const char *data = png ? memmem(png, len, "IDAT", 4) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    /* the chunks before the data, and 4 bytes of it */
    write_text_file("d/train/a/2.png", png, (size_t)(data + 4 + 4 - png));
    free(png);
    DdpDataOptions grey = plain(1);
    DdpDataSet set;
    CU_ASSERT_EQUAL_FATAL(ddp_data_load(test_tmp_path(tmpdir, "d"), 1, &grey, &set), DDP_OK);
    float x[H * W];
    int32_t label;
    int64_t first = 0, second = 1;
    CU_ASSERT_EQUAL(ddp_data_gather(&set, &first, 1, x, &label), DDP_OK);
    CU_ASSERT_EQUAL(ddp_data_gather(&set, &second, 1, x, &label), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "2.png: not a readable PNG"));
    ddp_data_free(&set);
    test_remove_tmpdir(tmpdir);
}

/* An interlaced PNG reads as the same image plainly stored; a PNG whose
 * chunks before the data outgrow the first read of its header (a 100 KiB
 * text chunk) loads. */
static void test_interlaced_and_long_headers(void)
{
    if (skipped())
        return;
    test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_images_XXXXXX");
    fresh_folder();
    uint8_t pattern[H * W];
    for (int i = 0; i < H * W; i++)
        pattern[i] = (uint8_t)(17 * i + 3);
    write_png_pixels("d/train/a/plain.png", H, W, pattern, 0);
    write_png_pixels("d/train/a/z_interlaced.png", H, W, pattern, 1);
    /* a copy of plain.png with a text chunk of 100 KiB after IHDR */
    size_t len = 0;
    char *png = test_read_file(test_tmp_path(tmpdir, "d/train/a/plain.png"), &len);
    enum { TEXT = 100 << 10, AFTER_IHDR = 8 + 25 };
    unsigned char *long_png = malloc(len + 12 + TEXT);
    CU_ASSERT_FATAL(png && long_png && len > AFTER_IHDR);
    memcpy(long_png, png, AFTER_IHDR);
    unsigned char *chunk = long_png + AFTER_IHDR;
    chunk[0] = 0, chunk[1] = (unsigned char)(TEXT >> 16), chunk[2] = (unsigned char)(TEXT >> 8), chunk[3] = 0;
    memcpy(chunk + 4, "tEXt", 4);
    memcpy(chunk + 8, "Comment", 8); /* keyword, its NUL, then text */
    memset(chunk + 16, 'x', TEXT - 8);
    put_crc(chunk + 4, TEXT);
    memcpy(chunk + 12 + TEXT, png + AFTER_IHDR, len - AFTER_IHDR);
    write_text_file("d/train/a/y_long.png", (const char *)long_png, len + 12 + TEXT);
    free(png);
    free(long_png);

    DdpDataOptions grey = plain(1);
    DdpDataSet set;
    CU_ASSERT_EQUAL_FATAL(ddp_data_load(test_tmp_path(tmpdir, "d"), 1, &grey, &set), DDP_OK);
    CU_ASSERT_EQUAL_FATAL(set.n, 4); /* 1.png, plain.png, y_long.png, z_interlaced.png */
    int64_t ids[3] = {1, 2, 3};
    float x[3 * H * W];
    int32_t labels[3];
    CU_ASSERT_EQUAL_FATAL(ddp_data_gather(&set, ids, 3, x, labels), DDP_OK);
    int same = 1;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < H * W; i++)
            same &= x[k * H * W + i] == pattern[i] / 255.0f;
    CU_ASSERT(same);
    ddp_data_free(&set);
    test_remove_tmpdir(tmpdir);
}

/* --predict FILE.png: one sample, label 0; resize and center_crop apply. */
static void test_predict_file(void)
{
    if (skipped())
        return;
    test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_images_XXXXXX");
    write_png("big.png", 2 * H, 2 * W, 77);
    DdpDataOptions options = plain(1);
    DdpDataSet set;
    CU_ASSERT_EQUAL(ddp_data_load_inputs(test_tmp_path(tmpdir, "big.png"), &options, &set), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "a 6x8 image (height x width), but the net's input is 3x4"));
    options.fit.sizing.resize_h = H;
    options.fit.sizing.resize_w = W;
    CU_ASSERT_EQUAL_FATAL(ddp_data_load_inputs(test_tmp_path(tmpdir, "big.png"), &options, &set), DDP_OK);
    CU_ASSERT(set.n == 1 && set.labels[0] == 0);
    int value;
    sample_values(&set, 1, &value);
    CU_ASSERT_EQUAL(value, 77); /* a flat image resizes to itself */
    ddp_data_free(&set);
    test_remove_tmpdir(tmpdir);
}

/* CMYK JPEGs, plain and coded as YCCK: the samples PIL's convert("RGB")
 * and convert("L") make of them (saved by PIL as PNGs, read back here). */
static void test_cmyk_as_pil(void)
{
#ifdef DDP_HAVE_IMAGES
    const char *py = test_python_with("PYTHON", "/usr/bin/python3", "PIL");
    if (skipped() || !py) {
        fprintf(stderr, "%s", py ? "" : "\n(skipped: no python3 with PIL)");
        return;
    }
    test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_images_XXXXXX");
    enum { CH = 13, CW = 17 };
    uint8_t inks[CH * CW * 4];
    for (int i = 0; i < CH * CW * 4; i++) /* smooth, so that the JPEG keeps much of it, plus noise */
        inks[i] = (uint8_t)((i % 4) * 50 + (i / 4 % CW) * 7 + (i / 4 / CW) * 3 + (i * 2654435761u >> 28));
    const struct {
        const char *name;
        J_COLOR_SPACE coded;
        int adobe_transform;
    } kinds[] = {{"cmyk.jpg", JCS_CMYK, 0}, {"ycck.jpg", JCS_YCCK, 2}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        char jpeg[128], png[160], *command = NULL, *said = NULL;
        snprintf(jpeg, sizeof jpeg, "%s", test_tmp_path(tmpdir, kinds[k].name));
        snprintf(png, sizeof png, "%s.png", jpeg);
        write_jpeg(jpeg, CH, CW, 4, inks, JCS_CMYK, kinds[k].coded);
        CU_ASSERT_FATAL(asprintf(&command, "%s -c 'import sys; from PIL import Image; im = Image.open(sys.argv[1]); "
                                 "print(im.mode, im.info.get(\"adobe_transform\")); im.convert(\"RGB\").save(sys.argv[2]); "
                                 "im.convert(\"L\").save(sys.argv[2] + \".L.png\")' %s %s", py, jpeg, png) > 0);
        CU_ASSERT_EQUAL(test_run(command, &said), 0);
        char want[32];
        snprintf(want, sizeof want, "CMYK %d", kinds[k].adobe_transform);
        CU_ASSERT_PTR_NOT_NULL(said ? strstr(said, want) : NULL); /* the file is of the kind meant */
        for (int channels = 1; channels <= 3; channels += 2) { /* PIL's convert("L") of it, and its RGB */
            DdpImageFit fit = {.channels = channels, .rows = CH, .cols = CW};
            uint8_t mine[3 * CH * CW], pil[3 * CH * CW];
            char grey[200];
            snprintf(grey, sizeof grey, "%s.L.png", png);
            CU_ASSERT_EQUAL(ddp_image_load_sample(jpeg, &fit, mine), DDP_OK);
            CU_ASSERT_EQUAL(ddp_image_load_sample(channels == 1 ? grey : png, &fit, pil), DDP_OK);
            if (memcmp(mine, pil, (size_t)channels * CH * CW) != 0) {
                CU_FAIL("a CMYK JPEG read otherwise than PIL reads it");
                fprintf(stderr, "\n%s, %d channel(s): differs from PIL's", kinds[k].name, channels);
            }
        }
        free(command);
        free(said);
    }
    test_remove_tmpdir(tmpdir);
#endif
}

void suite_image_folder(void)
{
    static const TestCase cases[] = {
        {"Python's order of names: by code point, a stray byte as its surrogate escape", test_python_order},
        {"classes and files in ImageFolder's order; val labelled by train's classes", test_order_and_labels},
        {"a Latin-1 name beside a UTF-8 one: classes and files in Python's order", test_python_order_of_a_folder},
        {"each way a folder or file is wrong is refused, naming it", test_refusals},
        {"a file whose data is damaged fails its batch, naming it", test_damaged_file_fails_its_batch},
        {"an interlaced PNG reads as a plain one; a header past the first read loads", test_interlaced_and_long_headers},
        {"--predict of an image file: resize applies", test_predict_file},
        {"CMYK JPEGs, plain and YCCK: PIL's RGB and grey of them", test_cmyk_as_pil},
        {NULL, NULL},
    };
    test_add_suite("image_folder", cases);
}
