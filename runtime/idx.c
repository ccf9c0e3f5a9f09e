/*
 * idx.c: loads an MNIST-format data set (IDX files) into memory.
 *
 * The files are tiny next to a GPU's memory, so each is read whole, once, at
 * start-up, and kept as the bytes the file holds: a quarter of the memory of
 * floats, and ddp_idx_gather converts only the samples of the batch at hand.
 *
 * We look where torchvision puts them (DIR, DIR/raw, DIR/MNIST/raw,
 * DIR/FashionMNIST/raw) so that an existing download just works, accept them
 * gzipped or not (deciding by the first bytes, not the name, since people
 * gunzip files and keep the name or the reverse), and check everything the
 * header claims before trusting it: a hostile header must not make us
 * allocate gigabytes or read past what the file holds. For a raw file the
 * claim is checked against the file's size before allocating; a gzip stream's
 * length is unknown until it is read, so the buffer grows as data actually
 * arrives, and the claim is capped at DDP_IDX_MAX_BYTES. Like torchvision,
 * we refuse a file holding more bytes than its header accounts for.
 *
 * Labels are not checked against 10: the net decides how many classes there
 * are, so we record the largest label and ddp_data_check_classes compares.
 */
#include "idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>  // gzopen, gzread: the .gz files torchvision downloads

/* The most we accept from a gzipped file: over 60 times Fashion-MNIST's
 * training images, well under what a training host holds. */
#define DDP_IDX_MAX_BYTES ((uint64_t)4 << 30)

/* Unsigned bytes (0x08), then the number of dimensions: images of one
 * channel (N x H x W) or of several (N x C x H x W), and labels. */
enum { MAGIC_IMAGES = 0x00000803, MAGIC_IMAGES_CHANNELS = 0x00000804, MAGIC_LABELS = 0x00000801 };

/* One opened IDX file, raw or gzipped. */
typedef struct {
    const char *path;
    FILE *raw;
    gzFile gz;
    uint64_t size; /* bytes in the file (raw only) */
} IdxFile;

static DdpStatus idx_open(IdxFile *f, const char *path)
{
    *f = (IdxFile){.path = path};
    f->raw = fopen(path, "rb");
    if (!f->raw)
        return DDP_ERR(DDP_BAD_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f->raw), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f->raw);
        f->raw = NULL;
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a regular file", path);
    }
    f->size = (uint64_t)st.st_size;
    unsigned char head[2] = {0, 0};
    size_t got = fread(head, 1, 2, f->raw);
    if (got == 2 && head[0] == 0x1f && head[1] == 0x8b) {
        fclose(f->raw);
        f->raw = NULL;
        f->gz = gzopen(path, "rb");
        if (!f->gz)
            return DDP_ERR(DDP_BAD_INPUT, "%s: cannot open: %s", path, strerror(errno));
        gzbuffer(f->gz, 1 << 17);
    } else {
        rewind(f->raw);
    }
    return DDP_OK;
}

static void idx_close(IdxFile *f)
{
    if (f->raw)
        fclose(f->raw);
    if (f->gz)
        gzclose(f->gz);
    f->raw = NULL;
    f->gz = NULL;
}

/* Reads up to LEN bytes into BUF; *GOT is how many came before the end of
 * the file. Fails only on a read error or corrupt compressed data. */
static DdpStatus idx_read(IdxFile *f, void *buf, uint64_t len, uint64_t *got)
{
    *got = 0;
    while (*got < len) {
        uint64_t want = len - *got;
        if (want > (1u << 30))
            want = 1u << 30;
        if (f->raw) {
            size_t r = fread((char *)buf + *got, 1, (size_t)want, f->raw);
            *got += r;
            if (r < want) {
                if (ferror(f->raw))
                    return DDP_ERR(DDP_BAD_INPUT, "%s: read error: %s", f->path, strerror(errno));
                return DDP_OK;
            }
        } else {
            int r = gzread(f->gz, (char *)buf + *got, (unsigned)want);
            if (r < 0) {
                int code;
                const char *why = gzerror(f->gz, &code);
                /* A gzip stream cut short reads as an error in zlib; to the
                 * user it is the same fault as a short raw file. */
                if (code == Z_BUF_ERROR)
                    return DDP_OK;
                size_t plen = strlen(f->path);  /* zlib prefixes the path we already name */
                if (strncmp(why, f->path, plen) == 0 && strncmp(why + plen, ": ", 2) == 0)
                    why += plen + 2;
                return DDP_ERR(DDP_BAD_INPUT, "%s: corrupt gzip data: %s", f->path, why);
            }
            *got += (uint64_t)r;
            if ((uint64_t)r < want)
                return DDP_OK;
        }
    }
    return DDP_OK;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads the header of an IDX file of unsigned bytes with MIN_DIMS to
 * MAX_DIMS dimensions (the magic number's last byte says how many) into
 * DIMS and *NDIMS, and returns how many bytes of data they account for. */
static DdpStatus idx_header(IdxFile *f, uint32_t magic, int min_dims, int max_dims, uint32_t *dims, int *ndims,
                            const char *what, uint64_t *bytes)
{
    unsigned char head[4 + 4 * 4];
    uint64_t got;
    DDP_CHECK(idx_read(f, head, 4, &got));
    uint32_t m = got == 4 ? be32(head) : 0;
    int n = (int)(m & 0xff);
    if (got == 4 && (m & ~0xffu) != (magic & ~0xffu))
        n = 0; /* not unsigned bytes, or not IDX */
    if (got == 4 && (n < min_dims || n > max_dims)) {
        const char *hint = m == MAGIC_IMAGES || m == MAGIC_IMAGES_CHANNELS ? " (this is an images file)"
                         : m == MAGIC_LABELS ? " (this is a labels file)" : "";
        char expected[64];
        if (min_dims == max_dims)
            snprintf(expected, sizeof expected, "0x%08x (unsigned bytes, %d dimension%s)", magic, min_dims,
                     min_dims > 1 ? "s" : "");
        else
            snprintf(expected, sizeof expected, "0x%08x or 0x%08x (unsigned bytes, %d or %d dimensions)",
                     (magic & ~0xffu) | (uint32_t)min_dims, (magic & ~0xffu) | (uint32_t)max_dims, min_dims,
                     max_dims);
        return DDP_ERR(DDP_BAD_INPUT, "%s: not an IDX %s file: magic number 0x%08x, expected %s%s", f->path, what, m,
                       expected, hint);
    }
    uint64_t need = 4 + 4 * (uint64_t)n;
    if (got == 4) {
        DDP_CHECK(idx_read(f, head + 4, need - 4, &got));
        got += 4;
    }
    if (got < need) {
        if (got < 4)
            need = 4 + 4 * (uint64_t)min_dims;
        return DDP_ERR(DDP_BAD_INPUT, "%s: truncated: an IDX header takes %llu bytes, the file holds %llu",
                       f->path, (unsigned long long)need, (unsigned long long)got);
    }
    uint64_t total = 1;
    for (int d = 0; d < n; d++) {
        dims[d] = be32(head + 4 + 4 * d);
        if (dims[d] == 0)
            return DDP_ERR(DDP_BAD_INPUT, "%s: the header gives dimension %d as 0: no data", f->path, d);
        if (total > UINT64_MAX / dims[d]) { /* images only: a label count alone cannot overflow */
            char shown[64];
            snprintf(shown, sizeof shown, n == 4 ? "%u x %u x %u x %u" : "%u x %u x %u", be32(head + 4),
                     be32(head + 8), be32(head + 12), n == 4 ? be32(head + 16) : 0);
            return DDP_ERR(DDP_BAD_INPUT, "%s: the header's dimensions (%s) are impossibly large", f->path, shown);
        }
        total *= dims[d];
    }
    *ndims = n;
    *bytes = total;
    return DDP_OK;
}

/* Reads the BYTES of data the header announced, which DESCRIBE words for
 * messages ("60000 images of 28x28"), into a new buffer *OUT. */
static DdpStatus idx_payload(IdxFile *f, uint64_t header_len, uint64_t bytes,
                             const char *describe, uint8_t **out)
{
    *out = NULL;
    if (f->raw) {
        uint64_t held = f->size - header_len;
        if (held != bytes)
            return DDP_ERR(DDP_BAD_INPUT, "%s: %s: header says %s (%llu bytes), file holds %llu bytes of %s",
                           f->path, held < bytes ? "truncated" : "trailing data", describe,
                           (unsigned long long)bytes, (unsigned long long)held,
                           header_len == 8 ? "labels" : "pixels");
    } else if (bytes > DDP_IDX_MAX_BYTES) {
        return DDP_ERR(DDP_BAD_INPUT, "%s: header says %s (%llu bytes), more than the %llu GiB "
                       "this loader accepts from a gzipped file", f->path, describe,
                       (unsigned long long)bytes, (unsigned long long)(DDP_IDX_MAX_BYTES >> 30));
    }
    if (bytes > SIZE_MAX)
        return DDP_ERR(DDP_BAD_INPUT, "%s: %s is too large for this machine", f->path, describe);

    /* Grow as data arrives, so a lying gzip header costs what the stream holds. */
    uint64_t cap = f->raw ? bytes : (bytes < ((uint64_t)64 << 20) ? bytes : (uint64_t)64 << 20);
    uint64_t have = 0;
    uint8_t *buf = malloc((size_t)cap);
    if (!buf)
        return DDP_ERR(DDP_FAIL, "%s: out of memory for %llu bytes", f->path, (unsigned long long)cap);
    for (;;) {
        uint64_t got;
        DdpStatus st = idx_read(f, buf + have, cap - have, &got);
        have += got;
        if (st != DDP_OK || have < cap || cap == bytes) {
            if (st == DDP_OK && have < bytes)
                st = DDP_ERR(DDP_BAD_INPUT, "%s: truncated: header says %s (%llu bytes), file holds %llu bytes of %s",
                             f->path, describe, (unsigned long long)bytes, (unsigned long long)have,
                             header_len == 8 ? "labels" : "pixels");
            if (st != DDP_OK) {
                free(buf);
                return st;
            }
            break;
        }
        uint64_t bigger = cap * 2 < bytes ? cap * 2 : bytes;
        uint8_t *grown = realloc(buf, (size_t)bigger);
        if (!grown) {
            free(buf);
            return DDP_ERR(DDP_FAIL, "%s: out of memory for %llu bytes", f->path, (unsigned long long)bigger);
        }
        buf = grown;
        cap = bigger;
    }
    if (f->gz) {
        unsigned char extra;
        uint64_t got;
        DdpStatus st = idx_read(f, &extra, 1, &got);
        int code = Z_OK;
        gzerror(f->gz, &code);
        if (st == DDP_OK && got)
            st = DDP_ERR(DDP_BAD_INPUT, "%s: trailing data: the file holds more than the %s its header announces",
                         f->path, describe);
        /* every byte there, but the stream's end, which holds its checksum,
         * cut off (idx_read takes a stream cut short for a short file) */
        else if (st == DDP_OK && code == Z_BUF_ERROR)
            st = DDP_ERR(DDP_BAD_INPUT, "%s: truncated: the gzip stream ends before its checksum, so the %s "
                         "cannot be trusted (an interrupted download?)", f->path, describe);
        if (st != DDP_OK) {
            free(buf);
            return st;
        }
    }
    *out = buf;
    return DDP_OK;
}

static DdpStatus load_images(const char *path, DdpDataSet *set)
{
    IdxFile f;
    DDP_CHECK(idx_open(&f, path));
    uint32_t dims[4] = {0, 0, 0, 0}; /* N [C] H W */
    int ndims = 0;
    uint64_t bytes;
    DdpStatus st = idx_header(&f, MAGIC_IMAGES, 3, 4, dims, &ndims, "images", &bytes);
    /* N x H x W, or N x C x H x W (ndims is 0 after a failed header) */
    uint32_t channels = ndims == 4 ? dims[1] : 1, rows = ndims >= 3 ? dims[ndims - 2] : 0,
             cols = ndims >= 3 ? dims[ndims - 1] : 0;
    if (st == DDP_OK && (uint64_t)channels * rows * cols > INT32_MAX)
        st = DDP_ERR(DDP_BAD_INPUT, "%s: images of %ux%ux%u bytes are too large", path, channels, rows, cols);
    if (st == DDP_OK) {
        char describe[96];
        if (ndims == 4)
            snprintf(describe, sizeof describe, "%u images of %ux%ux%u", dims[0], channels, rows, cols);
        else
            snprintf(describe, sizeof describe, "%u images of %ux%u", dims[0], rows, cols);
        st = idx_payload(&f, 4 + 4 * (uint64_t)ndims, bytes, describe, &set->pixels);
    }
    idx_close(&f);
    if (st == DDP_OK) {
        set->n = dims[0];
        set->channels = (int)channels;
        set->rows = (int)rows;
        set->cols = (int)cols;
    }
    return st;
}

static DdpStatus load_labels(const char *path, DdpDataSet *set)
{
    IdxFile f;
    DDP_CHECK(idx_open(&f, path));
    uint32_t n = 0;
    int ndims = 0;
    uint64_t bytes;
    DdpStatus st = idx_header(&f, MAGIC_LABELS, 1, 1, &n, &ndims, "labels", &bytes);
    if (st == DDP_OK && n != set->n)
        st = DDP_ERR(DDP_BAD_INPUT, "%s: holds %u labels, but %s holds %lld images",
                     path, n, set->images_path, (long long)set->n);
    uint8_t *bytes_read = NULL;
    if (st == DDP_OK) {
        char describe[64];
        snprintf(describe, sizeof describe, "%u labels", n);
        st = idx_payload(&f, 8, bytes, describe, &bytes_read);
    }
    idx_close(&f);
    if (st == DDP_OK && !(set->labels = malloc(((size_t)n + 1) * sizeof *set->labels)))
        st = DDP_ERR(DDP_FAIL, "%s: out of memory for %u labels", path, n);
    if (st == DDP_OK) {
        int max = 0;
        for (uint32_t i = 0; i < n; i++) {
            set->labels[i] = bytes_read[i];
            if (set->labels[i] > max)
                max = set->labels[i];
        }
        set->num_classes = max + 1;
    }
    free(bytes_read);
    return st;
}

/* DIR/SUB/NAME or DIR/SUB/NAME.gz, whichever exists (the raw one first: it
 * reads faster and torchvision keeps both); NULL when neither does, with
 * NOTE (LEN bytes) saying what stands in the first one's place, if it was
 * empty and something does (ddp_data_not_a_file). */
static char *find_in(const char *dir, const char *sub, const char *name, char *note, size_t len)
{
    for (int gz = 0; gz < 2; gz++) {
        char file[64];
        snprintf(file, sizeof file, "%s%s", name, gz ? ".gz" : "");
        char *path = ddp_data_path(dir, sub, file);
        if (!path || ddp_data_is_file(path))
            return path;
        if (!note[0])
            ddp_data_not_a_file(path, note, len);
        free(path);
    }
    return NULL;
}

DdpStatus ddp_idx_load(const char *dir, int train, const char *elsewhere, DdpDataSet *out)
{
    static const char *const subdirs[] = {"", "/raw", "/MNIST/raw", "/FashionMNIST/raw"};
    const char *images = train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte";
    const char *labels = train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte";
    memset(out, 0, sizeof *out);
    if (!dir)
        dir = DDP_DATA_DEFAULT_DIR;
    struct stat st;
    if (stat(dir, &st) != 0)
        return DDP_ERR(DDP_BAD_INPUT, "%s: %s%s", dir, strerror(errno),
                       strcmp(dir, DDP_DATA_DEFAULT_DIR) == 0
                           ? " (install Debian's dataset-fashion-mnist, or name a data directory)" : "");
    if (!S_ISDIR(st.st_mode))
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a directory", dir);

    const char *sub = NULL;
    char note[4200] = "";
    for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0] && !out->images_path; i++) {
        out->images_path = find_in(dir, subdirs[i], images, note, sizeof note);
        sub = subdirs[i];
    }
    if (!out->images_path)
        return DDP_ERR(DDP_BAD_INPUT, "%s: no %s[.gz] in %s, %s/raw, %s/MNIST/raw or %s/FashionMNIST/raw%s%s",
                       dir, images, dir, dir, dir, dir, note, elsewhere);
    note[0] = '\0'; /* the images' search may have left one */
    out->labels_path = find_in(dir, sub, labels, note, sizeof note);
    if (!out->labels_path) {
        DdpStatus err = DDP_ERR(DDP_BAD_INPUT, "%s: found %s but no %s[.gz] beside it%s",
                                dir, out->images_path, labels, note);
        ddp_data_free(out);
        return err;
    }
    DdpStatus status = load_images(out->images_path, out);
    if (status == DDP_OK)
        status = load_labels(out->labels_path, out);
    if (status != DDP_OK)
        ddp_data_free(out);
    else
        out->format = "IDX";
    return status;
}

DdpStatus ddp_idx_images(const char *path, DdpDataSet *out)
{
    memset(out, 0, sizeof *out);
    out->images_path = strdup(path);
    if (!out->images_path)
        return DDP_ERR(DDP_FAIL, "out of memory");
    DdpStatus st = load_images(path, out);
    if (st != DDP_OK) {
        ddp_data_free(out);
        return st;
    }
    out->format = "IDX";
    return DDP_OK;
}
