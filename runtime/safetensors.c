/*
 * safetensors.c: reads and writes safetensors files.
 *
 * The format (github.com/huggingface/safetensors): an 8-byte little-endian
 * length N, N bytes of JSON naming each tensor's dtype, shape and byte range
 * [begin, end) in the data that follows, plus an optional "__metadata__"
 * object of strings. We chose it over a format of our own because users load
 * --export files with safetensors.torch.load_file into the PyTorch module
 * `ddpc --emit torch` writes, and hand us files made by PyTorch for --init.
 *
 * Writing follows the reference implementation so its readers accept the
 * files without question: compact JSON with "__metadata__" first, tensors laid
 * out largest element first and then by name (so every tensor is aligned to its
 * element size), the header padded with spaces to a multiple of 8 bytes. The
 * file goes through dirs.h's DdpOutput: PATH must be a regular file or
 * nothing (a device or a FIFO is never replaced), and it is written to
 * PATH.tmp, synced, and renamed over PATH: a crash during a checkpoint leaves
 * the previous checkpoint, never a torn file.
 *
 * Reading trusts nothing. The header is parsed by the small strict JSON reader
 * of json.c rather than a library (none is available to every generated program):
 * bounded nesting, UTF-8 checked, every length checked against what the file
 * holds before anything is allocated from it. Then, as the reference reader
 * does, the byte ranges must tile the data exactly, in order, without gaps or
 * overlaps, and each must be as long as dtype and shape say. The whole file is
 * read into memory (weights are small next to the training that uses them),
 * the data block in its own allocation so tensors keep their alignment.
 *
 * ddp_safetensors_expect is where a file meets a net: it names the file and
 * the tensor in each complaint, because "wrong shape" alone sends the user
 * hunting through a checkpoint with a hex editor.
 */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirs.h"     // DdpOutput: the checked path, the temporary name and the rename
#include "json.h"     // DdpJson: the header's reader; ddp_json_put_string

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c writes tensors as they lie in memory: it needs a little-endian host"
#endif

/* The reference reader refuses larger headers; so do we. */
#define HEADER_MAX 100000000u

/* Name, element size, and rank in the reference writer's layout order (its
 * Dtype enum order: tensors of higher rank come first). */
static const struct {
    const char *name;
    size_t size;
    int rank;
} dtypes[DDP_DTYPE_COUNT] = {
    [DDP_DTYPE_F32] = {"F32", 4, 11},  [DDP_DTYPE_F64] = {"F64", 8, 12},
    [DDP_DTYPE_F16] = {"F16", 2, 7},   [DDP_DTYPE_BF16] = {"BF16", 2, 8},
    [DDP_DTYPE_I64] = {"I64", 8, 13},  [DDP_DTYPE_I32] = {"I32", 4, 9},
    [DDP_DTYPE_I16] = {"I16", 2, 5},   [DDP_DTYPE_I8] = {"I8", 1, 2},
    [DDP_DTYPE_U8] = {"U8", 1, 1},     [DDP_DTYPE_BOOL] = {"BOOL", 1, 0},
    [DDP_DTYPE_U64] = {"U64", 8, 14},  [DDP_DTYPE_U32] = {"U32", 4, 10},
    [DDP_DTYPE_U16] = {"U16", 2, 6},
};

const char *ddp_dtype_name(DdpDtype dtype)
{
    return (unsigned)dtype < DDP_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

size_t ddp_dtype_size(DdpDtype dtype)
{
    return (unsigned)dtype < DDP_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

/* Element count times element size, or -1 when that exceeds INT64_MAX or a
 * dimension is negative. */
static int64_t tensor_bytes(DdpDtype dtype, const int64_t *shape, int ndim)
{
    int64_t bytes = (int64_t)ddp_dtype_size(dtype);
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return -1;
        if (shape[d] != 0 && bytes > INT64_MAX / shape[d])
            return -1;
        bytes *= shape[d];
    }
    return bytes;
}

/* "[32,1,5,5]" into BUF. */
static const char *shape_text(char *buf, size_t size, const int64_t *shape, int ndim)
{
    size_t at = 0;
    buf[0] = '\0';
    at += (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && at < size; d++)
        at += (size_t)snprintf(buf + at, size - at, "%s%lld", d ? "," : "", (long long)shape[d]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

/* ---- writing ------------------------------------------------------------ */

static int name_order(const void *a, const void *b, void *tensors)
{
    const DdpTensor *t = tensors;
    return strcmp(t[*(const int *)a].name, t[*(const int *)b].name);
}

/* The reference writer's order: higher dtype rank first, then by name. */
static int layout_order(const void *a, const void *b, void *tensors)
{
    const DdpTensor *x = (const DdpTensor *)tensors + *(const int *)a;
    const DdpTensor *y = (const DdpTensor *)tensors + *(const int *)b;
    if (dtypes[x->dtype].rank != dtypes[y->dtype].rank)
        return dtypes[y->dtype].rank - dtypes[x->dtype].rank;
    return strcmp(x->name, y->name);
}

/* Checks what the caller handed us: a malformed tensor is a bug, not bad input. */
static DdpStatus check_tensors(const char *path, const DdpTensor *t, int n, const DdpMeta *meta,
                               int nmeta, int64_t *bytes)
{
    for (int i = 0; i < n; i++) {
        if (!t[i].name || !*t[i].name || strcmp(t[i].name, "__metadata__") == 0)
            return DDP_ERR(DDP_FAIL, "%s: internal error: tensor %d has no usable name", path, i);
        if ((unsigned)t[i].dtype >= DDP_DTYPE_COUNT || t[i].ndim < 0 || t[i].ndim > DDP_TENSOR_MAX_DIMS)
            return DDP_ERR(DDP_FAIL, "%s: internal error: tensor '%s' has a bad dtype or rank", path, t[i].name);
        bytes[i] = tensor_bytes(t[i].dtype, t[i].shape, t[i].ndim);
        if (bytes[i] < 0 || (bytes[i] > 0 && !t[i].data))
            return DDP_ERR(DDP_FAIL, "%s: internal error: tensor '%s' has a bad shape or no data", path, t[i].name);
    }
    for (int i = 0; i < nmeta; i++)
        if (!meta[i].key || !meta[i].value)
            return DDP_ERR(DDP_FAIL, "%s: internal error: metadata entry %d is incomplete", path, i);
    return DDP_OK;
}

/* The padded JSON header for TENSORS laid out in ORDER; NULL when out of memory. */
static char *build_header(const DdpTensor *t, const int *order, const int64_t *bytes, int n,
                          const DdpMeta *meta, int nmeta, size_t *len)
{
    char *text = NULL;
    FILE *m = open_memstream(&text, len);
    if (!m)
        return NULL;
    putc('{', m);
    if (nmeta > 0) {
        fputs("\"__metadata__\":{", m);
        for (int i = 0; i < nmeta; i++) {
            if (i)
                putc(',', m);
            ddp_json_put_string(m, meta[i].key);
            putc(':', m);
            ddp_json_put_string(m, meta[i].value);
        }
        putc('}', m);
    }
    int64_t offset = 0;
    for (int k = 0; k < n; k++) {
        const DdpTensor *x = &t[order[k]];
        if (k || nmeta > 0)
            putc(',', m);
        ddp_json_put_string(m, x->name);
        fprintf(m, ":{\"dtype\":\"%s\",\"shape\":[", dtypes[x->dtype].name);
        for (int d = 0; d < x->ndim; d++)
            fprintf(m, "%s%lld", d ? "," : "", (long long)x->shape[d]);
        fprintf(m, "],\"data_offsets\":[%lld,%lld]}", (long long)offset,
                (long long)(offset + bytes[order[k]]));
        offset += bytes[order[k]];
    }
    putc('}', m);
    /* Pad so the data starts 8-byte aligned, as the reference writer does. */
    long unpadded = ftell(m);
    for (long pad = (8 - unpadded % 8) % 8; pad > 0; pad--)
        putc(' ', m);
    int failed = ferror(m);
    fclose(m);
    if (failed) {
        free(text);
        return NULL;
    }
    return text;
}

DdpStatus ddp_safetensors_write(const char *path, const DdpTensor *tensors, int n,
                                const DdpMeta *meta, int nmeta)
{
    if (n < 0 || nmeta < 0)
        return DDP_ERR(DDP_FAIL, "%s: internal error: negative tensor or metadata count", path);
    int64_t *bytes = malloc(sizeof *bytes * (size_t)(n + 1));
    int *order = malloc(sizeof *order * (size_t)(n + 1));
    char *header = NULL;
    size_t header_len = 0;
    DdpOutput out = {0};
    DdpStatus st = DDP_OK;
    if (!bytes || !order) {
        st = DDP_ERR(DDP_FAIL, "%s: out of memory", path);
        goto done;
    }
    st = check_tensors(path, tensors, n, meta, nmeta, bytes);
    if (st != DDP_OK)
        goto done;
    for (int i = 0; i < n; i++)
        order[i] = i;
    qsort_r(order, (size_t)n, sizeof *order, name_order, (void *)tensors);
    for (int k = 1; k < n; k++)
        if (strcmp(tensors[order[k - 1]].name, tensors[order[k]].name) == 0) {
            st = DDP_ERR(DDP_FAIL, "%s: internal error: two tensors named '%s'", path, tensors[order[k]].name);
            goto done;
        }
    qsort_r(order, (size_t)n, sizeof *order, layout_order, (void *)tensors);
    header = build_header(tensors, order, bytes, n, meta, nmeta, &header_len);
    if (!header) {
        st = DDP_ERR(DDP_FAIL, "%s: out of memory for the header", path);
        goto done;
    }

    st = ddp_output_open(NULL, path, &out);
    if (st != DDP_OK)
        goto done;
    unsigned char len8[8];
    for (int b = 0; b < 8; b++)
        len8[b] = (unsigned char)((uint64_t)header_len >> (8 * b));
    int ok = ddp_output_write(&out, len8, 8) && ddp_output_write(&out, header, header_len);
    for (int k = 0; ok && k < n; k++)  /* an empty tensor may have no data pointer (ddp_output_write writes nothing) */
        ok = ddp_output_write(&out, tensors[order[k]].data, (size_t)bytes[order[k]]);
    st = ddp_output_commit(&out); /* reports a failed write, with its reason */
done:
    free(bytes);
    free(order);
    free(header);
    return st;
}

/* ---- reading ---------------------------------------------------------------- */

typedef struct {
    DdpTensor t;
    int64_t begin, end;
    int used;
} Entry;

struct DdpSafetensors {
    char *path;
    char *arena;          /* decoded names and metadata strings */
    unsigned char *data;  /* the data block */
    int64_t data_len;
    Entry *entries;       /* in data order */
    int n;
    int *by_name;         /* entries sorted by name, for lookup */
    DdpMeta *meta;
    int nmeta;
    int cap_entries, cap_meta;
    void **copies;        /* aligned copies of tensors the file left misaligned */
    int ncopies;
};

static DdpStatus parse_dtype(DdpJson *j, const char *name, DdpDtype *out)
{
    const char *text;
    DDP_CHECK(ddp_json_string(j, &text));
    for (int d = 0; d < DDP_DTYPE_COUNT; d++)
        if (strcmp(text, dtypes[d].name) == 0) {
            *out = (DdpDtype)d;
            return DDP_OK;
        }
    return DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' has dtype '%.40s', which ddpc does not support",
                   j->path, name, text);
}

/* [n, n, ...] into SHAPE; at most MAX entries, or exactly MAX when EXACT. */
static DdpStatus parse_counts(DdpJson *j, const char *name, const char *field, int64_t *vals,
                              int max, int exact, int *count)
{
    DDP_CHECK(ddp_json_expect(j, '[', "expected '['"));
    *count = 0;
    ddp_json_skip_ws(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
    } else {
        for (;;) {
            if (*count == max)
                return DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' has more than %d %s", j->path, name, max,
                               exact ? "data_offsets" : "dimensions (ddpc supports up to 8)");
            DDP_CHECK(ddp_json_count(j, "expected a non-negative integer", &vals[(*count)++]));
            ddp_json_skip_ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            DDP_CHECK(ddp_json_expect(j, ']', "expected ',' or ']'"));
            break;
        }
    }
    if (exact && *count != max)
        return DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' has %d %s, expected %d", j->path, name, *count,
                       field, max);
    return DDP_OK;
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e]}, unknown keys skipped. */
static DdpStatus parse_tensor(DdpJson *j, Entry *e)
{
    const char *name = e->t.name;
    int seen[3] = {0, 0, 0};
    DDP_CHECK(ddp_json_expect(j, '{', "expected '{' to open a tensor's entry"));
    ddp_json_skip_ws(j);
    if (j->p < j->end && *j->p == '}')
        j->p++;
    else
        for (;;) {
            const char *key;
            size_t mark = j->arena_used;
            DDP_CHECK(ddp_json_string(j, &key));
            int which = strcmp(key, "dtype") == 0 ? 0 : strcmp(key, "shape") == 0 ? 1
                      : strcmp(key, "data_offsets") == 0 ? 2 : -1;
            j->arena_used = mark;
            DDP_CHECK(ddp_json_expect(j, ':', "expected ':'"));
            if (which >= 0 && seen[which]++)
                return DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' gives \"%s\" twice", j->path, name,
                               which == 0 ? "dtype" : which == 1 ? "shape" : "data_offsets");
            if (which == 0) {
                DDP_CHECK(parse_dtype(j, name, &e->t.dtype));
            } else if (which == 1) {
                DDP_CHECK(parse_counts(j, name, "dimensions", e->t.shape, DDP_TENSOR_MAX_DIMS, 0, &e->t.ndim));
            } else if (which == 2) {
                int64_t off[2];
                int count;
                DDP_CHECK(parse_counts(j, name, "data_offsets", off, 2, 1, &count));
                e->begin = off[0];
                e->end = off[1];
            } else {
                DDP_CHECK(ddp_json_skip_value(j, 2));
            }
            ddp_json_skip_ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            DDP_CHECK(ddp_json_expect(j, '}', "expected ',' or '}'"));
            break;
        }
    for (int k = 0; k < 3; k++)
        if (!seen[k])
            return DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' has no \"%s\"", j->path, name,
                           k == 0 ? "dtype" : k == 1 ? "shape" : "data_offsets");
    return DDP_OK;
}

/* ARRAY (COUNT elements of ELEM bytes, room for *CAP) with room for one
 * more; NULL when out of memory, ARRAY then left as it was. */
static void *grow(void *array, int count, int *cap, size_t elem)
{
    if (count < *cap)
        return array;
    if (*cap > INT_MAX / 2)
        return NULL;
    int bigger = *cap ? *cap * 2 : 64;
    char *p = realloc(array, (size_t)bigger * elem);
    if (!p)
        return NULL;
    memset(p + (size_t)*cap * elem, 0, (size_t)(bigger - *cap) * elem);
    *cap = bigger;
    return p;
}

/* "__metadata__": {"key": "value", ...} or null. */
static DdpStatus parse_metadata(DdpJson *j, DdpSafetensors *f)
{
    ddp_json_skip_ws(j);
    if ((size_t)(j->end - j->p) >= 4 && memcmp(j->p, "null", 4) == 0) {
        j->p += 4;
        return DDP_OK;
    }
    DDP_CHECK(ddp_json_expect(j, '{', "expected '{' to open __metadata__"));
    ddp_json_skip_ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        return DDP_OK;
    }
    for (;;) {
        DdpMeta *more = grow(f->meta, f->nmeta, &f->cap_meta, sizeof *f->meta);
        if (!more)
            return DDP_ERR(DDP_FAIL, "%s: out of memory reading the header", f->path);
        f->meta = more;
        DdpMeta *m = &f->meta[f->nmeta++];
        DDP_CHECK(ddp_json_string(j, &m->key));
        DDP_CHECK(ddp_json_expect(j, ':', "expected ':'"));
        ddp_json_skip_ws(j);
        if (j->p >= j->end || *j->p != '"')
            return DDP_ERR(DDP_BAD_INPUT, "%s: __metadata__ entry '%s' is not a string", j->path, m->key);
        DDP_CHECK(ddp_json_string(j, &m->value));
        ddp_json_skip_ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        return ddp_json_expect(j, '}', "expected ',' or '}'");
    }
}

static int by_name_order(const void *a, const void *b, void *entries)
{
    const Entry *e = entries;
    return strcmp(e[*(const int *)a].t.name, e[*(const int *)b].t.name);
}

static int by_offset_order(const void *a, const void *b)
{
    const Entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->t.name, y->t.name);
}

/* The whole header: {"name": {...}, ..., "__metadata__": {...}}. */
static DdpStatus parse_header(DdpJson *j, DdpSafetensors *f)
{
    ddp_json_skip_ws(j);
    if (j->p >= j->end || *j->p != '{')
        return ddp_json_error(j, "the header is not a JSON object");
    j->p++;
    int seen_meta = 0;
    ddp_json_skip_ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
    } else {
        for (;;) {
            const char *key;
            DDP_CHECK(ddp_json_string(j, &key));
            DDP_CHECK(ddp_json_expect(j, ':', "expected ':'"));
            if (strcmp(key, "__metadata__") == 0) {
                if (seen_meta++)
                    return DDP_ERR(DDP_BAD_INPUT, "%s: the header has two __metadata__ entries", f->path);
                DDP_CHECK(parse_metadata(j, f));
            } else {
                Entry *more = grow(f->entries, f->n, &f->cap_entries, sizeof *f->entries);
                if (!more)
                    return DDP_ERR(DDP_FAIL, "%s: out of memory reading the header", f->path);
                f->entries = more;
                Entry *e = &f->entries[f->n++];
                e->t.name = key;
                DDP_CHECK(parse_tensor(j, e));
            }
            ddp_json_skip_ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            DDP_CHECK(ddp_json_expect(j, '}', "expected ',' or '}'"));
            break;
        }
    }
    ddp_json_skip_ws(j);
    if (j->p != j->end)
        return ddp_json_error(j, "unexpected text after the header's closing '}'");
    return DDP_OK;
}

/* The byte ranges (entries sorted by offset) must tile the data block
 * exactly, each the size its dtype and shape make; then each tensor gets its
 * data pointer. */
static DdpStatus check_layout(DdpSafetensors *f)
{
    int64_t at = 0;
    char shape[160];
    for (int i = 0; i < f->n; i++) {
        Entry *e = &f->entries[i];
        if (e->end < e->begin)
            return DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' has data_offsets [%lld,%lld]: the end is before the begin",
                           f->path, e->t.name, (long long)e->begin, (long long)e->end);
        if (e->end > f->data_len)
            return DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' has data_offsets [%lld,%lld], past the %lld bytes of "
                           "data the file holds (truncated?)", f->path, e->t.name, (long long)e->begin,
                           (long long)e->end, (long long)f->data_len);
        if (e->begin != at)
            return DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' has data_offsets [%lld,%lld], but the tensors before "
                           "it end at %lld: data ranges must not %s", f->path, e->t.name, (long long)e->begin,
                           (long long)e->end, (long long)at, e->begin < at ? "overlap" : "leave gaps");
        int64_t bytes = tensor_bytes(e->t.dtype, e->t.shape, e->t.ndim);
        if (bytes < 0)
            return DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' has shape %s: too many elements", f->path, e->t.name,
                           shape_text(shape, sizeof shape, e->t.shape, e->t.ndim));
        if (bytes != e->end - e->begin)
            return DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' of dtype %s and shape %s needs %lld bytes, "
                           "its data_offsets [%lld,%lld] hold %lld", f->path, e->t.name,
                           dtypes[e->t.dtype].name, shape_text(shape, sizeof shape, e->t.shape, e->t.ndim),
                           (long long)bytes, (long long)e->begin, (long long)e->end,
                           (long long)(e->end - e->begin));
        at = e->end;
        e->t.nbytes = (size_t)bytes;
        e->t.data = f->data ? f->data + e->begin : NULL; /* NULL: the header alone was read */
    }
    if (at != f->data_len)
        return DDP_ERR(DDP_BAD_INPUT, "%s: the tensors end at byte %lld of the data, but the file holds %lld: "
                       "trailing data", f->path, (long long)at, (long long)f->data_len);
    /* A writer other than the reference one may leave a tensor off its
     * element alignment; give such a tensor an aligned copy (of data read:
     * the header alone has none to copy). */
    for (int i = 0; f->data && i < f->n; i++) {
        Entry *e = &f->entries[i];
        if (e->begin % (int64_t)dtypes[e->t.dtype].size == 0 || e->t.nbytes == 0)
            continue;
        if (!f->copies && !(f->copies = calloc((size_t)f->n, sizeof *f->copies)))
            return DDP_ERR(DDP_FAIL, "%s: out of memory", f->path);
        void *copy = malloc(e->t.nbytes);
        if (!copy)
            return DDP_ERR(DDP_FAIL, "%s: out of memory for tensor '%s'", f->path, e->t.name);
        memcpy(copy, e->t.data, e->t.nbytes);
        f->copies[f->ncopies++] = copy;
        e->t.data = copy;
    }
    return DDP_OK;
}

static DdpStatus index_names(DdpSafetensors *f)
{
    f->by_name = malloc(sizeof *f->by_name * (size_t)(f->n + 1));
    if (!f->by_name)
        return DDP_ERR(DDP_FAIL, "%s: out of memory", f->path);
    for (int i = 0; i < f->n; i++)
        f->by_name[i] = i;
    qsort_r(f->by_name, (size_t)f->n, sizeof *f->by_name, by_name_order, f->entries);
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->entries[f->by_name[i - 1]].t.name, f->entries[f->by_name[i]].t.name) == 0)
            return DDP_ERR(DDP_BAD_INPUT, "%s: the header names tensor '%s' twice", f->path,
                           f->entries[f->by_name[i]].t.name);
    return DDP_OK;
}

/* Reads LEN bytes at the current position; 1 if all arrived. */
static int read_all(FILE *in, void *buf, size_t len)
{
    return len == 0 || fread(buf, 1, len, in) == len;
}

/* WITH_DATA 0: the header alone, checked against the file's size. */
static DdpStatus load(DdpSafetensors *f, FILE *in, int with_data)
{
    struct stat st;
    if (fstat(fileno(in), &st) != 0 || !S_ISREG(st.st_mode))
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a regular file", f->path);
    uint64_t size = (uint64_t)st.st_size;
    unsigned char len8[8];
    if (size < 8 || !read_all(in, len8, 8))
        return DDP_ERR(DDP_BAD_INPUT, "%s: truncated: %llu bytes, too short for the 8-byte header length",
                       f->path, (unsigned long long)size);
    uint64_t header_len = 0;
    for (int b = 7; b >= 0; b--)
        header_len = header_len << 8 | len8[b];
    if (header_len > HEADER_MAX)
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a safetensors file: header length %llu is over the %u-byte limit",
                       f->path, (unsigned long long)header_len, HEADER_MAX);
    if (header_len > size - 8)
        return DDP_ERR(DDP_BAD_INPUT, "%s: truncated: the header length says %llu bytes, the file holds %llu after it",
                       f->path, (unsigned long long)header_len, (unsigned long long)(size - 8));
    if (header_len < 2)
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a safetensors file: header length %llu", f->path,
                       (unsigned long long)header_len);
    unsigned char *header = malloc((size_t)header_len);
    f->arena = malloc((size_t)header_len + 1);
    f->data_len = (int64_t)(size - 8 - header_len);
    f->data = with_data ? malloc(f->data_len ? (size_t)f->data_len : 1) : NULL;
    if (!header || !f->arena || (with_data && !f->data)) {
        free(header);
        return DDP_ERR(DDP_FAIL, "%s: out of memory for %llu bytes", f->path, (unsigned long long)size);
    }
    DdpStatus status;
    if (!read_all(in, header, (size_t)header_len) || (with_data && !read_all(in, f->data, (size_t)f->data_len))) {
        status = DDP_ERR(DDP_BAD_INPUT, "%s: read error: %s", f->path,
                         ferror(in) ? strerror(errno) : "the file shrank while being read");
    } else if (header[0] != '{') {
        status = DDP_ERR(DDP_BAD_INPUT, "%s: not a safetensors file: the header does not start with '{'",
                         f->path);
    } else {
        DdpJson j = {.path = f->path, .text = header, .p = header, .end = header + header_len, .arena = f->arena};
        status = parse_header(&j, f);
    }
    free(header);
    if (status != DDP_OK)
        return status;
    /* Data order is the order the file is best read and listed in. */
    if (f->n > 1)
        qsort(f->entries, (size_t)f->n, sizeof *f->entries, by_offset_order);
    DDP_CHECK(index_names(f));
    return check_layout(f);
}

static DdpStatus open_file(const char *path, int with_data, DdpSafetensors **out)
{
    *out = NULL;
    DdpSafetensors *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return DDP_ERR(DDP_FAIL, "%s: out of memory", path);
    }
    /* O_NONBLOCK: a FIFO is not waited on for a writer (fopen would wait
     * for good: a --resume over a FIFO of a checkpoint's name hung), but
     * opened and then refused as not a regular file (load); a regular
     * file's reads do not change */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    FILE *in = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!in) {
        DdpStatus st = DDP_ERR(DDP_BAD_INPUT, "%s: cannot open: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        ddp_safetensors_close(f);
        return st;
    }
    DdpStatus st = load(f, in, with_data);
    fclose(in);
    if (st != DDP_OK) {
        ddp_safetensors_close(f);
        return st;
    }
    *out = f;
    return DDP_OK;
}

DdpStatus ddp_safetensors_open(const char *path, DdpSafetensors **out) { return open_file(path, 1, out); }

DdpStatus ddp_safetensors_open_header(const char *path, DdpSafetensors **out) { return open_file(path, 0, out); }

void ddp_safetensors_close(DdpSafetensors *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->ncopies; i++)
        free(f->copies[i]);
    free(f->copies);
    free(f->path);
    free(f->arena);
    free(f->data);
    free(f->entries);
    free(f->by_name);
    free(f->meta);
    free(f);
}

const char *ddp_safetensors_path(const DdpSafetensors *f) { return f->path; }
int ddp_safetensors_count(const DdpSafetensors *f) { return f->n; }

const DdpTensor *ddp_safetensors_tensor(const DdpSafetensors *f, int i)
{
    return i >= 0 && i < f->n ? &f->entries[i].t : NULL;
}

static Entry *find_entry(const DdpSafetensors *f, const char *name)
{
    int lo = 0, hi = f->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(name, f->entries[f->by_name[mid]].t.name);
        if (c == 0)
            return &f->entries[f->by_name[mid]];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const DdpTensor *ddp_safetensors_find(const DdpSafetensors *f, const char *name)
{
    Entry *e = find_entry(f, name);
    return e ? &e->t : NULL;
}

const char *ddp_safetensors_meta(const DdpSafetensors *f, const char *key)
{
    for (int i = f->nmeta - 1; i >= 0; i--)  /* a repeated key: the last wins, as in JSON readers */
        if (strcmp(f->meta[i].key, key) == 0)
            return f->meta[i].value;
    return NULL;
}

DdpStatus ddp_safetensors_expect(DdpSafetensors *f, const char *name, DdpDtype dtype,
                                 const int64_t *shape, int ndim, const void **data)
{
    *data = NULL;
    Entry *e = find_entry(f, name);
    if (!e)
        return DDP_ERR(DDP_BAD_INPUT, "%s: has no tensor '%s'", f->path, name);
    if (e->t.dtype != dtype)
        return DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' has dtype %s, the net expects %s", f->path, name,
                       dtypes[e->t.dtype].name, ddp_dtype_name(dtype) ? ddp_dtype_name(dtype) : "?");
    int same = e->t.ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = e->t.shape[d] == shape[d];
    if (!same) {
        char have[160], want[160];
        return DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' has shape %s, the net expects %s", f->path, name,
                       shape_text(have, sizeof have, e->t.shape, e->t.ndim),
                       shape_text(want, sizeof want, shape, ndim > DDP_TENSOR_MAX_DIMS ? DDP_TENSOR_MAX_DIMS : ndim));
    }
    e->used = 1;
    *data = e->t.data;
    return DDP_OK;
}

DdpStatus ddp_safetensors_check_unused(const DdpSafetensors *f)
{
    char list[640];
    size_t at = 0;
    int unused = 0, listed = 0, full = 0;
    list[0] = '\0';
    for (int i = 0; i < f->n; i++) {
        if (f->entries[i].used)
            continue;
        unused++;
        if (full)
            continue;
        int w = snprintf(list + at, sizeof list - at, "%s'%s'", listed ? ", " : "", f->entries[i].t.name);
        if (w > 0 && (size_t)w < sizeof list - at - 24) {  /* keep room for "and N more" */
            at += (size_t)w;
            listed++;
        } else {
            list[at] = '\0';
            full = 1;
        }
    }
    if (!unused)
        return DDP_OK;
    if (listed < unused)
        snprintf(list + at, sizeof list - at, "%sand %d more", listed ? ", " : "", unused - listed);
    return DDP_ERR(DDP_BAD_INPUT, "%s: unexpected tensor%s %s: the net has no such parameter%s", f->path,
                   unused > 1 ? "s" : "", list, unused > 1 ? "s" : "");
}
