/*
 * dataset.c: the format-free part of dataset.h: what the trainer does with
 * the samples once they are in memory (or, for an image folder, once their
 * files are decoded: image_decode.h), and the file helpers the readers share.
 */
#include "dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "augment.h"  // ddp_pixel_to_float
#include "fnv1a.h"    // ddp_fnv1a: the data set's digest

DdpStatus ddp_data_check_classes(const DdpDataSet *set, int num_classes)
{
    if (set->num_classes <= num_classes)
        return DDP_OK;
    for (int64_t i = 0; i < set->n; i++)
        if (set->labels[i] >= num_classes && set->labels[i] < set->n_class_names) /* an image folder's: by name */
            return DDP_ERR(DDP_BAD_INPUT, "%s: class %d ('%s', of %lld class folders), but the net has %d class%s "
                           "(0..%d)", set->files[i], set->labels[i], set->class_names[set->labels[i]],
                           (long long)set->n_class_names, num_classes, num_classes == 1 ? "" : "es", num_classes - 1);
        else if (set->labels[i] >= num_classes)
            return DDP_ERR(DDP_BAD_INPUT, "%s: sample %lld has label %d, but the net has %d class%s (0..%d)",
                           set->labels_path, (long long)i, set->labels[i], num_classes, num_classes == 1 ? "" : "es",
                           num_classes - 1);
    return DDP_OK;
}

static DdpStatus check_index(const DdpDataSet *set, int64_t k)
{
    if (k < 0 || k >= set->n)
        return DDP_ERR(DDP_FAIL, "internal error: sample index %lld is outside the data set (0..%lld)",
                       (long long)k, (long long)set->n - 1);
    return DDP_OK;
}

/* Sample K of SET into DST as stored: ddp_data_raw_bytes of it (an image
 * file decoded). */
static DdpStatus sample_raw(const DdpDataSet *set, int64_t k, void *dst)
{
    size_t values = (size_t)ddp_data_sample_values(set);
    DDP_CHECK(check_index(set, k));
    if (set->files)
        return ddp_image_load_sample(set->files[k], &set->fit, dst);
    if (set->values)
        memcpy(dst, set->values + (size_t)k * values, values * sizeof *set->values);
    else
        memcpy(dst, set->pixels + (size_t)k * values, values);
    return DDP_OK;
}

DdpStatus ddp_data_gather_raw(const DdpDataSet *set, const int64_t *indices, int n, void *samples, int32_t *labels)
{
    size_t bytes = ddp_data_raw_bytes(set);
    for (int i = 0; i < n; i++) {
        DDP_CHECK(sample_raw(set, indices[i], (char *)samples + (size_t)i * bytes));
        labels[i] = set->labels[indices[i]];
    }
    return DDP_OK;
}

DdpStatus ddp_data_gather(const DdpDataSet *set, const int64_t *indices, int n, float *images, int32_t *labels)
{
    if (set->values) /* floats are used as they are */
        return ddp_data_gather_raw(set, indices, n, images, labels);
    float scale[256]; /* a lookup is faster than a division per pixel */
    for (int v = 0; v < 256; v++)
        scale[v] = ddp_pixel_to_float((uint8_t)v);
    size_t values = (size_t)ddp_data_sample_values(set);
    uint8_t *decoded = set->files ? malloc(values) : NULL; /* an image file's sample */
    if (set->files && !decoded)
        return DDP_ERR(DDP_FAIL, "out of memory for a sample of %zu bytes", values);
    DdpStatus status = DDP_OK;
    for (int i = 0; i < n && status == DDP_OK; i++) {
        const uint8_t *pixels = decoded;
        if (set->files)
            status = ddp_data_gather_raw(set, &indices[i], 1, decoded, &labels[i]);
        else if ((status = check_index(set, indices[i])) == DDP_OK) { /* read in place */
            pixels = set->pixels + (size_t)indices[i] * values;
            labels[i] = set->labels[indices[i]];
        }
        float *dst = images + (size_t)i * values;
        for (size_t p = 0; status == DDP_OK && p < values; p++)
            dst[p] = scale[pixels[p]];
    }
    free(decoded);
    return status;
}

uint64_t ddp_data_digest(const DdpDataSet *set)
{
    enum { SAMPLES = 1024 };
    int64_t sizes[5] = {set->n, set->channels, set->rows, set->cols, set->num_classes};
    uint64_t h = ddp_fnv1a(DDP_FNV1A_START, sizes, sizeof sizes);
    size_t bytes = (size_t)ddp_data_sample_values(set);
    int64_t picks = set->n < SAMPLES ? set->n : SAMPLES;
    for (int64_t k = 0; k < picks; k++) {
        /* k-th of PICKS evenly spread samples: 0 first, n-1 last */
        int64_t i = picks > 1 ? (int64_t)((double)k * (double)(set->n - 1) / (double)(picks - 1)) : 0;
        if (set->files) /* the name below the set's folder: ranks may mount it at other paths */
            h = ddp_fnv1a(h, set->files[i] + strlen(set->images_path),
                          strlen(set->files[i]) - strlen(set->images_path));
        else if (set->values)
            h = ddp_fnv1a(h, set->values + (size_t)i * bytes, bytes * sizeof *set->values);
        else
            h = ddp_fnv1a(h, set->pixels + (size_t)i * bytes, bytes);
        h = ddp_fnv1a(h, set->labels + i, sizeof *set->labels);
    }
    return h;
}

void ddp_data_free(DdpDataSet *set)
{
    free(set->pixels);
    free(set->values);
    for (int64_t i = 0; set->files && i < set->n; i++)
        free(set->files[i]);
    free(set->files);
    free(set->labels);
    free(set->images_path);
    free(set->labels_path);
    for (int64_t i = 0; set->class_names && i < set->n_class_names; i++)
        free(set->class_names[i]);
    free(set->class_names);
    memset(set, 0, sizeof *set);
}

char *ddp_data_path(const char *dir, const char *sub, const char *name)
{
    int len = (int)strlen(dir);
    while (len > 1 && dir[len - 1] == '/')
        len--;
    char *path = NULL;
    if (asprintf(&path, "%.*s%s%s%s", len, dir, sub, name[0] ? "/" : "", name) < 0)
        return NULL;
    return path;
}

int ddp_data_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

void ddp_data_not_a_file(const char *path, char *note, size_t len)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode))
        snprintf(note, len, "%s", "");
    else
        snprintf(note, len, "; %s is %s", path, S_ISDIR(st.st_mode) ? "a directory, not a file" : "not a regular file");
}

DdpStatus ddp_data_read_file(const char *path, uint64_t max, const char *what, uint8_t **bytes, size_t *len)
{
    *bytes = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return DDP_ERR(DDP_BAD_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    DdpStatus status = DDP_OK;
    uint8_t *buf = NULL;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        status = DDP_ERR(DDP_BAD_INPUT, "%s: not a regular file", path);
    else if ((uint64_t)st.st_size > max)
        status = DDP_ERR(DDP_BAD_INPUT, "%s: %llu bytes, more than the %llu GiB this loader takes from %s", path,
                         (unsigned long long)st.st_size, (unsigned long long)(max >> 30), what);
    else if (!(buf = malloc((size_t)st.st_size ? (size_t)st.st_size : 1)))
        status = DDP_ERR(DDP_FAIL, "%s: out of memory for %llu bytes", path, (unsigned long long)st.st_size);
    else if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        status = DDP_ERR(DDP_BAD_INPUT, "%s: read error: %s", path, ferror(f) ? strerror(errno) : "the file shrank");
    fclose(f);
    if (status != DDP_OK) {
        free(buf);
        return status;
    }
    *bytes = buf;
    *len = (size_t)st.st_size;
    return DDP_OK;
}
