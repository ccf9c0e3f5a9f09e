/*
 * cifar.c: CIFAR's binary files (cifar.h), read whole at start-up as idx.c
 * reads IDX: the training set is 150 MB of bytes, and a batch's floats are
 * made from them as it is gathered.
 *
 * A file is checked before it is trusted: its size, from fstat, must be
 * whole records and at most DDP_CIFAR_MAX_BYTES (so that a device file or a
 * huge sparse file is refused, not read), and every label must name one of
 * the format's classes.
 */
#include "cifar.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most one file may hold: 40 times CIFAR-10's training set. */
#define DDP_CIFAR_MAX_BYTES ((uint64_t)6 << 30)

static const char *const FOLDERS[] = {"", "/cifar-10-batches-bin", "/cifar-100-binary"};

int ddp_cifar_find(const char *dir, DdpCifarFiles *files, char *note, size_t len)
{
    memset(files, 0, sizeof *files);
    snprintf(note, len, "%s", "");
    for (size_t i = 0; i < sizeof FOLDERS / sizeof FOLDERS[0]; i++)
        for (int hundred = 0; hundred < 2; hundred++) {
            char *path = ddp_data_path(dir, FOLDERS[i], hundred ? "train.bin" : "data_batch_1.bin");
            int found = path && ddp_data_is_file(path);
            if (!found && path && !note[0])
                ddp_data_not_a_file(path, note, len);
            free(path);
            if (found) {
                files->dir = ddp_data_path(dir, FOLDERS[i], "");
                files->hundred = hundred;
                return files->dir != NULL;
            }
        }
    return 0;
}

/* The length of a format's records. */
static size_t record_bytes(int hundred)
{
    return (size_t)(hundred ? 2 : 1) + DDP_CIFAR_PIXELS;
}

static const char *format_name(int hundred, int coarse)
{
    return !hundred ? "CIFAR-10" : coarse ? "CIFAR-100, coarse labels" : "CIFAR-100, fine labels";
}

DdpStatus ddp_cifar_parse(const uint8_t *bytes, size_t len, int hundred, int coarse, const char *path,
                          DdpDataSet *set)
{
    const size_t record = record_bytes(hundred);
    const int classes = !hundred ? 10 : coarse ? 20 : 100;
    if (len == 0 || len % record != 0)
        return DDP_ERR(DDP_BAD_INPUT, "%s: %zu bytes are not whole %s records (%zu bytes each: %s, then 3x32x32 "
                       "pixels)", path, len, hundred ? "CIFAR-100" : "CIFAR-10", record,
                       hundred ? "a coarse and a fine label" : "a label");
    const size_t n = len / record;
    for (size_t r = 0; r < n; r++) {
        int label = bytes[r * record + (hundred && !coarse ? 1 : 0)];
        if (label >= classes)
            return DDP_ERR(DDP_BAD_INPUT, "%s: record %zu has %s label %d, outside the %d classes of %s (0..%d): not "
                           "a CIFAR file, or a damaged one", path, r, hundred ? (coarse ? "coarse" : "fine") : "the",
                           label, classes, format_name(hundred, coarse), classes - 1);
    }
    const size_t total = (size_t)set->n + n;
    uint8_t *pixels = realloc(set->pixels, total * DDP_CIFAR_PIXELS);
    if (!pixels)
        return DDP_ERR(DDP_FAIL, "%s: out of memory for %zu samples", path, total);
    set->pixels = pixels;
    int32_t *labels = realloc(set->labels, total * sizeof *labels);
    if (!labels)
        return DDP_ERR(DDP_FAIL, "%s: out of memory for %zu samples", path, total);
    set->labels = labels;
    for (size_t r = 0; r < n; r++) {
        const uint8_t *rec = bytes + r * record;
        uint8_t label = rec[hundred && !coarse ? 1 : 0];
        labels[set->n + (int64_t)r] = label;
        if (label + 1 > set->num_classes)
            set->num_classes = label + 1;
        memcpy(pixels + ((size_t)set->n + r) * DDP_CIFAR_PIXELS, rec + record - DDP_CIFAR_PIXELS, DDP_CIFAR_PIXELS);
    }
    set->n = (int64_t)total;
    set->channels = DDP_CIFAR_CHANNELS;
    set->rows = set->cols = DDP_CIFAR_SIDE;
    set->format = format_name(hundred, coarse);
    return DDP_OK;
}

/* Reads the file PATH whole and appends its records to SET. */
static DdpStatus load_file(const char *path, int hundred, int coarse, DdpDataSet *set)
{
    uint8_t *bytes;
    size_t len;
    DDP_CHECK(ddp_data_read_file(path, DDP_CIFAR_MAX_BYTES, "one CIFAR file", &bytes, &len));
    DdpStatus status = ddp_cifar_parse(bytes, len, hundred, coarse, path, set);
    free(bytes);
    return status;
}

/* The highest K of DIR's data_batch_K.bin files (0: none), so that a gap in
 * them is refused rather than training on part of the set. */
static int last_batch(const char *dir)
{
    int last = 0;
    DIR *d = opendir(dir);
    static const char prefix[] = "data_batch_";
    for (struct dirent *e; d && (e = readdir(d));) {
        /* data_batch_K.bin exactly: K digits, as the archive names them */
        const char *digits = e->d_name + sizeof prefix - 1;
        if (strncmp(e->d_name, prefix, sizeof prefix - 1) != 0 || *digits < '1' || *digits > '9')
            continue;
        char *rest = NULL;
        long k = strtol(digits, &rest, 10);
        if (strcmp(rest, ".bin") == 0 && k > last && k < 1000000)
            last = (int)k;
    }
    if (d)
        closedir(d);
    return last;
}

DdpStatus ddp_cifar_load(DdpCifarFiles *files, int train, int coarse, DdpDataSet *out)
{
    memset(out, 0, sizeof *out);
    DdpStatus status = DDP_OK;
    if (coarse && !files->hundred)
        status = DDP_ERR(DDP_BAD_INPUT, "--coarse-labels picks CIFAR-100's 20 superclasses, but %s holds CIFAR-10, "
                         "which has one label per image", files->dir);
    /* CIFAR-100's one file; CIFAR-10's test batch, or its training batches
     * from 1 on, as far as they go (the archive has 5) */
    const int batches = !files->hundred && train;
    const int last = batches ? last_batch(files->dir) : 0;
    int read = 0;
    for (int k = 1; status == DDP_OK; k++) {
        char name[32];
        if (batches)
            snprintf(name, sizeof name, "data_batch_%d.bin", k);
        else
            snprintf(name, sizeof name, "%s", files->hundred ? (train ? "train.bin" : "test.bin") : "test_batch.bin");
        char *path = ddp_data_path(files->dir, "", name);
        if (!path) {
            status = DDP_ERR(DDP_FAIL, "out of memory");
        } else if (!ddp_data_is_file(path)) {
            char note[4200];
            ddp_data_not_a_file(path, note, sizeof note);
            if (read == 0) /* ddp_cifar_find saw the first training file, so this is a test file */
                status = DDP_ERR(DDP_BAD_INPUT, "%s: found %s but no %s beside it%s", files->dir,
                                 files->hundred ? "CIFAR-100's train.bin" : "CIFAR-10's data_batch_1.bin", name, note);
            else if (last > k)
                status = DDP_ERR(DDP_BAD_INPUT, "%s: %s is missing, but data_batch_%d.bin is there: the training set "
                                 "would be cut short%s", files->dir, name, last, note);
            free(path);
            break;
        } else {
            status = load_file(path, files->hundred, coarse, out);
            read++;
        }
        if (status == DDP_OK && !out->images_path)
            out->images_path = path; /* the first file, for messages */
        else
            free(path);
        if (!batches)
            break;
    }
    if (status == DDP_OK && read > 1) {
        /* "DIR/data_batch_1.bin ... data_batch_5.bin" */
        char *all = NULL;
        if (asprintf(&all, "%s ... data_batch_%d.bin", out->images_path, read) >= 0) {
            free(out->images_path);
            out->images_path = all;
        }
    }
    if (status == DDP_OK && !(out->labels_path = strdup(out->images_path)))
        status = DDP_ERR(DDP_FAIL, "out of memory");
    free(files->dir);
    files->dir = NULL;
    if (status != DDP_OK)
        ddp_data_free(out);
    return status;
}
