/*
 * Tests of runtime/npy.c: .npy files written here as np.save writes them
 * (checked against NumPy by tests/distributed/npy_data.sh), read through
 * ddp_data_load as the trainer reads them; each layout and type, then each
 * way a file can be wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // mkdir: a folder where a file should be

#include "data_load.h"  // ddp_data_load; dataset.h: ddp_data_gather
#include "npy.h"      // ddp_npy_header, ddp_npy_images, ddp_npy_labels
#include "testutil.h"

static char tmpdir[64];

static void make_tmpdir(void) { test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_npy_XXXXXX"); }

/* An .npy file's bytes: version MAJOR's header for DESCR and SHAPE (a
 * Python tuple's text, "(5, 2, 3)"), padded as np.save pads it, then
 * DATA_LEN bytes of DATA. *LEN is the whole length; free the result. */
static uint8_t *npy_bytes(int major, const char *descr, const char *fortran, const char *shape, const void *data,
                          size_t data_len, size_t *len)
{
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, fortran, shape);
    size_t at = major == 1 ? 10 : 12, header = (size_t)n + 1;
    header += (64 - (at + header) % 64) % 64; /* the data start at a multiple of 64 */
    uint8_t *b = calloc(1, at + header + data_len);
    CU_ASSERT_FATAL(b != NULL);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = 0;
    for (int k = 0; k < (major == 1 ? 2 : 4); k++)
        b[8 + k] = (uint8_t)(header >> (8 * k));
    memset(b + at, ' ', header);
    memcpy(b + at, dict, (size_t)n);
    b[at + header - 1] = '\n';
    memcpy(b + at + header, data, data_len);
    *len = at + header + data_len;
    return b;
}

static void write_file(const char *name, const uint8_t *bytes, size_t len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT(fwrite(bytes, 1, len, f) == len);
    fclose(f);
}

/* DIR/NAME holding an array of DESCR and SHAPE, DATA_LEN bytes of DATA. */
static void write_npy(const char *name, const char *descr, const char *shape, const void *data, size_t data_len)
{
    size_t len;
    uint8_t *b = npy_bytes(1, descr, "False", shape, data, data_len, &len);
    write_file(name, b, len);
    free(b);
}

enum { N = 4, C = 3, H = 2, W = 5, SAMPLE = C * H * W };

/* The value of sample i, channel c, row y, column x: different everywhere. */
static int value(int i, int c, int y, int x)
{
    return i * 61 + c * 17 + y * 5 + x;
}

static const int64_t labels_i8[N] = {7, 0, 9, 3};

static void write_labels(const char *name)
{
    write_npy(name, "<i8", "(4,)", labels_i8, sizeof labels_i8);
}

static const DdpDataOptions infer = {0}, first = {.channels_first = 1}, last = {.channels_last = 1};

/* Every sample of the set at DIR is value() in channel-first order, scaled
 * by SCALE (1/255 for uint8), with labels_i8. */
static void check_set(int train, const DdpDataOptions *options, float scale, const char *format)
{
    DdpDataSet set;
    CU_ASSERT_EQUAL_FATAL(ddp_data_load(tmpdir, train, options, &set), DDP_OK);
    CU_ASSERT_EQUAL(set.n, N);
    CU_ASSERT_EQUAL(set.channels, C);
    CU_ASSERT_EQUAL(set.rows, H);
    CU_ASSERT_EQUAL(set.cols, W);
    CU_ASSERT_EQUAL(set.num_classes, 10);
    CU_ASSERT_STRING_EQUAL(set.format, format);
    int64_t all[N] = {0, 1, 2, 3};
    float images[N * SAMPLE];
    int32_t labels[N];
    CU_ASSERT_EQUAL_FATAL(ddp_data_gather(&set, all, N, images, labels), DDP_OK);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        bad += labels[i] != labels_i8[i];
        for (int c = 0; c < C; c++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    bad += images[((i * C + c) * H + y) * W + x] !=
                           (scale == 1.0f ? (float)value(i, c, y, x) + 0.25f : (float)value(i, c, y, x) / 255.0f);
    }
    CU_ASSERT_EQUAL(bad, 0);
    ddp_data_free(&set);
}

/* uint8 and float32, channels first and last, inferred and said. */
static void test_layouts_and_types(void)
{
    uint8_t nchw[N * SAMPLE], nhwc[N * SAMPLE];
    float nchw_f[N * SAMPLE];
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    nchw[((i * C + c) * H + y) * W + x] = (uint8_t)value(i, c, y, x);
                    nhwc[((i * H + y) * W + x) * C + c] = (uint8_t)value(i, c, y, x);
                    nchw_f[((i * C + c) * H + y) * W + x] = (float)value(i, c, y, x) + 0.25f;
                }
    make_tmpdir();
    write_npy("x_train.npy", "|u1", "(4, 3, 2, 5)", nchw, sizeof nchw);
    write_labels("y_train.npy");
    write_npy("x_test.npy", "|u1", "(4, 2, 5, 3)", nhwc, sizeof nhwc);
    write_labels("y_test.npy");
    check_set(1, &infer, 1 / 255.0f, "NumPy uint8");
    check_set(0, &infer, 1 / 255.0f, "NumPy uint8");
    check_set(1, &first, 1 / 255.0f, "NumPy uint8");
    check_set(0, &last, 1 / 255.0f, "NumPy uint8");
    write_npy("x_train.npy", "<f4", "(4, 3, 2, 5)", nchw_f, sizeof nchw_f);
    check_set(1, &infer, 1.0f, "NumPy float32");
    float nhwc_f[N * SAMPLE];
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++)
            for (int q = 0; q < H * W; q++)
                nhwc_f[(i * H * W + q) * C + c] = nchw_f[(i * C + c) * H * W + q];
    write_npy("x_train.npy", "<f4", "(4, 2, 5, 3)", nhwc_f, sizeof nhwc_f);
    check_set(1, &infer, 1.0f, "NumPy float32");
    check_set(1, &last, 1.0f, "NumPy float32");
    /* said, the layout wins over the shape: (4, 2, 5, 3) as 2 channels of 5 x 3 */
    DdpDataSet set;
    CU_ASSERT_EQUAL_FATAL(ddp_data_load(tmpdir, 1, &first, &set), DDP_OK);
    CU_ASSERT(set.channels == 2 && set.rows == 5 && set.cols == 3);
    ddp_data_free(&set);
    test_remove_tmpdir(tmpdir);

    /* NumPy's files are read before IDX's in the same directory */
    make_tmpdir();
    write_npy("x_train.npy", "|u1", "(4, 3, 2, 5)", nchw, sizeof nchw);
    write_labels("y_train.npy");
    write_file("train-images-idx3-ubyte", (const uint8_t *)"not IDX", 7);
    write_file("train-labels-idx1-ubyte", (const uint8_t *)"not IDX", 7);
    check_set(1, &infer, 1 / 255.0f, "NumPy uint8");
    test_remove_tmpdir(tmpdir);

    /* N x H x W: one channel; labels of another integer type */
    make_tmpdir();
    write_npy("x_train.npy", "|u1", "(4, 6, 5)", nchw, N * 30);
    const uint8_t small[N] = {1, 2, 3, 4};
    write_npy("y_train.npy", "|u1", "(4,)", small, sizeof small);
    CU_ASSERT_EQUAL_FATAL(ddp_data_load(tmpdir, 1, &infer, &set), DDP_OK);
    CU_ASSERT_EQUAL(set.channels, 1);
    CU_ASSERT_EQUAL(set.rows, 6);
    CU_ASSERT_EQUAL(set.num_classes, 5);
    ddp_data_free(&set);
    /* N x F: F features a sample, a row of them (1 x 1 x F), as a flat input
     * takes it; the values in the file's order */
    write_npy("x_train.npy", "|u1", "(4, 30)", nchw, N * 30);
    CU_ASSERT_EQUAL_FATAL(ddp_data_load(tmpdir, 1, &infer, &set), DDP_OK);
    CU_ASSERT(set.channels == 1 && set.rows == 1 && set.cols == 30);
    CU_ASSERT(set.pixels && memcmp(set.pixels, nchw, N * 30) == 0);
    ddp_data_free(&set);
    test_remove_tmpdir(tmpdir);
}

static int message_has(const char *what)
{
    if (strstr(ddp_error_message(), what))
        return 1;
    fprintf(stderr, "\nmessage \"%s\" lacks \"%s\"", ddp_error_message(), what);
    return 0;
}

/* ddp_data_load of the training set fails with WHAT; nothing is left. */
static void expect_bad(const DdpDataOptions *options, const char *what)
{
    DdpDataSet set;
    CU_ASSERT_EQUAL(ddp_data_load(tmpdir, 1, options, &set), DDP_BAD_INPUT);
    CU_ASSERT(message_has(what));
    CU_ASSERT_PTR_NULL(set.pixels);
    CU_ASSERT_PTR_NULL(set.values);
    CU_ASSERT_PTR_NULL(set.labels);
    ddp_data_free(&set);
}

static void test_wrong_arrays(void)
{
    uint8_t px[N * SAMPLE] = {0};
    make_tmpdir();
    write_labels("y_train.npy");
    /* a shape that allows both layouts, unless one is said */
    write_npy("x_train.npy", "|u1", "(4, 3, 2, 3)", px, N * 18);
    expect_bad(&infer, "images of shape (4, 3, 2, 3): say whether channels come first (N x C x H x W: "
                       "--channels-first) or last (N x H x W x C: --channels-last)");
    DdpDataSet set;
    CU_ASSERT_EQUAL(ddp_data_load(tmpdir, 1, &last, &set), DDP_OK);
    CU_ASSERT_EQUAL(set.channels, 3);
    CU_ASSERT_EQUAL(set.cols, 2);
    ddp_data_free(&set);
    const DdpDataOptions both = {.channels_first = 1, .channels_last = 1};
    expect_bad(&both, "--channels-first and --channels-last: give one");
    /* other types and shapes */
    write_npy("x_train.npy", "<f8", "(4, 3, 2, 5)", px, 0);
    expect_bad(&infer, "truncated");
    write_npy("x_train.npy", "<i4", "(4, 1, 2)", px, N * 8);
    expect_bad(&infer, "images of type 'i4', where uint8 ('|u1') or float32 ('<f4') are read");
    write_npy("x_train.npy", "|u1", "(4,)", px, N);
    expect_bad(&infer, "images of shape (4,), where N x F (features), N x H x W, N x C x H x W or N x H x W x C are "
                       "read");
    write_npy("x_train.npy", "|u1", "(4, 3, 2, 5, 1)", px, N * 30);
    expect_bad(&infer, "images of shape (4, 3, 2, 5, 1), where N x F");
    write_npy("x_train.npy", "|u1", "(0, 3, 2, 5)", px, 0);
    expect_bad(&infer, "images of shape (0, 3, 2, 5): no data");
    /* sizes: one byte short, one over */
    write_npy("x_train.npy", "|u1", "(4, 3, 2, 5)", px, sizeof px - 1);
    expect_bad(&infer, "x_train.npy: truncated: the header's shape announces 120 items of 1 bytes, the file holds 119");
    write_npy("x_train.npy", "|u1", "(4, 3, 2, 5)", px, sizeof px);
    {
        size_t len;
        uint8_t *b = npy_bytes(2, "|u1", "False", "(4, 3, 2, 5)", px, sizeof px, &len);
        write_file("x_train.npy", b, len); /* version 2: a 4-byte header length */
        free(b);
        CU_ASSERT_EQUAL(ddp_data_load(tmpdir, 1, &infer, &set), DDP_OK);
        ddp_data_free(&set);
        b = npy_bytes(1, "|u1", "True", "(4, 3, 2, 5)", px, sizeof px, &len);
        write_file("x_train.npy", b, len);
        free(b);
        expect_bad(&infer, "the array is in Fortran order");
        float nan[SAMPLE * N] = {0};
        nan[SAMPLE + 3] = 0.0f / 0.0f;
        b = npy_bytes(1, "<f4", "False", "(4, 3, 2, 5)", nan, sizeof nan, &len);
        write_file("x_train.npy", b, len);
        free(b);
        expect_bad(&infer, "x_train.npy: image 1 holds a NaN");
        b = npy_bytes(1, ">f4", "False", "(4, 3, 2, 5)", nan, sizeof nan, &len);
        write_file("x_train.npy", b, len);
        free(b);
        expect_bad(&infer, "big-endian data ('>f4')");
    }
    /* labels: their count, type and range */
    write_npy("x_train.npy", "|u1", "(4, 3, 2, 5)", px, sizeof px);
    write_npy("y_train.npy", "<i8", "(3,)", labels_i8, 3 * sizeof *labels_i8);
    expect_bad(&infer, "y_train.npy: labels of shape (3,), but the images are 4: one label per image");
    const int32_t negative[N] = {1, 2, -3, 4}, many[N] = {1, 999, 3, 4}, too_large[N] = {1, 2, 3, 2147483647};
    write_npy("y_train.npy", "<i4", "(4,)", negative, sizeof negative);
    expect_bad(&infer, "y_train.npy: label 2 is -3, where labels are 0 to 2147483646");
    write_npy("y_train.npy", "<i4", "(4,)", too_large, sizeof too_large);
    expect_bad(&infer, "y_train.npy: label 3 is 2147483647, where labels are 0 to 2147483646");
    /* more classes than a byte holds (ImageNet's 1000) */
    write_npy("y_train.npy", "<i4", "(4,)", many, sizeof many);
    CU_ASSERT_EQUAL(ddp_data_load(tmpdir, 1, &infer, &set), DDP_OK);
    CU_ASSERT(set.labels[1] == 999 && set.num_classes == 1000);
    ddp_data_free(&set);
    write_npy("y_train.npy", "<f4", "(4,)", many, sizeof many);
    expect_bad(&infer, "labels of type 'f4', where integers are read");
    const int8_t negative_byte[N] = {1, -128, 3, 4};
    write_npy("y_train.npy", "|i1", "(4,)", negative_byte, sizeof negative_byte);
    expect_bad(&infer, "y_train.npy: label 1 is -128, where labels are 0 to 2147483646");
    const int64_t negative_wide[N] = {1, 2, 3, -5};
    write_npy("y_train.npy", "<i8", "(4,)", negative_wide, sizeof negative_wide);
    expect_bad(&infer, "y_train.npy: label 3 is -5, where labels are 0 to 2147483646");
    const uint64_t huge[N] = {1, 2, 18446744073709551615ull, 4};
    write_npy("y_train.npy", "<u8", "(4,)", huge, sizeof huge);
    expect_bad(&infer, "y_train.npy: label 2 is 18446744073709551615, where labels are 0 to 2147483646");
    /* Keras's (N, 1) labels are taken; (N, 2) are not */
    write_npy("y_train.npy", "<i8", "(4, 1)", labels_i8, sizeof labels_i8);
    CU_ASSERT_EQUAL(ddp_data_load(tmpdir, 1, &infer, &set), DDP_OK);
    CU_ASSERT_EQUAL(set.labels[2], 9);
    ddp_data_free(&set);
    write_npy("y_train.npy", "<i8", "(2, 2)", labels_i8, sizeof labels_i8);
    expect_bad(&infer, "labels of shape (2, 2), but the images are 4: one label per image");
    /* a missing labels file; a layout flag on other data */
    remove(strcat(strcpy((char[256]){0}, tmpdir), "/y_train.npy"));
    expect_bad(&infer, "found x_train.npy but no y_train.npy beside it");
    CU_ASSERT_EQUAL(mkdir(strcat(strcpy((char[256]){0}, tmpdir), "/y_train.npy"), 0700), 0);
    expect_bad(&infer, "found x_train.npy but no y_train.npy beside it; ");
    CU_ASSERT(message_has("/y_train.npy is a directory, not a file"));
    test_remove_tmpdir(tmpdir);
    make_tmpdir();
    expect_bad(&last, "--channels-last says how x_train.npy holds its images, but");
    /* the first file a folder: no format is found, and the message says why this one is not */
    CU_ASSERT_EQUAL(mkdir(strcat(strcpy((char[256]){0}, tmpdir), "/x_train.npy"), 0700), 0);
    expect_bad(&infer, "FashionMNIST/raw; ");
    CU_ASSERT(message_has("/x_train.npy is a directory, not a file"));
    expect_bad(&last, "holds no NumPy files (x_train.npy); ");
    CU_ASSERT(message_has("/x_train.npy is a directory, not a file"));
    test_remove_tmpdir(tmpdir);
}

/* Headers as a hostile file may hold them: nothing is trusted. */
static void test_hostile_headers(void)
{
    static const struct {
        const char *bytes;
        size_t len;
        const char *message;
    } raw[] = {
        {"\x93NUMPZ\x01\x00\x10\x00", 10, "not a NumPy .npy file"},
        {"\x93NUMPY\x07\x00\x10\x00", 10, ".npy format version 7.0, where 1.0 to 3.0 are known"},
        {"\x93NUMPY\x01\x00\xff\xff{}", 12, "truncated: the .npy header says it takes 65535 bytes, the file holds 2"},
        {"\x93NUMPY\x01\x00\x02\x00{}", 12, "no plain type"},
        {"\x93NUM", 4, "truncated: the .npy header does not fit in its 4 bytes"},
        {"\x93NUMPY\x02\x00\x02\x00", 10, "truncated: the .npy header does not fit in its 10 bytes"},
    };
    DdpNpyHeader h;
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
        CU_ASSERT_EQUAL(ddp_npy_header((const uint8_t *)raw[i].bytes, raw[i].len, "f", &h), DDP_BAD_INPUT);
        CU_ASSERT(message_has(raw[i].message));
    }
    static const struct {
        const char *descr, *shape, *message;
    } dicts[] = {
        {"|u1", "[4, 3]", "has no 'shape'"},
        {"|u1", "(99999999999, 9999999999)", "shape is impossibly large"},
        {"|u1", "(184467440737095516150,)", "shape is impossibly large"},
        {"|u1", "(1, 2, 3, 4, 5, 6, 7, 8, 9)", "not a tuple of at most 8 sizes"},
        {"|u1", "(4 3 2)", "not a tuple of at most 8 sizes"},
        {"<u8", "(3000000000,)",
         "truncated: the header's shape announces 3000000000 items of 8 bytes, the file holds 0 bytes of data"},
        {"<c8", "(3,)", "no plain type"},
        {"<U10", "(3,)", "no plain type"},
        {"u", "(3,)", "no plain type"},
        {"|u1', 'descr': '<f8", "(3,)", "the .npy header gives 'descr' twice"}, /* NumPy takes the last */
        {"|u1', 'shape': (2,), 'x': 'y", "(3,)", "the .npy header gives 'shape' twice"},
        {"|u1', 'fortran_order': True, 'x': '", "(3,)", "the .npy header gives 'fortran_order' twice"},
    };
    /* a key inside a string value, before the real one, is not the key */
    {
        size_t len;
        uint8_t *b = npy_bytes(1, "|u1', 'x': \"'fortran_order': True\", 'y': 'z", "False", "(2,)", "ab", 2, &len);
        CU_ASSERT_EQUAL(ddp_npy_header(b, len, "f", &h), DDP_OK);
        CU_ASSERT_EQUAL(h.count, 2);
        free(b);
        /* a type without its byte order, as np.dtype('u1') takes it: the machine's */
        const float two[2] = {1.5f, -2.0f};
        b = npy_bytes(1, "f4", "False", "(2,)", two, sizeof two, &len);
        CU_ASSERT_EQUAL(ddp_npy_header(b, len, "f", &h), DDP_OK);
        CU_ASSERT(h.kind == 'f' && h.item_bytes == 4 && h.count == 2);
        free(b);
        /* a header that ends just after '<f4, in a buffer of exactly its length */
        static const char cut_text[] = "\x93NUMPY\x01\x00\x0e\x00{'descr': '<f4";
        uint8_t *cut = malloc(sizeof cut_text - 1);
        CU_ASSERT_FATAL(cut != NULL);
        memcpy(cut, cut_text, sizeof cut_text - 1);
        CU_ASSERT_EQUAL(ddp_npy_header(cut, sizeof cut_text - 1, "f", &h), DDP_BAD_INPUT);
        CU_ASSERT(message_has("no plain type"));
        free(cut);
    }
    for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
        size_t len;
        uint8_t *b = npy_bytes(1, dicts[i].descr, "False", dicts[i].shape, "", 0, &len);
        CU_ASSERT_EQUAL(ddp_npy_header(b, len, "f", &h), DDP_BAD_INPUT);
        CU_ASSERT(message_has(dicts[i].message));
        free(b);
    }
}

void suite_npy(void)
{
    static const TestCase cases[] = {
        {"uint8 and float32, channels first and last, inferred and said, one channel", test_layouts_and_types},
        {"wrong types, shapes, sizes, order, values and labels", test_wrong_arrays},
        {"hostile headers", test_hostile_headers},
        {NULL, NULL},
    };
    test_add_suite("npy", cases);
}
