/*
 * Tests of runtime/idx.c: small IDX files written here, raw and gzipped, in
 * every torchvision layout, then each way a file can be broken; and the real
 * Fashion-MNIST when Debian's dataset-fashion-mnist is installed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "idx.h"  // ddp_idx_load, and dataset.h: ddp_data_gather, ddp_data_check_classes
#include "testutil.h"

enum { N = 5, ROWS = 3, COLS = 4 };

static char tmpdir[64];

static void make_tmpdir(void) { test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_idx_XXXXXX"); }

/* Writes BYTES[0..len) to DIR/NAME, through gzip when GZ. */
static void write_bytes(const char *name, int gz, const unsigned char *bytes, size_t len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    /* mkdir -p for the torchvision layouts */
    for (char *slash = strchr(path + strlen(tmpdir) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(path, 0755);
        *slash = '/';
    }
    if (gz) {
        gzFile z = gzopen(path, "wb");
        CU_ASSERT_FATAL(z != NULL);
        if (len)
            CU_ASSERT(gzwrite(z, bytes, (unsigned)len) == (int)len);
        gzclose(z);
    } else {
        FILE *f = fopen(path, "wb");
        CU_ASSERT_FATAL(f != NULL);
        CU_ASSERT(fwrite(bytes, 1, len, f) == len);
        fclose(f);
    }
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* The pixel the fixtures hold at sample i, offset p. */
static unsigned char pixel(int i, int p)
{
    return (unsigned char)(i * 50 + p * 17);
}

/* An images file: header fields as given, then KEEP bytes of pixels
 * (N*ROWS*COLS for a well-formed file). */
static void write_images(const char *name, int gz, uint32_t magic, uint32_t n, uint32_t rows,
                         uint32_t cols, size_t keep)
{
    unsigned char buf[16 + 2 * N * ROWS * COLS];
    put_be32(buf, magic);
    put_be32(buf + 4, n);
    put_be32(buf + 8, rows);
    put_be32(buf + 12, cols);
    for (size_t k = 0; k < sizeof buf - 16; k++)
        buf[16 + k] = pixel((int)(k / (ROWS * COLS)), (int)(k % (ROWS * COLS)));
    CU_ASSERT_FATAL(keep <= sizeof buf - 16);
    write_bytes(name, gz, buf, 16 + keep);
}

static void write_labels(const char *name, int gz, uint32_t magic, uint32_t n,
                         const unsigned char *labels, size_t keep)
{
    unsigned char buf[8 + 64];
    put_be32(buf, magic);
    put_be32(buf + 4, n);
    CU_ASSERT_FATAL(keep <= 64);
    memcpy(buf + 8, labels, keep);
    write_bytes(name, gz, buf, 8 + keep);
}

static const unsigned char good_labels[N] = {3, 0, 9, 1, 4};

/* A well-formed pair under SUB ("" or "raw/"...), for the train or test set. */
static void write_pair(const char *sub, int train, int gz)
{
    char images[128], labels[128];
    const char *set = train ? "train" : "t10k";
    snprintf(images, sizeof images, "%s%s-images-idx3-ubyte%s", sub, set, gz ? ".gz" : "");
    snprintf(labels, sizeof labels, "%s%s-labels-idx1-ubyte%s", sub, set, gz ? ".gz" : "");
    write_images(images, gz, 0x803, N, ROWS, COLS, N * ROWS * COLS);
    write_labels(labels, gz, 0x801, N, good_labels, N);
}

static int message_has(const char *what)
{
    if (strstr(ddp_error_message(), what))
        return 1;
    fprintf(stderr, "\nmessage \"%s\" lacks \"%s\"", ddp_error_message(), what);
    return 0;
}

static void check_fixture(const DdpDataSet *set)
{
    CU_ASSERT_EQUAL(set->n, N);
    CU_ASSERT_EQUAL(set->channels, 1);
    CU_ASSERT_EQUAL(set->rows, ROWS);
    CU_ASSERT_EQUAL(set->cols, COLS);
    CU_ASSERT_EQUAL(set->num_classes, 10);
    int64_t pick[3] = {4, 0, 4};
    float images[3 * ROWS * COLS];
    int32_t labels[3];
    CU_ASSERT_EQUAL_FATAL(ddp_data_gather(set, pick, 3, images, labels), DDP_OK);
    int bad = 0;
    for (int s = 0; s < 3; s++)
        for (int p = 0; p < ROWS * COLS; p++)
            bad += images[s * ROWS * COLS + p] != (float)pixel((int)pick[s], p) / 255.0f;
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(labels[0], 4);
    CU_ASSERT_EQUAL(labels[1], 3);
    CU_ASSERT_EQUAL(labels[2], 4);
}

static void test_raw_and_gz(void)
{
    for (int gz = 0; gz < 2; gz++)
        for (int train = 0; train < 2; train++) {
            make_tmpdir();
            write_pair("", train, gz);
            DdpDataSet set;
            CU_ASSERT_EQUAL(ddp_idx_load(tmpdir, train, "", &set), DDP_OK);
            check_fixture(&set);
            /* the other set is not there */
            ddp_data_free(&set);
            CU_ASSERT_EQUAL(ddp_idx_load(tmpdir, !train, "", &set), DDP_BAD_INPUT);
            CU_ASSERT(message_has(train ? "no t10k-images-idx3-ubyte[.gz] in" : "no train-images"));
            test_remove_tmpdir(tmpdir);
        }
}

static void test_layouts(void)
{
    static const char *const subs[] = {"raw/", "MNIST/raw/", "FashionMNIST/raw/"};
    for (int i = 0; i < 3; i++) {
        make_tmpdir();
        write_pair(subs[i], 1, i == 1);
        DdpDataSet set;
        CU_ASSERT_EQUAL(ddp_idx_load(tmpdir, 1, "", &set), DDP_OK);
        check_fixture(&set);
        CU_ASSERT_PTR_NOT_NULL(strstr(set.images_path, subs[i]));
        ddp_data_free(&set);
        test_remove_tmpdir(tmpdir);
    }
    /* A trailing slash on the directory changes nothing. */
    make_tmpdir();
    write_pair("", 1, 0);
    char slashed[80];
    snprintf(slashed, sizeof slashed, "%s/", tmpdir);
    DdpDataSet set;
    CU_ASSERT_EQUAL(ddp_idx_load(slashed, 1, "", &set), DDP_OK);
    CU_ASSERT_PTR_NULL(strstr(set.images_path, "//"));
    ddp_data_free(&set);
    test_remove_tmpdir(tmpdir);
}

/* gzip is recognised by content: a gunzipped file kept its .gz name, and a
 * gzipped one lost it. */
static void test_content_not_name(void)
{
    make_tmpdir();
    write_images("train-images-idx3-ubyte", 1, 0x803, N, ROWS, COLS, N * ROWS * COLS);
    write_labels("train-labels-idx1-ubyte.gz", 0, 0x801, N, good_labels, N);
    DdpDataSet set;
    CU_ASSERT_EQUAL(ddp_idx_load(tmpdir, 1, "", &set), DDP_OK);
    check_fixture(&set);
    ddp_data_free(&set);
    test_remove_tmpdir(tmpdir);
}

static void test_missing(void)
{
    DdpDataSet set;
    make_tmpdir();
    CU_ASSERT_EQUAL(ddp_idx_load(tmpdir, 1, "", &set), DDP_BAD_INPUT);
    CU_ASSERT(message_has("raw, "));
    CU_ASSERT(message_has("/MNIST/raw or "));
    CU_ASSERT(message_has("/FashionMNIST/raw"));
    /* a folder of the file's name, as some unpacked archives of MNIST have */
    char folder[128];
    snprintf(folder, sizeof folder, "%s/train-images-idx3-ubyte", tmpdir);
    CU_ASSERT_EQUAL_FATAL(mkdir(folder, 0700), 0);
    CU_ASSERT_EQUAL(ddp_idx_load(tmpdir, 1, "", &set), DDP_BAD_INPUT);
    CU_ASSERT(message_has("/FashionMNIST/raw; "));
    CU_ASSERT(message_has("/train-images-idx3-ubyte is a directory, not a file"));
    write_images("raw/train-images-idx3-ubyte", 0, 0x803, N, ROWS, COLS, N * ROWS * COLS);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, N, good_labels, N);
    CU_ASSERT_EQUAL(ddp_idx_load(tmpdir, 1, "", &set), DDP_BAD_INPUT);
    CU_ASSERT(message_has("but no train-labels-idx1-ubyte[.gz] beside it"));
    /* the images' folder is not the labels' */
    CU_ASSERT(strstr(ddp_error_message(), "is a directory") == NULL);
    CU_ASSERT_EQUAL(rmdir(folder), 0);
    CU_ASSERT_PTR_NULL(set.pixels);
    ddp_data_free(&set);
    test_remove_tmpdir(tmpdir);
    CU_ASSERT_EQUAL(ddp_idx_load("/nonexistent/ddp", 1, "", &set), DDP_BAD_INPUT);
    CU_ASSERT(message_has("/nonexistent/ddp: No such file"));
}

/* Loads the train set of tmpdir expecting DDP_BAD_INPUT and a message holding
 * WHAT; then empties tmpdir. */
static void expect_bad(const char *what)
{
    DdpDataSet set;
    CU_ASSERT_EQUAL(ddp_idx_load(tmpdir, 1, "", &set), DDP_BAD_INPUT);
    CU_ASSERT(message_has(what));
    CU_ASSERT_PTR_NULL(set.pixels);
    CU_ASSERT_PTR_NULL(set.labels);
    ddp_data_free(&set);
    test_remove_tmpdir(tmpdir);
}

static void test_truncated(void)
{
    for (int gz = 0; gz < 2; gz++) {
        const char *images = gz ? "train-images-idx3-ubyte.gz" : "train-images-idx3-ubyte";
        const char *labels = gz ? "train-labels-idx1-ubyte.gz" : "train-labels-idx1-ubyte";
        make_tmpdir();
        write_images(images, gz, 0x803, N, ROWS, COLS, N * ROWS * COLS - 7);
        write_labels(labels, gz, 0x801, N, good_labels, N);
        expect_bad(gz ? "truncated: header says 5 images of 3x4 (60 bytes), file holds 53 bytes of pixels"
                      : "train-images-idx3-ubyte: truncated: header says 5 images of 3x4 (60 bytes), "
                        "file holds 53 bytes of pixels");
        make_tmpdir();
        write_images(images, gz, 0x803, N, ROWS, COLS, N * ROWS * COLS);
        write_labels(labels, gz, 0x801, N, good_labels, 2);
        expect_bad("truncated: header says 5 labels (5 bytes), file holds 2 bytes of labels");
        make_tmpdir();
        write_bytes(images, gz, (const unsigned char *)"\0\0\x08\x03\0\0", 6);
        write_labels(labels, gz, 0x801, N, good_labels, N);
        expect_bad("truncated: an IDX header takes 16 bytes, the file holds 6");
        make_tmpdir();
        write_bytes(images, gz, (const unsigned char *)"", 0);
        write_labels(labels, gz, 0x801, N, good_labels, N);
        expect_bad("the file holds 0");
    }
    /* A gzip stream cut short, as an interrupted download leaves it. */
    make_tmpdir();
    write_images("train-images-idx3-ubyte.gz", 1, 0x803, N, ROWS, COLS, N * ROWS * COLS);
    write_labels("train-labels-idx1-ubyte.gz", 1, 0x801, N, good_labels, N);
    char path[128];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", tmpdir);
    struct stat st;
    CU_ASSERT_FATAL(stat(path, &st) == 0);
    CU_ASSERT_FATAL(truncate(path, st.st_size - 20) == 0);
    expect_bad("train-images-idx3-ubyte.gz: truncated");
    /* ... or only in its last 8 bytes, the checksum and length: every
     * pixel there, but none of them checked */
    for (int cut = 1; cut <= 8; cut += 7) {
        make_tmpdir();
        write_images("train-images-idx3-ubyte.gz", 1, 0x803, N, ROWS, COLS, N * ROWS * COLS);
        write_labels("train-labels-idx1-ubyte.gz", 1, 0x801, N, good_labels, N);
        snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", tmpdir);
        CU_ASSERT_FATAL(stat(path, &st) == 0);
        CU_ASSERT_FATAL(truncate(path, st.st_size - cut) == 0);
        expect_bad("train-images-idx3-ubyte.gz: truncated: the gzip stream ends before its checksum, so the 5 images "
                   "of 3x4 cannot be trusted (an interrupted download?)");
    }
}

static void test_trailing_data(void)
{
    for (int gz = 0; gz < 2; gz++) {
        make_tmpdir();
        write_images(gz ? "train-images-idx3-ubyte.gz" : "train-images-idx3-ubyte", gz, 0x803,
                     N, ROWS, COLS, N * ROWS * COLS + 3);
        write_labels("train-labels-idx1-ubyte", 0, 0x801, N, good_labels, N);
        expect_bad("trailing data");
    }
}

static void test_bad_magic(void)
{
    make_tmpdir();
    write_images("train-images-idx3-ubyte", 0, 0x801, N, ROWS, COLS, N * ROWS * COLS);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, N, good_labels, N);
    expect_bad("train-images-idx3-ubyte: not an IDX images file: magic number 0x00000801, "
               "expected 0x00000803 or 0x00000804 (unsigned bytes, 3 or 4 dimensions) (this is a labels file)");
    make_tmpdir();
    write_images("train-images-idx3-ubyte", 0, 0x803, N, ROWS, COLS, N * ROWS * COLS);
    write_labels("train-labels-idx1-ubyte.gz", 1, 0x0d01, N, good_labels, N);
    expect_bad("not an IDX labels file: magic number 0x00000d01, expected 0x00000801");
    make_tmpdir();
    write_bytes("train-images-idx3-ubyte", 0, (const unsigned char *)"<html>404 not found</html>", 26);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, N, good_labels, N);
    expect_bad("magic number 0x3c68746d");
    /* gzip magic, then garbage */
    make_tmpdir();
    write_bytes("train-images-idx3-ubyte.gz", 0,
                (const unsigned char *)"\x1f\x8b\x08\0\0\0\0\0\0\x03garbage garbage garbage", 33);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, N, good_labels, N);
    expect_bad("train-images-idx3-ubyte.gz: corrupt gzip data: invalid block type");
}

static void test_counts_and_dims(void)
{
    make_tmpdir();
    write_images("train-images-idx3-ubyte", 0, 0x803, N, ROWS, COLS, N * ROWS * COLS);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, N - 1, good_labels, N - 1);
    expect_bad("train-labels-idx1-ubyte: holds 4 labels, but ");
    make_tmpdir();
    write_images("train-images-idx3-ubyte", 0, 0x803, N, 0, COLS, 0);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, N, good_labels, N);
    expect_bad("dimension 1 as 0");
}

/* Headers that claim far more than the file holds must fail before any large
 * allocation: valgrind and the sanitizers would see one. */
static void test_hostile_headers(void)
{
    make_tmpdir();
    write_images("train-images-idx3-ubyte", 0, 0x803, 0xffffffffu, 0xffffffffu, 0xffffffffu, 8);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, N, good_labels, N);
    expect_bad("(4294967295 x 4294967295 x 4294967295) are impossibly large");
    make_tmpdir();
    write_images("train-images-idx3-ubyte", 0, 0x803, 4000000000u, 28, 28, 8);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, N, good_labels, N);
    expect_bad("truncated: header says 4000000000 images of 28x28 (3136000000000 bytes), file holds 8");
    make_tmpdir();
    write_images("train-images-idx3-ubyte.gz", 1, 0x803, 4000000000u, 28, 28, 8);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, N, good_labels, N);
    expect_bad("more than the 4 GiB this loader accepts from a gzipped file");
    /* Under the cap but still a lie: 5 million images of 28x28 claimed, the
     * buffer grows only with what arrives. */
    make_tmpdir();
    write_images("train-images-idx3-ubyte.gz", 1, 0x803, 5000000u, 28, 28, 60);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, N, good_labels, N);
    expect_bad("truncated: header says 5000000 images of 28x28 (3920000000 bytes), file holds 60 bytes");
    make_tmpdir();
    write_images("train-images-idx3-ubyte", 0, 0x803, N, ROWS, COLS, N * ROWS * COLS);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, 0xffffffffu, good_labels, N);
    expect_bad("holds 4294967295 labels, but ");
}

static void test_classes(void)
{
    make_tmpdir();
    static const unsigned char labels[N] = {3, 0, 12, 1, 11};
    write_images("train-images-idx3-ubyte", 0, 0x803, N, ROWS, COLS, N * ROWS * COLS);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, N, labels, N);
    DdpDataSet set;
    CU_ASSERT_EQUAL_FATAL(ddp_idx_load(tmpdir, 1, "", &set), DDP_OK);
    CU_ASSERT_EQUAL(set.num_classes, 13);
    CU_ASSERT_EQUAL(ddp_data_check_classes(&set, 13), DDP_OK);
    CU_ASSERT_EQUAL(ddp_data_check_classes(&set, 10), DDP_BAD_INPUT);
    CU_ASSERT(message_has("train-labels-idx1-ubyte: sample 2 has label 12, but the net has 10 classes (0..9)"));
    int64_t out_of_range = N;
    float images[ROWS * COLS];
    int32_t lab;
    CU_ASSERT_EQUAL(ddp_data_gather(&set, &out_of_range, 1, images, &lab), DDP_FAIL);
    CU_ASSERT(message_has("internal error"));
    ddp_data_free(&set);
    test_remove_tmpdir(tmpdir);
}

/* Debian's Fashion-MNIST, when installed: sizes, and sums checked against
 * Python's gzip module reading the same files. */
static void test_fashion_mnist(void)
{
    struct stat st;
    if (stat(DDP_DATA_DEFAULT_DIR "/train-images-idx3-ubyte.gz", &st) != 0) {
        fprintf(stderr, "\n(skipped: dataset-fashion-mnist not installed)");
        return;
    }
    static const struct {
        int train;
        int64_t n;
        int first_label;
        uint64_t label_sum, pixel_sum;
    } want[] = {{1, 60000, 9, 270000, 3431114169u}, {0, 10000, 9, 45000, 573469082u}};
    for (int k = 0; k < 2; k++) {
        DdpDataSet set;
        CU_ASSERT_EQUAL_FATAL(ddp_idx_load(NULL, want[k].train, "", &set), DDP_OK);
        CU_ASSERT_EQUAL(set.n, want[k].n);
        CU_ASSERT_EQUAL(set.rows, 28);
        CU_ASSERT_EQUAL(set.cols, 28);
        CU_ASSERT_EQUAL(set.num_classes, 10);
        CU_ASSERT_EQUAL(ddp_data_check_classes(&set, 10), DDP_OK);
        CU_ASSERT_EQUAL(set.labels[0], want[k].first_label);
        uint64_t labels = 0, pixels = 0;
        for (int64_t i = 0; i < set.n; i++)
            labels += set.labels[i];
        for (int64_t i = 0; i < set.n * 28 * 28; i++)
            pixels += set.pixels[i];
        CU_ASSERT_EQUAL(labels, want[k].label_sum);
        CU_ASSERT_EQUAL(pixels, want[k].pixel_sum);
        ddp_data_free(&set);
    }
}

/* Images of several channels: IDX with 4 dimensions (N x C x H x W), each
 * sample's channels one after another, as a net's C x H x W input reads them. */
static void test_channels(void)
{
    enum { C = 2, BYTES = C * ROWS * COLS };
    make_tmpdir();
    unsigned char buf[20 + N * BYTES];
    put_be32(buf, 0x804);
    put_be32(buf + 4, N);
    put_be32(buf + 8, C);
    put_be32(buf + 12, ROWS);
    put_be32(buf + 16, COLS);
    for (int k = 0; k < N * BYTES; k++)
        buf[20 + k] = pixel(k / BYTES, k % BYTES);
    write_bytes("train-images-idx3-ubyte", 0, buf, sizeof buf);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, N, good_labels, N);
    DdpDataSet set;
    CU_ASSERT_EQUAL_FATAL(ddp_idx_load(tmpdir, 1, "", &set), DDP_OK);
    CU_ASSERT_EQUAL(set.n, N);
    CU_ASSERT_EQUAL(set.channels, C);
    CU_ASSERT_EQUAL(set.rows, ROWS);
    CU_ASSERT_EQUAL(set.cols, COLS);
    CU_ASSERT_STRING_EQUAL(set.format, "IDX");
    int64_t pick = 3;
    float images[BYTES];
    int32_t label;
    CU_ASSERT_EQUAL_FATAL(ddp_data_gather(&set, &pick, 1, images, &label), DDP_OK);
    int bad = 0;
    for (int p = 0; p < BYTES; p++)
        bad += images[p] != (float)pixel(3, p) / 255.0f;
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(label, good_labels[3]);
    ddp_data_free(&set);
    /* one channel short of what the header says */
    write_bytes("train-images-idx3-ubyte", 0, buf, sizeof buf - ROWS * COLS);
    expect_bad("train-images-idx3-ubyte: truncated: header says 5 images of 2x3x4 (120 bytes), file holds 108 bytes "
               "of pixels");
    /* 5 dimensions: not an images file this loader reads */
    make_tmpdir();
    put_be32(buf, 0x805);
    write_bytes("train-images-idx3-ubyte", 0, buf, sizeof buf);
    write_labels("train-labels-idx1-ubyte", 0, 0x801, N, good_labels, N);
    expect_bad("magic number 0x00000805, expected 0x00000803 or 0x00000804");
}

void suite_idx(void)
{
    static const TestCase cases[] = {
        {"raw and gzipped, train and test", test_raw_and_gz},
        {"torchvision layouts", test_layouts},
        {"gzip recognised by content, not name", test_content_not_name},
        {"missing files name the places searched", test_missing},
        {"truncated files", test_truncated},
        {"trailing data", test_trailing_data},
        {"bad magic numbers", test_bad_magic},
        {"images of several channels (N x C x H x W)", test_channels},
        {"mismatched counts, zero dimensions", test_counts_and_dims},
        {"hostile headers allocate nothing large", test_hostile_headers},
        {"labels beyond the net's classes", test_classes},
        {"Debian's Fashion-MNIST, if installed", test_fashion_mnist},
        {NULL, NULL},
    };
    test_add_suite("idx", cases);
}
