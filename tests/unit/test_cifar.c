/*
 * Tests of runtime/cifar.c and of data_load.c's choice of reader: small
 * CIFAR-10 and CIFAR-100 files written here, in the archives' folders and
 * not, read through ddp_data_load as the trainer reads them; then each way
 * a file can be wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cifar.h"    // ddp_cifar_parse, DDP_CIFAR_PIXELS
#include "data_load.h"  // ddp_data_load; dataset.h: ddp_data_gather
#include "testutil.h"

static char tmpdir[64];

static void make_tmpdir(void) { test_make_tmpdir(tmpdir, sizeof tmpdir, "/tmp/ddp_cifar_XXXXXX"); }

/* The pixel the fixtures hold at record R of file F, offset P. */
static unsigned char pixel(int f, int r, int p)
{
    return (unsigned char)(f * 101 + r * 37 + p * 7);
}

/* DIR/NAME (DIR under tmpdir, "" for tmpdir itself) with N records of file
 * number F; each record's labels are LABELS(r): one byte (CIFAR-10) or two
 * (CIFAR-100: coarse, fine). */
static void write_records(const char *dir, const char *name, int f, int n, int hundred, int (*label)(int r, int which))
{
    char path[256];
    snprintf(path, sizeof path, "%s%s%s", tmpdir, dir[0] ? "/" : "", dir);
    mkdir(path, 0755);
    snprintf(path + strlen(path), sizeof path - strlen(path), "/%s", name);
    FILE *out = fopen(path, "wb");
    CU_ASSERT_FATAL(out != NULL);
    for (int r = 0; r < n; r++) {
        for (int which = 0; which < (hundred ? 2 : 1); which++)
            fputc(label(r, which), out);
        for (int p = 0; p < DDP_CIFAR_PIXELS; p++)
            fputc(pixel(f, r, p), out);
    }
    fclose(out);
}

static int ten_label(int r, int which)
{
    (void)which;
    return (r * 3) % 10;
}

/* CIFAR-100: coarse r % 20, fine 99 - r % 100 */
static int hundred_label(int r, int which)
{
    return which == 0 ? r % 20 : 99 - r % 100;
}

static const DdpDataOptions fine = {0}, coarse = {.coarse_labels = 1};

static int message_has(const char *what)
{
    if (strstr(ddp_error_message(), what))
        return 1;
    fprintf(stderr, "\nmessage \"%s\" lacks \"%s\"", ddp_error_message(), what);
    return 0;
}

/* Sample K of SET is record R of file F with label LABEL, pixel for pixel. */
static void check_sample(const DdpDataSet *set, int64_t k, int f, int r, int label)
{
    static float image[DDP_CIFAR_PIXELS];
    int32_t got;
    CU_ASSERT_EQUAL_FATAL(ddp_data_gather(set, &k, 1, image, &got), DDP_OK);
    CU_ASSERT_EQUAL(got, label);
    int bad = 0;
    for (int p = 0; p < DDP_CIFAR_PIXELS; p++)
        bad += image[p] != (float)pixel(f, r, p) / 255.0f;
    CU_ASSERT_EQUAL(bad, 0);
}

static void test_cifar10(void)
{
    static const char *const folders[] = {"", "cifar-10-batches-bin"};
    for (int i = 0; i < 2; i++) {
        make_tmpdir();
        write_records(folders[i], "data_batch_1.bin", 1, 4, 0, ten_label);
        write_records(folders[i], "data_batch_2.bin", 2, 3, 0, ten_label);
        write_records(folders[i], "test_batch.bin", 9, 2, 0, ten_label);
        DdpDataSet set;
        CU_ASSERT_EQUAL_FATAL(ddp_data_load(tmpdir, 1, &fine, &set), DDP_OK);
        CU_ASSERT_EQUAL(set.n, 7);
        CU_ASSERT_EQUAL(set.channels, 3);
        CU_ASSERT_EQUAL(set.rows, 32);
        CU_ASSERT_EQUAL(set.cols, 32);
        CU_ASSERT_EQUAL(set.num_classes, 10); /* labels 0, 3, 6, 9 */
        CU_ASSERT_STRING_EQUAL(set.format, "CIFAR-10");
        CU_ASSERT(strstr(set.images_path, "data_batch_1.bin ... data_batch_2.bin") != NULL);
        check_sample(&set, 0, 1, 0, 0);
        check_sample(&set, 3, 1, 3, 9);
        check_sample(&set, 4, 2, 0, 0);
        check_sample(&set, 6, 2, 2, 6);
        ddp_data_free(&set);
        CU_ASSERT_EQUAL_FATAL(ddp_data_load(tmpdir, 0, &fine, &set), DDP_OK);
        CU_ASSERT_EQUAL(set.n, 2);
        check_sample(&set, 1, 9, 1, 3);
        ddp_data_free(&set);
        /* a batch after a gap: refused, not a training set cut short */
        write_records(folders[i], "data_batch_4.bin", 4, 5, 0, ten_label);
        CU_ASSERT_EQUAL(ddp_data_load(tmpdir, 1, &fine, &set), DDP_BAD_INPUT);
        CU_ASSERT(strstr(ddp_error_message(), "data_batch_3.bin is missing, but data_batch_4.bin is there: the "
                                              "training set would be cut short") != NULL);
        CU_ASSERT_PTR_NULL(set.pixels);
        test_remove_tmpdir(tmpdir);
    }
}

static void test_cifar100(void)
{
    static const char *const folders[] = {"", "cifar-100-binary"};
    for (int i = 0; i < 2; i++) {
        make_tmpdir();
        write_records(folders[i], "train.bin", 1, 25, 1, hundred_label);
        write_records(folders[i], "test.bin", 2, 3, 1, hundred_label);
        DdpDataSet set;
        CU_ASSERT_EQUAL_FATAL(ddp_data_load(tmpdir, 1, &fine, &set), DDP_OK);
        CU_ASSERT_EQUAL(set.n, 25);
        CU_ASSERT_EQUAL(set.num_classes, 100);
        CU_ASSERT_STRING_EQUAL(set.format, "CIFAR-100, fine labels");
        check_sample(&set, 21, 1, 21, 78);
        ddp_data_free(&set);
        CU_ASSERT_EQUAL_FATAL(ddp_data_load(tmpdir, 1, &coarse, &set), DDP_OK);
        CU_ASSERT_EQUAL(set.num_classes, 20);
        CU_ASSERT_STRING_EQUAL(set.format, "CIFAR-100, coarse labels");
        check_sample(&set, 21, 1, 21, 1);
        ddp_data_free(&set);
        CU_ASSERT_EQUAL_FATAL(ddp_data_load(tmpdir, 0, &coarse, &set), DDP_OK);
        CU_ASSERT_EQUAL(set.n, 3);
        check_sample(&set, 2, 2, 2, 2);
        ddp_data_free(&set);
        test_remove_tmpdir(tmpdir);
    }
}

/* A directory holding CIFAR files and others: CIFAR's are read (then
 * NumPy's, then IDX: test_npy checks the second step). */
static void test_cifar_first(void)
{
    make_tmpdir();
    write_records("", "data_batch_1.bin", 1, 2, 0, ten_label);
    write_records("", "test_batch.bin", 2, 2, 0, ten_label);
    write_records("", "x_train.npy", 3, 1, 0, ten_label); /* not a .npy file: never read */
    DdpDataSet set;
    CU_ASSERT_EQUAL(ddp_data_load(tmpdir, 1, &fine, &set), DDP_OK);
    CU_ASSERT_STRING_EQUAL(set.format, "CIFAR-10");
    ddp_data_free(&set);
    test_remove_tmpdir(tmpdir);
}

/* ddp_data_load fails with a message holding WHAT, and leaves nothing. */
static void expect_bad(int train, const DdpDataOptions *options, const char *what)
{
    DdpDataSet set;
    CU_ASSERT_EQUAL(ddp_data_load(tmpdir, train, options, &set), DDP_BAD_INPUT);
    CU_ASSERT(message_has(what));
    CU_ASSERT_PTR_NULL(set.pixels);
    CU_ASSERT_PTR_NULL(set.labels);
    ddp_data_free(&set);
}

static int label_ten(int r, int which)
{
    (void)which;
    return r == 2 ? 10 : 1;
}

static int fine_hundred(int r, int which)
{
    return which == 0 ? 3 : r == 1 ? 100 : 5;
}

static int coarse_twenty(int r, int which)
{
    return which == 0 ? (r == 1 ? 20 : 3) : 5;
}

static void test_wrong_files(void)
{
    /* a missing test file, named with the one found */
    make_tmpdir();
    write_records("", "data_batch_1.bin", 1, 2, 0, ten_label);
    expect_bad(0, &fine, "found CIFAR-10's data_batch_1.bin but no test_batch.bin beside it");
    char folder[128];
    snprintf(folder, sizeof folder, "%s/test_batch.bin", tmpdir);
    CU_ASSERT_EQUAL_FATAL(mkdir(folder, 0700), 0);
    expect_bad(0, &fine, "no test_batch.bin beside it; ");
    CU_ASSERT(message_has("/test_batch.bin is a directory, not a file"));
    CU_ASSERT_EQUAL(rmdir(folder), 0);
    /* the superclasses of a CIFAR-10 set, or of no CIFAR set */
    expect_bad(1, &coarse, "holds CIFAR-10, which has one label per image");
    test_remove_tmpdir(tmpdir);
    make_tmpdir();
    expect_bad(1, &coarse, "holds no CIFAR-100 files (train.bin and test.bin)");
    /* the first file a folder, in the archive's own folder: no format is
     * found, and the message says why this one is not */
    snprintf(folder, sizeof folder, "%s/cifar-10-batches-bin", tmpdir);
    CU_ASSERT_EQUAL_FATAL(mkdir(folder, 0700), 0);
    snprintf(folder, sizeof folder, "%s/cifar-10-batches-bin/data_batch_1.bin", tmpdir);
    CU_ASSERT_EQUAL_FATAL(mkdir(folder, 0700), 0);
    expect_bad(0, &fine, "FashionMNIST/raw; ");
    CU_ASSERT(message_has("/cifar-10-batches-bin/data_batch_1.bin is a directory, not a file"));
    CU_ASSERT_EQUAL(rmdir(folder), 0);
    /* CIFAR-100's, under --coarse-labels; alongside NumPy's, both said */
    snprintf(folder, sizeof folder, "%s/train.bin", tmpdir);
    CU_ASSERT_EQUAL_FATAL(mkdir(folder, 0700), 0);
    expect_bad(1, &coarse, "holds no CIFAR-100 files (train.bin and test.bin); ");
    CU_ASSERT(message_has("/train.bin is a directory, not a file"));
    snprintf(folder, sizeof folder, "%s/x_train.npy", tmpdir);
    CU_ASSERT_EQUAL_FATAL(mkdir(folder, 0700), 0);
    expect_bad(0, &fine, "/train.bin is a directory, not a file; ");
    CU_ASSERT(message_has("/x_train.npy is a directory, not a file"));
    /* a later place found: no note on the earlier name */
    write_records("cifar-10-batches-bin", "data_batch_1.bin", 1, 2, 0, ten_label);
    expect_bad(0, &fine, "found CIFAR-10's data_batch_1.bin but no test_batch.bin beside it");
    CU_ASSERT(!message_has("is a directory"));
    test_remove_tmpdir(tmpdir);

    /* a record cut short, in a later batch */
    make_tmpdir();
    write_records("", "data_batch_1.bin", 1, 2, 0, ten_label);
    write_records("", "data_batch_2.bin", 2, 2, 0, ten_label);
    char path[256];
    snprintf(path, sizeof path, "%s/data_batch_2.bin", tmpdir);
    CU_ASSERT_FATAL(truncate(path, 2 * 3073 - 100) == 0);
    expect_bad(1, &fine, "data_batch_2.bin: 6046 bytes are not whole CIFAR-10 records (3073 bytes each: a label, "
                         "then 3x32x32 pixels)");
    /* an empty one */
    CU_ASSERT_FATAL(truncate(path, 0) == 0);
    expect_bad(1, &fine, "data_batch_2.bin: 0 bytes are not whole CIFAR-10 records");
    test_remove_tmpdir(tmpdir);

    /* labels outside the classes */
    make_tmpdir();
    write_records("", "data_batch_1.bin", 1, 3, 0, label_ten);
    expect_bad(1, &fine, "data_batch_1.bin: record 2 has the label 10, outside the 10 classes of CIFAR-10 (0..9)");
    test_remove_tmpdir(tmpdir);
    make_tmpdir();
    write_records("", "train.bin", 1, 3, 1, fine_hundred);
    expect_bad(1, &fine, "train.bin: record 1 has fine label 100, outside the 100 classes of CIFAR-100, fine labels");
    test_remove_tmpdir(tmpdir);
    make_tmpdir();
    write_records("", "train.bin", 1, 3, 1, coarse_twenty);
    expect_bad(1, &coarse, "train.bin: record 1 has coarse label 20, outside the 20 classes of CIFAR-100, coarse "
                           "labels");
    test_remove_tmpdir(tmpdir);

    /* a huge file is refused by its size, before anything is read */
    make_tmpdir();
    snprintf(path, sizeof path, "%s/train.bin", tmpdir);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    fclose(f);
    CU_ASSERT_FATAL(truncate(path, (off_t)7 << 30) == 0); /* sparse: no disk used */
    expect_bad(1, &fine, "train.bin: 7516192768 bytes, more than the 6 GiB this loader takes from one CIFAR file");
    test_remove_tmpdir(tmpdir);
}

/* The parser on its own, as the fuzzer drives it: what it appends, and a
 * failure that leaves what the set held. */
static void test_parse(void)
{
    enum { RECORD = 2 + DDP_CIFAR_PIXELS };
    static uint8_t bytes[3 * RECORD];
    for (int r = 0; r < 3; r++) {
        bytes[r * RECORD] = (uint8_t)(r + 1);      /* coarse */
        bytes[r * RECORD + 1] = (uint8_t)(r + 50); /* fine */
        bytes[r * RECORD + 2] = (uint8_t)r;        /* the first pixel */
    }
    DdpDataSet set = {0};
    CU_ASSERT_EQUAL_FATAL(ddp_cifar_parse(bytes, 2 * RECORD, 1, 0, "a", &set), DDP_OK);
    CU_ASSERT_EQUAL_FATAL(ddp_cifar_parse(bytes + 2 * RECORD, RECORD, 1, 0, "b", &set), DDP_OK);
    CU_ASSERT_EQUAL(set.n, 3);
    CU_ASSERT_EQUAL(set.labels[2], 52);
    CU_ASSERT_EQUAL(set.pixels[2 * DDP_CIFAR_PIXELS], 2);
    CU_ASSERT_EQUAL(set.num_classes, 53);
    bytes[1] = 200;
    CU_ASSERT_EQUAL(ddp_cifar_parse(bytes, RECORD, 1, 0, "c", &set), DDP_BAD_INPUT);
    CU_ASSERT_EQUAL(ddp_cifar_parse(bytes, RECORD - 1, 1, 0, "d", &set), DDP_BAD_INPUT);
    CU_ASSERT_EQUAL(set.n, 3);
    CU_ASSERT_EQUAL(set.labels[2], 52);
    ddp_data_free(&set);
}

void suite_cifar(void)
{
    static const TestCase cases[] = {
        {"CIFAR-10: batches as far as they go, in the archive's folder or not; a gap refused", test_cifar10},
        {"CIFAR-100: fine and coarse labels", test_cifar100},
        {"CIFAR's files are read before NumPy's and IDX's in the same directory", test_cifar_first},
        {"missing, cut, empty, huge files and labels outside the classes", test_wrong_files},
        {"the parser appends, and a failure leaves the set as it was", test_parse},
        {NULL, NULL},
    };
    test_add_suite("cifar", cases);
}
