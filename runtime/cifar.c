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

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The most one file may hold: 40 times CIFAR-10's training set. */
#define DDP_CIFAR_MAX_BYTES ((uint64_t)6 << 30)

static const char *const FOLDERS[] = {"", "/cifar-10-batches-bin", "/cifar-100-binary"};

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* DIR/SUB/NAME, or NULL when out of memory. */
static char *join(const char *dir, const char *sub, const char *name)
{
    int len = (int)strlen(dir);
    while (len > 1 && dir[len - 1] == '/')
        len--;
    char *path = NULL;
    if (asprintf(&path, "%.*s%s%s%s", len, dir, sub, name[0] ? "/" : "", name) < 0)
        return NULL;
    return path;
}

int ddp_cifar_find(const char *dir, DdpCifarFiles *files)
{
    memset(files, 0, sizeof *files);
    for (size_t i = 0; i < sizeof FOLDERS / sizeof FOLDERS[0]; i++)
        for (int hundred = 0; hundred < 2; hundred++) {
            char *path = join(dir, FOLDERS[i], hundred ? "train.bin" : "data_batch_1.bin");
            int found = path && is_file(path);
            free(path);
            if (found) {
                files->dir = join(dir, FOLDERS[i], "");
                files->hundred = hundred;
                return files->dir != NULL;
            }
        }
    return 0;
}

/* The record's length and label count of a format. */
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
            return DDP_ERR(DDP_BAD_INPUT, "%s: record %zu has %s label %d, outside %s's %d classes (0..%d): not a "
                           "CIFAR file, or a damaged one", path, r, hundred ? (coarse ? "coarse" : "fine") : "the",
                           label, format_name(hundred, coarse), classes, classes - 1);
    }
    const size_t total = (size_t)set->n + n;
    uint8_t *pixels = realloc(set->pixels, total * DDP_CIFAR_PIXELS);
    if (!pixels)
        return DDP_ERR(DDP_FAIL, "%s: out of memory for %zu samples", path, total);
    set->pixels = pixels;
    uint8_t *labels = realloc(set->labels, total);
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
    FILE *f = fopen(path, "rb");
    if (!f)
        return DDP_ERR(DDP_BAD_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    DdpStatus status = DDP_OK;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        status = DDP_ERR(DDP_BAD_INPUT, "%s: not a regular file", path);
    else if ((uint64_t)st.st_size > DDP_CIFAR_MAX_BYTES)
        status = DDP_ERR(DDP_BAD_INPUT, "%s: %llu bytes, more than the %llu GiB this loader takes from one CIFAR "
                         "file", path, (unsigned long long)st.st_size,
                         (unsigned long long)(DDP_CIFAR_MAX_BYTES >> 30));
    uint8_t *bytes = NULL;
    size_t len = status == DDP_OK ? (size_t)st.st_size : 0;
    if (status == DDP_OK && !(bytes = malloc(len ? len : 1)))
        status = DDP_ERR(DDP_FAIL, "%s: out of memory for %zu bytes", path, len);
    if (status == DDP_OK && fread(bytes, 1, len, f) != len)
        status = DDP_ERR(DDP_BAD_INPUT, "%s: read error: %s", path, ferror(f) ? strerror(errno) : "the file shrank");
    fclose(f);
    if (status == DDP_OK)
        status = ddp_cifar_parse(bytes, len, hundred, coarse, path, set);
    free(bytes);
    return status;
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
    int read = 0;
    for (int k = 1; status == DDP_OK; k++) {
        char name[32];
        if (batches)
            snprintf(name, sizeof name, "data_batch_%d.bin", k);
        else
            snprintf(name, sizeof name, "%s", files->hundred ? (train ? "train.bin" : "test.bin") : "test_batch.bin");
        char *path = join(files->dir, "", name);
        if (!path) {
            status = DDP_ERR(DDP_FAIL, "out of memory");
        } else if (!is_file(path)) {
            if (read == 0) /* ddp_cifar_find saw the first training file, so this is a test file */
                status = DDP_ERR(DDP_BAD_INPUT, "%s: found %s but no %s beside it", files->dir,
                                 files->hundred ? "CIFAR-100's train.bin" : "CIFAR-10's data_batch_1.bin", name);
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
