/*
 * fuzz_idx.c: libFuzzer harness for MNIST-format (IDX) files, raw or
 * gzipped (runtime/idx.c): what --data reads by default, from whatever
 * directory it names.
 *
 * The input is a control byte, a split byte, then an images file and a
 * labels file (the split byte says where the first ends). The harness
 * writes them as DIR/train-images-idx3-ubyte and train-labels-idx1-ubyte,
 * as given or, by the control byte, each gzipped by zlib, whole or cut
 * short, and loads DIR as --data does (ddp_idx_load). The loader finds a
 * gzip stream by its first bytes, not by the name, so the fuzzer's own
 * bytes can be broken gzip too.
 *
 * Beyond "no crash, no sanitizer report" it checks the loader against an
 * oracle written from the format alone: a set loads exactly when the
 * images file is magic 0x803 (N x H x W) or 0x804 (N x C x H x W), no
 * dimension 0, its data exactly what the header announces, and the labels
 * file is magic 0x801 with one label per image and nothing more, each
 * stream whole; the set then holds those pixels and labels, and its class
 * count is the largest label + 1. A failure leaves the set empty. Built
 * with ASan and UBSan (make fuzz):
 *
 *   mkdir -p build/fuzz-idx-corpus && build/fuzz_idx -max_total_time=600 build/fuzz-idx-corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>  // the gzipped forms

#include "fuzz_check.h"  // CHECK
#include "idx.h"         // ddp_idx_load

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* How the harness writes one file (two bits of the control byte). */
enum { AS_GIVEN, GZIPPED, GZIP_CUT_SHORT };

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The oracle: whether BYTES (LEN) is an IDX file of unsigned bytes whose
 * magic is 0x00000800 + ONE of MIN..MAX dimensions, none 0, whose data
 * is exactly what the header announces; its dimensions then in DIMS and
 * their count in *NDIMS. */
static int well_formed(const uint8_t *bytes, size_t len, int min, int max, uint32_t *dims, int *ndims)
{
    if (len < 4 || be32(bytes) >> 8 != 0x8)
        return 0;
    int n = bytes[3];
    if (n < min || n > max || len < 4 + 4 * (size_t)n)
        return 0;
    unsigned __int128 announced = 1; /* four 32-bit sizes cannot overflow it */
    for (int d = 0; d < n; d++) {
        dims[d] = be32(bytes + 4 + 4 * d);
        announced *= dims[d];
    }
    *ndims = n;
    return announced != 0 && announced == len - (4 + 4 * (size_t)n);
}

/* Writes BYTES (LEN) to PATH as HOW says; false if it could not. */
static int write_file(const char *path, const uint8_t *bytes, size_t len, int how)
{
    if (how == AS_GIVEN) {
        FILE *f = fopen(path, "wb");
        int ok = f && fwrite(bytes, 1, len, f) == len;
        return (f ? fclose(f) == 0 : 0) && ok;
    }
    /* zlib's gzip wrapper (window bits 15 + 16), written in memory first so
     * that the cut can take the stream's last bytes: its checksum and length */
    z_stream z = {0};
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return 0;
    uLong cap = deflateBound(&z, (uLong)len);
    uint8_t *out = malloc(cap);
    z.next_in = (Bytef *)bytes;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int done = out && deflate(&z, Z_FINISH) == Z_STREAM_END;
    size_t written = z.total_out;
    deflateEnd(&z);
    if (how == GZIP_CUT_SHORT) /* 1 to 16 bytes: into its 8-byte trailer, or into the data */
        written -= 1 + written / 3 % 16;
    int ok = done && write_file(path, out, written, AS_GIVEN);
    free(out);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64], images_path[128], labels_path[128];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_idx.XXXXXX");
        CHECK(mkdtemp(dir) != NULL);
        snprintf(images_path, sizeof images_path, "%s/train-images-idx3-ubyte", dir);
        snprintf(labels_path, sizeof labels_path, "%s/train-labels-idx1-ubyte", dir);
    }
    if (size < 2)
        return 0;
    const int images_how = data[0] % 3, labels_how = data[0] / 3 % 3;
    const uint8_t *file = data + 2;
    const size_t len = size - 2, split = len * data[1] / 255;
    const uint8_t *images = file, *labels = file + split;
    const size_t images_len = split, labels_len = len - split;
    if (!write_file(images_path, images, images_len, images_how) ||
        !write_file(labels_path, labels, labels_len, labels_how))
        return 0;

    uint32_t dims[4] = {0}, labels_dims[1] = {0};
    int ndims = 0, labels_ndims = 0;
    const int images_ok = images_how != GZIP_CUT_SHORT && well_formed(images, images_len, 3, 4, dims, &ndims);
    const int loads = images_ok && labels_how != GZIP_CUT_SHORT &&
                      well_formed(labels, labels_len, 1, 1, labels_dims, &labels_ndims) && labels_dims[0] == dims[0];

    DdpDataSet set;
    const DdpStatus st = ddp_idx_load(dir, 1, "", &set);
    /* A file of the fuzzer's own bytes may happen to be gzip: the oracle
     * does not decompress, so such inputs are checked for safety alone. */
    const int own_gzip = (images_how == AS_GIVEN && images_len >= 2 && images[0] == 0x1f && images[1] == 0x8b) ||
                         (labels_how == AS_GIVEN && labels_len >= 2 && labels[0] == 0x1f && labels[1] == 0x8b);
    if (st != DDP_OK) {
        CHECK(own_gzip || !loads);
        CHECK(!set.pixels && !set.labels && !set.images_path && !set.labels_path && set.n == 0);
        return 0;
    }
    CHECK(own_gzip || loads);
    if (!own_gzip) {
        const uint32_t channels = ndims == 4 ? dims[1] : 1;
        CHECK(set.n == dims[0] && set.channels == (int)channels && set.rows == (int)dims[ndims - 2] &&
              set.cols == (int)dims[ndims - 1]);
        CHECK(memcmp(set.pixels, images + 4 + 4 * ndims, images_len - (4 + 4 * (size_t)ndims)) == 0);
        int largest = 0;
        for (uint32_t i = 0; i < dims[0]; i++) {
            CHECK(set.labels[i] == labels[8 + i]);
            largest = labels[8 + i] > largest ? labels[8 + i] : largest;
        }
        CHECK(set.num_classes == largest + 1);
    }
    CHECK(set.n > 0 && set.pixels && set.labels && set.channels > 0 && set.rows > 0 && set.cols > 0);
    for (int64_t i = 0; i < set.n; i++)
        CHECK(set.labels[i] >= 0 && set.labels[i] < set.num_classes);
    ddp_data_free(&set);
    return 0;
}
