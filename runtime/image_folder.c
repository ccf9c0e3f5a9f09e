/*
 * image_folder.c: folders of images per class as a data set (image_folder.h).
 */
#include "image_folder.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "python_order.h"  // ddp_python_order: the order ImageFolder sorts names in

/* How deep below a class folder images are looked for: deeper is a link
 * loop more likely than a data set. */
#define MOST_DEPTH 32

static const char FORMAT[] = "image folder (PNG, JPEG)";

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int ddp_image_folder_find(const char *dir)
{
    char *train = ddp_data_path(dir, "", "train");
    int found = train && is_dir(train);
    free(train);
    return found;
}

/* A growing array of strings. */
typedef struct {
    char **items;
    int64_t n, cap;
} Strings;

static int strings_add(Strings *s, char *item)
{
    if (!item)
        return 0;
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        char **grown = realloc(s->items, sizeof *grown * (size_t)cap);
        if (!grown) {
            free(item);
            return 0;
        }
        s->items = grown;
        s->cap = cap;
    }
    s->items[s->n++] = item;
    return 1;
}

static void strings_free(Strings *s)
{
    for (int64_t i = 0; i < s->n; i++)
        free(s->items[i]);
    free(s->items);
    memset(s, 0, sizeof *s);
}

/* Python's order of two names (ImageFolder's): python_order.h. */
static int by_name(const void *a, const void *b)
{
    const char *p = *(char *const *)a, *q = *(char *const *)b;
    return ddp_python_order(p, strlen(p), q, strlen(q));
}

/* The names in DIR (not . and ..), sorted; folders only when DIRS, else
 * files only (links followed). */
static DdpStatus list_dir(const char *dir, int dirs, Strings *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return DDP_ERR(DDP_BAD_INPUT, "%s: cannot open: %s", dir, strerror(errno));
    DdpStatus status = DDP_OK;
    struct dirent *e;
    while (status == DDP_OK && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *path = ddp_data_path(dir, "", e->d_name);
        if (!path) {
            status = DDP_ERR(DDP_FAIL, "%s: out of memory listing it", dir);
            break;
        }
        struct stat st;
        int found = stat(path, &st) == 0;
        int kind_ok = found && (dirs ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
        /* an image ImageFolder would list but that cannot be read (a
         * broken link; a FIFO, socket or device, which a read would block
         * on or fail): refused, not left out */
        if (!found && !dirs && ddp_image_name(e->d_name) != DDP_IMAGE_NONE)
            status = DDP_ERR(DDP_BAD_INPUT, "%s: cannot open: %s", path, strerror(errno));
        else if (found && !dirs && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) &&
                 ddp_image_name(e->d_name) != DDP_IMAGE_NONE)
            status = DDP_ERR(DDP_BAD_INPUT, "%s: not a regular file (a FIFO, socket or device), which ImageFolder "
                             "would list as an image", path);
        free(path);
        if (kind_ok && !strings_add(out, strdup(e->d_name)))
            status = DDP_ERR(DDP_FAIL, "%s: out of memory listing it", dir);
    }
    closedir(d);
    if (status == DDP_OK && out->n > 1)
        qsort(out->items, (size_t)out->n, sizeof *out->items, by_name);
    return status;
}

/* Adds the image files below DIR to FILES, in any order (by_folder_then_name
 * sorts them). */
static DdpStatus add_images(const char *dir, int depth, Strings *files)
{
    if (depth > MOST_DEPTH)
        return DDP_ERR(DDP_BAD_INPUT, "%s: folders %d deep; a link loop?", dir, depth);
    Strings names = {0}, subdirs = {0};
    DdpStatus status = list_dir(dir, 0, &names);
    if (status == DDP_OK)
        status = list_dir(dir, 1, &subdirs);
    for (int64_t i = 0; status == DDP_OK && i < names.n; i++) {
        char *path = ddp_data_path(dir, "", names.items[i]);
        if (!path)
            status = DDP_ERR(DDP_FAIL, "out of memory");
        else if (ddp_image_name(names.items[i]) == DDP_IMAGE_NOT_READ)
            status = DDP_ERR(DDP_BAD_INPUT, "%s: this loader reads PNG and JPEG images (.png, .jpg, .jpeg); "
                             "convert this one or move it out of the folder", path);
        else if (ddp_image_name(names.items[i]) == DDP_IMAGE_READ) {
            if (!strings_add(files, path))
                status = DDP_ERR(DDP_FAIL, "out of memory");
            continue;
        }
        free(path);
    }
    for (int64_t i = 0; status == DDP_OK && i < subdirs.n; i++) {
        char *path = ddp_data_path(dir, "", subdirs.items[i]);
        status = path ? add_images(path, depth + 1, files) : DDP_ERR(DDP_FAIL, "out of memory");
        free(path);
    }
    strings_free(&names);
    strings_free(&subdirs);
    return status;
}

/* ImageFolder's order of a class's files: sorted(os.walk(...)) sorts by
 * folder path (as Python's strings, so "a-b" before "a/x"), then
 * sorted(names); Python's order throughout (python_order.h). */
static int by_folder_then_name(const void *a, const void *b)
{
    const char *p = *(char *const *)a, *q = *(char *const *)b;
    size_t dir_p = (size_t)(strrchr(p, '/') - p), dir_q = (size_t)(strrchr(q, '/') - q);
    int c = ddp_python_order(p, dir_p, q, dir_q);
    return c ? c : by_name(&(const char *){p + dir_p + 1}, &(const char *){q + dir_q + 1});
}

/* File I's header read and checked against the set's FIT (image_decode.h). */
static DdpStatus check_header(const DdpDataSet *set, int64_t i)
{
    DdpImageInfo info;
    DDP_CHECK(ddp_image_info(set->files[i], &info));
    return ddp_image_fits(set->files[i], &info, &set->fit);
}

/* The headers' check is shared by threads, as a folder's files are many
 * and reading each one's start waits on the disk (or the network) more
 * than on the CPU: thread t checks files t, t + threads, ..., keeps the
 * first of them that fails with its message (messages are per thread), and
 * all stop past the first file any has seen failing. */
typedef struct {
    const DdpDataSet *set;
    int64_t first, step;
    _Atomic int64_t *failed;   /* the first file in the set's order seen failing so far; n: none */
    int64_t failed_here;       /* this share's first failing file; n: none */
    DdpStatus status;          /* its check's */
    char message[DDP_ERROR_MESSAGE_LEN];
} HeaderShare;

static void *check_share(void *arg)
{
    HeaderShare *s = arg;
    for (int64_t i = s->first; i < s->set->n && i < atomic_load(s->failed); i += s->step) {
        DdpStatus status = check_header(s->set, i);
        if (status == DDP_OK)
            continue;
        s->failed_here = i;
        s->status = status;
        snprintf(s->message, sizeof s->message, "%s", ddp_error_message());
        int64_t seen = atomic_load(s->failed);
        while (i < seen && !atomic_compare_exchange_weak(s->failed, &seen, i))
            ;
        break;
    }
    return NULL;
}

/* Every file's header checked; the first file in the set's order that
 * fails is named, however the threads ran: every file before it was
 * checked, by one share or another. */
static DdpStatus check_headers(const DdpDataSet *set)
{
    /* more threads than cores, as they wait on reads: 52,000 PNGs not in
     * the page cache took 14 s on one thread, 5.6 on four and 3.1 on 16
     * (2 cores, a local disk), and about 1 s either way once cached */
    enum { MOST_THREADS = 16, FILES_PER_THREAD = 256 };
    int64_t threads = set->n / FILES_PER_THREAD + 1;
    threads = threads < MOST_THREADS ? threads : MOST_THREADS;
    _Atomic int64_t failed = set->n;
    HeaderShare *shares = calloc((size_t)threads, sizeof *shares);
    pthread_t ids[MOST_THREADS];
    int running[MOST_THREADS] = {0};
    if (!shares)
        return DDP_ERR(DDP_FAIL, "out of memory");
    for (int t = 0; t < threads; t++) {
        shares[t] = (HeaderShare){.set = set, .first = t, .step = threads, .failed = &failed, .failed_here = set->n};
        running[t] = t > 0 && pthread_create(&ids[t], NULL, check_share, &shares[t]) == 0;
    }
    for (int t = 0; t < threads; t++) /* thread 0's share, and any whose thread did not start, here */
        if (!running[t])
            check_share(&shares[t]);
    const HeaderShare *first = &shares[0];
    for (int t = 0; t < threads; t++) {
        if (running[t])
            pthread_join(ids[t], NULL);
        first = shares[t].failed_here < first->failed_here ? &shares[t] : first;
    }
    DdpStatus status = first->failed_here < set->n ? DDP_ERR(first->status, "%s", first->message) : DDP_OK;
    free(shares);
    return status;
}

/* Fills OUT's files and labels from CLASSES' folders below ROOT. */
static DdpStatus collect(const char *root, const Strings *classes, const Strings *known, DdpDataSet *out)
{
    Strings files = {0};
    DdpStatus status = DDP_OK;
    int64_t *ends = calloc((size_t)classes->n, sizeof *ends);
    int *labels = calloc((size_t)classes->n, sizeof *labels);
    if (!ends || !labels)
        status = DDP_ERR(DDP_FAIL, "out of memory");
    for (int64_t k = 0; status == DDP_OK && k < classes->n; k++) {
        /* CLASSES' k-th is KNOWN's labels[k]-th: train's classes number val's */
        char **at = bsearch(&classes->items[k], known->items, (size_t)known->n, sizeof *known->items, by_name);
        char *dir = ddp_data_path(root, "", classes->items[k]);
        if (!dir)
            status = DDP_ERR(DDP_FAIL, "out of memory");
        else if (!at)
            status = DDP_ERR(DDP_BAD_INPUT, "%s: no class of the training set (its folder train/%s is missing), "
                             "so it has no label", dir, classes->items[k]);
        else {
            labels[k] = (int)(at - known->items);
            int64_t first = k ? ends[k - 1] : 0;
            status = add_images(dir, 0, &files);
            if (status == DDP_OK && files.n - first > 1)
                qsort(files.items + first, (size_t)(files.n - first), sizeof *files.items, by_folder_then_name);
            if (status == DDP_OK && files.n == first)
                status = DDP_ERR(DDP_BAD_INPUT, "%s: no .png, .jpg or .jpeg images in this class's folder", dir);
            ends[k] = files.n;
        }
        free(dir);
    }
    if (status == DDP_OK && !(out->labels = malloc(((size_t)files.n + 1) * sizeof *out->labels)))
        status = DDP_ERR(DDP_FAIL, "out of memory");
    for (int64_t k = 0, i = 0; status == DDP_OK && k < classes->n; k++)
        for (; i < ends[k]; i++) {
            out->labels[i] = labels[k];
            if (labels[k] + 1 > out->num_classes)
                out->num_classes = labels[k] + 1;
        }
    out->files = files.items;
    out->n = files.n;
    free(ends);
    free(labels);
    if (status != DDP_OK) {
        for (int64_t i = 0; i < files.n; i++)
            free(files.items[i]);
        free(files.items);
        out->files = NULL;
        out->n = 0;
    }
    return status;
}

/* DDP_BAD_INPUT unless FIT makes samples an image can be: grey or RGB. */
static DdpStatus check_channels(const char *path, const DdpImageFit *fit)
{
    if (!fit->flat && (fit->channels == 1 || fit->channels == 3))
        return DDP_OK;
    char input[64];
    if (fit->flat)
        snprintf(input, sizeof input, "is %d features", fit->cols);
    else
        snprintf(input, sizeof input, "has %d channels", fit->channels);
    return DDP_ERR(DDP_BAD_INPUT, "%s: images make samples of 1 channel (grey) or 3 (RGB), but the net's input %s",
                   path, input);
}

/* The sizes and format every image-file set has. */
static void describe(DdpDataSet *out, const DdpImageFit *fit)
{
    out->channels = fit->channels;
    out->rows = fit->rows;
    out->cols = fit->cols;
    out->fit = *fit;
    out->format = FORMAT;
}

static DdpStatus no_classes(const char *folder, const char *name)
{
    return DDP_ERR(DDP_BAD_INPUT, "%s: no class folders in it (images go in %s/CLASS/)", folder, name);
}

DdpStatus ddp_image_folder_load(const char *dir, int train, const DdpImageFit *fit, DdpDataSet *out)
{
    memset(out, 0, sizeof *out);
    char *train_dir = ddp_data_path(dir, "", "train"), *root = ddp_data_path(dir, "", train ? "train" : "val");
    Strings known = {0}, classes = {0};
    DdpStatus status = train_dir && root ? check_channels(dir, fit) : DDP_ERR(DDP_FAIL, "out of memory");
    struct stat val;
    if (status == DDP_OK && !train && !is_dir(root))
        status = lstat(root, &val) == 0 /* a file, or a link to nothing, where the folder should be */
                     ? DDP_ERR(DDP_BAD_INPUT, "%s: not a folder: the test set's images go in val/CLASS/", root)
                     : DDP_ERR(DDP_BAD_INPUT, "%s: found train/ but no val/ beside it, for the test set", dir);
    if (status == DDP_OK)
        status = list_dir(train_dir, 1, &known);
    if (status == DDP_OK && known.n == 0)
        status = no_classes(train_dir, "train");
    if (status == DDP_OK && known.n > (int64_t)DDP_DATA_MOST_LABEL + 1)
        status = DDP_ERR(DDP_BAD_INPUT, "%s: %lld class folders; this loader takes at most %lld", train_dir,
                         (long long)known.n, (long long)DDP_DATA_MOST_LABEL + 1);
    if (status == DDP_OK)
        status = train ? DDP_OK : list_dir(root, 1, &classes);
    if (status == DDP_OK && !train && classes.n == 0)
        status = no_classes(root, "val");
    describe(out, fit);
    if (status == DDP_OK)
        status = collect(root, train ? &known : &classes, &known, out);
    if (status == DDP_OK)
        status = check_headers(out);
    if (status == DDP_OK) { /* train's folders, sorted: class k's name is the k-th */
        out->class_names = known.items;
        out->n_class_names = known.n;
        memset(&known, 0, sizeof known);
    }
    strings_free(&known);
    strings_free(&classes);
    free(train_dir);
    out->images_path = out->labels_path = NULL;
    if (status == DDP_OK && (!(out->images_path = root) || !(out->labels_path = strdup(root))))
        status = DDP_ERR(DDP_FAIL, "out of memory");
    else if (status != DDP_OK)
        free(root);
    if (status != DDP_OK)
        ddp_data_free(out);
    return status;
}

DdpStatus ddp_image_file_load(const char *path, const DdpImageFit *fit, DdpDataSet *out)
{
    memset(out, 0, sizeof *out);
    describe(out, fit);
    out->n = 1;
    out->num_classes = 1;
    DdpStatus status = check_channels(path, fit);
    if (status == DDP_OK && (!(out->files = calloc(1, sizeof *out->files)) || !(out->files[0] = strdup(path)) ||
                             !(out->labels = calloc(1, sizeof *out->labels)) || !(out->images_path = strdup(path)) ||
                             !(out->labels_path = strdup(path))))
        status = DDP_ERR(DDP_FAIL, "out of memory");
    if (status == DDP_OK)
        status = check_headers(out);
    if (status != DDP_OK)
        ddp_data_free(out);
    return status;
}
