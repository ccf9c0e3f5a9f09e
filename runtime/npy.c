/*
 * npy.c: NumPy's .npy files (npy.h), read whole at start-up, checked, and
 * turned into a DdpDataSet.
 *
 * The format (numpy.lib.format): the magic "\x93NUMPY", a major and a minor
 * version byte, the header's length (2 bytes little-endian in version 1, 4
 * in versions 2 and 3), then the header: a Python dict literal such as
 * {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), },
 * padded with spaces to a multiple of 64 bytes; the data follow. Only what
 * np.save writes for a plain array is taken: a descr of one type code, C
 * order, and exactly the data the shape announces. Every number is checked
 * before it sizes anything, so a hostile header costs nothing.
 */
#include "npy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[] = "\x93NUMPY";
enum { MAGIC_LEN = 6 };

/* P past any spaces within [P, END). */
static const char *skip_spaces(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n'))
        p++;
    return p;
}

/* The value after KEY ('descr', quotes included) in the header [TEXT,
 * END), or NULL; *TWICE says whether KEY is a key again further on (Python's
 * dict, and so NumPy, would take the last). Quoted strings are stepped over
 * whole, so text inside a value ("'fortran_order': False" as a string) is
 * never taken for a key. */
static const char *value_of(const char *text, const char *end, const char *key, int *twice)
{
    const size_t klen = strlen(key);
    const char *found = NULL;
    *twice = 0;
    for (const char *p = text; p < end; p++) {
        if (*p != '\'' && *p != '"')
            continue;
        const char *close = memchr(p + 1, *p, (size_t)(end - p - 1));
        if (!close)
            break;
        if ((size_t)(close + 1 - p) == klen && memcmp(p, key, klen) == 0) {
            const char *v = skip_spaces(close + 1, end);
            if (v < end && *v == ':') {
                if (found) {
                    *twice = 1;
                    break;
                }
                found = skip_spaces(v + 1, end);
            }
        }
        p = close;
    }
    return found;
}

/* The value of KEY in the header [TEXT, END) as value_of finds it, in
 * *VALUE; a key given twice is refused, as the file could be read two ways. */
static DdpStatus header_value(const char *text, const char *end, const char *key, const char *path,
                              const char **value)
{
    int twice;
    *value = value_of(text, end, key, &twice);
    if (twice)
        return DDP_ERR(DDP_BAD_INPUT, "%s: the .npy header gives %s twice", path, key);
    return DDP_OK;
}

DdpStatus ddp_npy_header(const uint8_t *bytes, size_t len, const char *path, DdpNpyHeader *h)
{
    memset(h, 0, sizeof *h);
    if (len == 0 || memcmp(bytes, MAGIC, len < MAGIC_LEN ? len : MAGIC_LEN) != 0)
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a NumPy .npy file (it does not start with \\x93NUMPY)", path);
    if (len < 10)
        return DDP_ERR(DDP_BAD_INPUT, "%s: truncated: the .npy header does not fit in its %zu bytes", path, len);
    int major = bytes[6];
    if (major < 1 || major > 3)
        return DDP_ERR(DDP_BAD_INPUT, "%s: .npy format version %d.%d, where 1.0 to 3.0 are known", path, major,
                       bytes[7]);
    size_t at = major == 1 ? 10 : 12;
    if (len < at)
        return DDP_ERR(DDP_BAD_INPUT, "%s: truncated: the .npy header does not fit in its %zu bytes", path, len);
    uint64_t header_len = major == 1 ? (uint64_t)bytes[8] | (uint64_t)bytes[9] << 8
                                     : (uint64_t)bytes[8] | (uint64_t)bytes[9] << 8 | (uint64_t)bytes[10] << 16 |
                                           (uint64_t)bytes[11] << 24;
    if (header_len > len - at)
        return DDP_ERR(DDP_BAD_INPUT, "%s: truncated: the .npy header says it takes %llu bytes, the file holds %zu",
                       path, (unsigned long long)header_len, len - at);
    const char *text = (const char *)bytes + at, *end = text + header_len;
    h->data_at = at + (size_t)header_len;

    /* 'descr': '<f4' */
    /* parsed by hand: the header is not a C string, so no sscanf or strtol */
    const char *descr;
    DDP_CHECK(header_value(text, end, "'descr'", path, &descr));
    char order = 0, kind = 0;
    int item = 0;
    const char *q = NULL;
    if (descr && end - descr >= 5 && descr[0] == '\'') {
        /* the byte order may be left out ('u1', as np.dtype takes it): the
         * machine's own, which NumPy reads as '=' */
        const int ordered = descr[1] && strchr("<>|=", descr[1]);
        q = descr + 2 + ordered;
        order = ordered ? descr[1] : '=';
        kind = descr[1 + ordered];
        for (; q < end && *q >= '0' && *q <= '9' && item <= 16; q++)
            item = item * 10 + (*q - '0');
    }
    if (!q || q >= end || *q != '\'' || item < 1 || item > 16 ||
        !order || !strchr("<>|=", order) || !kind || !strchr("biuf", kind))
        return DDP_ERR(DDP_BAD_INPUT, "%s: the .npy header has no plain type ('descr' such as '<f4' or '|u1')", path);
    if (order == '>' && item > 1)
        return DDP_ERR(DDP_BAD_INPUT, "%s: big-endian data ('%c%c%d'): save it little-endian (arr.astype('<%c%d'))",
                       path, order, kind, item, kind, item);
    h->kind = kind;
    h->item_bytes = item;

    /* 'fortran_order': False */
    const char *fortran;
    DDP_CHECK(header_value(text, end, "'fortran_order'", path, &fortran));
    const int is_false = fortran && end - fortran >= 5 && memcmp(fortran, "False", 5) == 0;
    const int is_true = fortran && end - fortran >= 4 && memcmp(fortran, "True", 4) == 0;
    if (!is_false && !is_true)
        return DDP_ERR(DDP_BAD_INPUT, "%s: the .npy header has no 'fortran_order'", path);
    if (is_true)
        return DDP_ERR(DDP_BAD_INPUT, "%s: the array is in Fortran order: save it in C order "
                       "(np.save(path, np.ascontiguousarray(arr)))", path);

    /* 'shape': (60000, 28, 28) */
    const char *p;
    DDP_CHECK(header_value(text, end, "'shape'", path, &p));
    if (!p || p >= end || *p != '(')
        return DDP_ERR(DDP_BAD_INPUT, "%s: the .npy header has no 'shape'", path);
    p++;
    h->count = 1;
    for (;;) {
        p = skip_spaces(p, end);
        if (p < end && *p == ')')
            break;
        if (p >= end || *p < '0' || *p > '9' || h->dims == DDP_NPY_MAX_DIMS)
            return DDP_ERR(DDP_BAD_INPUT, "%s: the .npy header's shape is not a tuple of at most %d sizes", path,
                           DDP_NPY_MAX_DIMS);
        uint64_t size = 0;
        for (; p < end && *p >= '0' && *p <= '9'; p++) {
            if (size > (UINT64_MAX - 9) / 10)
                return DDP_ERR(DDP_BAD_INPUT, "%s: the .npy header's shape is impossibly large", path);
            size = size * 10 + (uint64_t)(*p - '0');
        }
        if (size != 0 && h->count > UINT64_MAX / size)
            return DDP_ERR(DDP_BAD_INPUT, "%s: the .npy header's shape is impossibly large", path);
        h->shape[h->dims++] = size;
        h->count *= size;
        p = skip_spaces(p, end);
        if (p < end && *p == ',')
            p++;
        else if (p < end && *p != ')')
            return DDP_ERR(DDP_BAD_INPUT, "%s: the .npy header's shape is not a tuple of at most %d sizes", path,
                           DDP_NPY_MAX_DIMS);
    }
    const uint64_t held = len - h->data_at;
    const int short_of_it = h->count > held / (uint64_t)item;
    if (short_of_it || h->count * (uint64_t)item != held)
        return DDP_ERR(DDP_BAD_INPUT, "%s: %s: the header's shape announces %llu items of %d bytes, the file "
                       "holds %llu bytes of data", path, short_of_it ? "truncated" : "trailing data",
                       (unsigned long long)h->count, item, (unsigned long long)held);
    return DDP_OK;
}

/* "(60000, 28, 28)" */
static void shape_text(const DdpNpyHeader *h, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "(");
    for (int d = 0; d < h->dims && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, "%s%llu", d ? ", " : "", (unsigned long long)h->shape[d]);
    if (used < len)
        snprintf(buf + used, len - used, "%s)", h->dims == 1 ? "," : ""); /* as Python writes a tuple */
}

DdpStatus ddp_npy_images(const uint8_t *bytes, size_t len, const char *path, char layout, DdpDataSet *set)
{
    DdpNpyHeader h;
    DDP_CHECK(ddp_npy_header(bytes, len, path, &h));
    char shape[160];
    shape_text(&h, shape, sizeof shape);
    int is_u8 = h.kind == 'u' && h.item_bytes == 1, is_f32 = h.kind == 'f' && h.item_bytes == 4;
    if (!is_u8 && !is_f32)
        return DDP_ERR(DDP_BAD_INPUT, "%s: images of type '%c%d', where uint8 ('|u1') or float32 ('<f4') are read",
                       path, h.kind, h.item_bytes);
    if (h.dims < 2 || h.dims > 4)
        return DDP_ERR(DDP_BAD_INPUT, "%s: images of shape %s, where N x F (features), N x H x W, N x C x H x W or "
                       "N x H x W x C are read", path, shape);
    for (int d = 0; d < h.dims; d++)
        if (h.shape[d] == 0 || h.shape[d] > INT32_MAX)
            return DDP_ERR(DDP_BAD_INPUT, "%s: images of shape %s: %s", path, shape,
                           h.shape[d] == 0 ? "no data" : "a size over 2^31");
    if (h.dims == 4 && !layout) {
        /* channels are 1, 3 or 4 (grey, RGB, RGBA) */
        int first = h.shape[1] == 1 || h.shape[1] == 3 || h.shape[1] == 4;
        int last = h.shape[3] == 1 || h.shape[3] == 3 || h.shape[3] == 4;
        if (first == last)
            return DDP_ERR(DDP_BAD_INPUT, "%s: images of shape %s: say whether channels come first (N x C x H x W: "
                           "--channels-first) or last (N x H x W x C: --channels-last)", path, shape);
        layout = first ? 'f' : 'l';
    }
    const int channels_last = h.dims == 4 && layout == 'l';
    const uint64_t n = h.shape[0];
    /* N x F: F features a sample, held as one row of them (1 x 1 x F), as a
     * flat input takes it */
    const uint64_t c = h.dims <= 3 ? 1 : channels_last ? h.shape[3] : h.shape[1];
    const uint64_t rows = h.dims == 2 ? 1 : h.dims == 3 ? h.shape[1] : channels_last ? h.shape[1] : h.shape[2];
    const uint64_t cols = h.dims == 2 ? h.shape[1] : h.dims == 3 ? h.shape[2] : channels_last ? h.shape[2] : h.shape[3];
    if (c * rows * cols > INT32_MAX)
        return DDP_ERR(DDP_BAD_INPUT, "%s: images of shape %s are too large", path, shape);
    const size_t sample = (size_t)(c * rows * cols), hw = (size_t)(rows * cols);
    const uint8_t *data = bytes + h.data_at;
    void *store = malloc((size_t)h.count * (is_f32 ? sizeof(float) : 1));
    if (!store)
        return DDP_ERR(DDP_FAIL, "%s: out of memory for %llu values", path, (unsigned long long)h.count);
    for (size_t i = 0; i < (size_t)n; i++)
        for (size_t ch = 0; ch < (size_t)c; ch++)
            for (size_t q = 0; q < hw; q++) {
                /* channels first in memory, whatever the file's order */
                size_t from = i * sample + (channels_last ? q * (size_t)c + ch : ch * hw + q);
                size_t to = i * sample + ch * hw + q;
                if (is_f32) {
                    float v;
                    memcpy(&v, data + from * sizeof v, sizeof v);
                    if (!isfinite(v)) {
                        free(store);
                        return DDP_ERR(DDP_BAD_INPUT, "%s: image %zu holds %s", path, i,
                                       isnan(v) ? "a NaN" : "an infinity");
                    }
                    ((float *)store)[to] = v;
                } else {
                    ((uint8_t *)store)[to] = data[from];
                }
            }
    if (is_f32)
        set->values = store;
    else
        set->pixels = store;
    set->n = (int64_t)n;
    set->channels = (int)c;
    set->rows = (int)rows;
    set->cols = (int)cols;
    set->format = is_f32 ? "NumPy float32" : "NumPy uint8";
    return DDP_OK;
}

DdpStatus ddp_npy_labels(const uint8_t *bytes, size_t len, const char *path, DdpDataSet *set)
{
    DdpNpyHeader h;
    DDP_CHECK(ddp_npy_header(bytes, len, path, &h));
    char shape[160];
    shape_text(&h, shape, sizeof shape);
    if ((h.kind != 'u' && h.kind != 'i') || (h.item_bytes != 1 && h.item_bytes != 2 && h.item_bytes != 4 &&
                                             h.item_bytes != 8))
        return DDP_ERR(DDP_BAD_INPUT, "%s: labels of type '%c%d', where integers are read", path, h.kind,
                       h.item_bytes);
    /* (N,) or, as Keras's data sets give them, (N, 1) */
    if ((h.dims != 1 && !(h.dims == 2 && h.shape[1] == 1)) || (int64_t)h.shape[0] != set->n)
        return DDP_ERR(DDP_BAD_INPUT, "%s: labels of shape %s, but the images are %lld: one label per image", path,
                       shape, (long long)set->n);
    int32_t *labels = malloc(((size_t)h.count + 1) * sizeof *labels);
    if (!labels)
        return DDP_ERR(DDP_FAIL, "%s: out of memory", path);
    const uint8_t *data = bytes + h.data_at;
    int most = 0;
    for (size_t i = 0; i < (size_t)h.count; i++) {
        /* little-endian, sign-extended for signed types */
        uint64_t u = 0;
        for (int b = h.item_bytes - 1; b >= 0; b--)
            u = u << 8 | data[i * (size_t)h.item_bytes + (size_t)b];
        const int bits = 8 * h.item_bytes;
        const int negative = h.kind == 'i' && (u >> (bits - 1)) & 1;
        if (negative || u > DDP_DATA_MOST_LABEL) {
            char value[32];
            if (negative) /* two's complement, sign-extended */
                snprintf(value, sizeof value, "%lld",
                         (long long)(bits == 64 ? u : u | ~(((uint64_t)1 << bits) - 1)));
            else
                snprintf(value, sizeof value, "%llu", (unsigned long long)u);
            free(labels);
            return DDP_ERR(DDP_BAD_INPUT, "%s: label %zu is %s, where labels are 0 to %d", path, i, value,
                           DDP_DATA_MOST_LABEL);
        }
        labels[i] = (int32_t)u;
        most = labels[i] > most ? labels[i] : most;
    }
    set->labels = labels;
    set->num_classes = most + 1;
    return DDP_OK;
}

int ddp_npy_find(const char *dir, char *note, size_t len)
{
    snprintf(note, len, "%s", "");
    char *path = ddp_data_path(dir, "", "x_train.npy");
    int found = path && ddp_data_is_file(path);
    if (!found && path)
        ddp_data_not_a_file(path, note, len);
    free(path);
    return found;
}

/* DIR/NAME, read whole into *BYTES (*LEN), and its path in *PATH. A missing
 * file is named with the one found (x_train.npy, which ddp_npy_find saw). */
static DdpStatus read_array(const char *dir, const char *name, char **path, uint8_t **bytes, size_t *len)
{
    *bytes = NULL;
    if (!(*path = ddp_data_path(dir, "", name)))
        return DDP_ERR(DDP_FAIL, "out of memory");
    if (!ddp_data_is_file(*path) && strcmp(name, "x_train.npy") != 0) {
        char note[4200];
        ddp_data_not_a_file(*path, note, sizeof note);
        return DDP_ERR(DDP_BAD_INPUT, "%s: found x_train.npy but no %s beside it%s", dir, name, note);
    }
    return ddp_data_read_file(*path, DDP_NPY_MAX_BYTES, "one .npy file", bytes, len);
}

DdpStatus ddp_npy_load(const char *dir, int train, const DdpDataOptions *options, DdpDataSet *out)
{
    memset(out, 0, sizeof *out);
    char layout = options->channels_first ? 'f' : options->channels_last ? 'l' : 0;
    uint8_t *bytes = NULL;
    size_t len = 0;
    DdpStatus status = read_array(dir, train ? "x_train.npy" : "x_test.npy", &out->images_path, &bytes, &len);
    if (status == DDP_OK)
        status = ddp_npy_images(bytes, len, out->images_path, layout, out);
    free(bytes);
    bytes = NULL;
    if (status == DDP_OK)
        status = read_array(dir, train ? "y_train.npy" : "y_test.npy", &out->labels_path, &bytes, &len);
    if (status == DDP_OK)
        status = ddp_npy_labels(bytes, len, out->labels_path, out);
    free(bytes);
    if (status != DDP_OK)
        ddp_data_free(out);
    return status;
}
