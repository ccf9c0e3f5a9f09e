/*
 * checkpoint.c: checkpoints as safetensors files (see checkpoint.h).
 *
 * The checksum covers every tensor's name and bytes, in the net's parameter
 * order and then the optimizer state's, and the metadata that says where
 * training stood. safetensors_open already refuses a file whose structure is
 * broken (truncated, offsets out of range); the checksum catches what keeps
 * the structure and changes the numbers: a flipped bit on disk, a copy cut
 * short at a tensor boundary and padded, an edited step.
 */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>  // PATH_MAX: the longest name a save makes
#include <math.h>  // isfinite
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>     // open, O_*
#include <sys/file.h>  // flock: one run per net and --save directory
#include <sys/stat.h>  // lstat: whether a failed save left its file in place
#include <unistd.h>
#include <zlib.h>  // crc32

#include "conv_choices.h" // ddp_conv_choices_parse, DDP_CONV_CHOICES_TEXT: the record of cuDNN's choices
#include "dirs.h"         // ddp_make_dirs
#include "flags.h"        // DDP_FLAGS_MAX_BATCH: the limits a checkpoint's run had
#include "net_name.h"     // ddp_net_name_byte: what a net's name, and so a file name here, holds
#include "numbers.h"      // ddp_parse_int, ddp_parse_u64: its numbers read as the flags that made them
#include "topology.h"     // DDP_MAX_RANKS
#include "safetensors.h"  // ddp_safetensors_write, _open, _expect, _meta
#include "weights.h"      // ddp_weights_tensors, ddp_weights_read

#define FORMAT "ddpc-checkpoint"
#define VERSION "1"
#define PREFIX DDP_CHECKPOINT_PREFIX
#define SUFFIX ".safetensors"
#define MAX_CANDIDATES 4096 /* checkpoint files looked at in one directory */
#define MAX_STEM 64         /* of the net's name in a file name */
#define STEM_KEPT 40        /* a longer name keeps this much, then a hash of it all */

/* PyTorch's names for the optimizer state, slot by slot. */
static const char *slot_name(const DdpNet *net, int slot)
{
    static const char *const sgd[] = {"momentum_buffer"};
    static const char *const adam[] = {"exp_avg", "exp_avg_sq"};
    if (net->train.optimizer == DDP_OPT_SGD)
        return slot < 1 ? sgd[slot] : NULL;
    return slot < 2 ? adam[slot] : NULL;
}

/* Everything a checkpoint holds, as tensors to write or to compare: the
 * weights first (ddp_weights_tensors), then the optimizer state. */
typedef struct {
    DdpTensor *tensors;
    int n, n_weights;
    int64_t *steps_at;
    char **names;           /* the optimizer state's, owned */
} Contents;

static void contents_free(Contents *c)
{
    for (int i = c->n_weights; c->names && i < c->n; i++)
        free(c->names[i - c->n_weights]);
    free(c->names);
    free(c->tensors);
    free(c->steps_at);
    *c = (Contents){0};
}

static DdpStatus contents_make(const DdpNet *net, const DdpCheckpointState *s, int64_t step, Contents *c)
{
    int trainable = 0;
    for (int i = 0; i < net->n_params; i++)
        trainable += net->params[i].trainable && !net->params[i].is_step_count;
    int n = net->n_params + trainable * net->opt_slots;
    *c = (Contents){.n_weights = net->n_params};
    c->tensors = calloc((size_t)n + 1, sizeof *c->tensors);
    c->steps_at = calloc((size_t)net->n_params + 1, sizeof *c->steps_at);
    c->names = calloc((size_t)(n - net->n_params) + 1, sizeof *c->names);
    if (!c->tensors || !c->steps_at || !c->names) {
        contents_free(c);
        return DDP_ERR(DDP_FAIL, "out of memory");
    }
    ddp_weights_tensors(net, s->params, s->buffers, s->counts, step, c->tensors, c->steps_at);
    c->n = net->n_params;
    for (int slot = 0; slot < net->opt_slots; slot++) {
        const char *what = slot_name(net, slot);
        for (int i = 0; i < net->n_params; i++) {
            const DdpParamInfo *p = &net->params[i];
            if (!p->trainable || p->is_step_count)
                continue;
            char *name = NULL;
            if (!what || asprintf(&name, "optim.%s.%s", p->name, what) < 0) {
                contents_free(c);
                return what ? DDP_ERR(DDP_FAIL, "out of memory")
                            : DDP_ERR(DDP_FAIL, "internal error: optimizer slot %d has no name", slot);
            }
            c->names[c->n - c->n_weights] = name;
            DdpTensor *t = &c->tensors[c->n++];
            *t = (DdpTensor){.name = name, .dtype = DDP_DTYPE_F32, .ndim = p->ndim};
            for (int d = 0; d < p->ndim; d++)
                t->shape[d] = p->shape[d];
            t->data = s->opt_state + (int64_t)slot * net->n_param_floats + p->offset;
        }
    }
    return DDP_OK;
}

/* A program's layout as the metadata says it. */
static const char *layout_name(int channels_last) { return channels_last ? "nhwc" : "nchw"; }

/* The settings as metadata text, in one fixed order (part of the checksum). */
static void run_text(const DdpCheckpointRun *r, char *buf, size_t len)
{
    /* fp32 and NCHW unsaid, as in the checkpoints written before there was a
     * precision or a layout: their checksums still hold */
    snprintf(buf, len, "step=%lld epoch=%lld seed=%llu batch=%lld world_size=%lld no_sync_every=%lld shuffle=%d%s%s%s%s",
             (long long)r->step, (long long)r->epoch, (unsigned long long)r->seed, (long long)r->batch, (long long)r->world,
             (long long)r->no_sync_every, r->shuffle, r->precision != DDP_PRECISION_FP32 ? " precision=" : "",
             r->precision != DDP_PRECISION_FP32 ? ddp_precision_name(r->precision) : "",
             r->channels_last ? " layout=" : "", r->channels_last ? layout_name(1) : "");
}

/* The loss sums (DdpCheckpointRun) under metadata keys of their own, as
 * "%.17g" (which gives a double back exactly), with a checksum of their own,
 * "loss_crc32": kept out of the contents' checksum, so that a version that
 * does not know them still resumes the file, without them. */
static const char *const LOSS_KEYS[4] = {"epoch_loss_sum", "epoch_loss_samples", "span_loss_sum", "span_loss_samples"};
enum { LOSS_TEXT = 32 };

static void loss_texts(const DdpCheckpointRun *r, char text[4][LOSS_TEXT])
{
    const double v[4] = {r->epoch_loss.sum, r->epoch_loss.samples, r->span_loss.sum, r->span_loss.samples};
    for (int i = 0; i < 4; i++)
        snprintf(text[i], LOSS_TEXT, "%.17g", v[i]);
}

/* A CRC-32 over N strings, each with its NUL, as metadata text: the
 * checksums of the net's name and hash, and of the loss sums. */
static void strings_checksum(const char *const *text, int n, char crc[16])
{
    uLong sum = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < n; i++)
        sum = crc32(sum, (const Bytef *)text[i], (uInt)strlen(text[i]) + 1);
    snprintf(crc, 16, "%08" PRIx32, (uint32_t)sum);
}

/* A report a stop left out (DdpCheckpointRun.left_out), under keys of its
 * own, written only where there is one, with a checksum of its own,
 * "left_out_crc32": the versions before it resume the file as they did,
 * without the report. The kind's names, by DdpLeftOut. */
static const char *const LEFT_OUT_KEYS[4] = {"left_out_report", "left_out_loss_sum", "left_out_loss_samples",
                                             "left_out_lr"};
static const char *const LEFT_OUT_NAMES[] = {[DDP_LEFT_OUT_EPOCH] = "epoch", [DDP_LEFT_OUT_EVAL] = "eval"};

/* The training set's size, under a key of its own with a checksum of its
 * own, as the loss sums: the versions before it resume the file as they
 * did, and a file they wrote does not say it (0). */
static const char *const TRAIN_SAMPLES_KEYS[1] = {"train_samples"};

/* The N metadata KEYS of a group under the checksum CRC_KEY, into TEXT:
 * *PRESENT 0 where none of them is there (a file written before them);
 * DDP_BAD_INPUT, naming WHAT (a plural noun when PLURAL), where some are
 * missing or the checksum is not theirs. */
static DdpStatus meta_group(const DdpSafetensors *f, const char *const *keys, int n, const char *crc_key,
                            const char *what, int plural, const char **text, int *present)
{
    const char *path = ddp_safetensors_path(f), *saved_crc = ddp_safetensors_meta(f, crc_key);
    *present = saved_crc != NULL;
    for (int i = 0; i < n; i++)
        *present |= (text[i] = ddp_safetensors_meta(f, keys[i])) != NULL;
    if (!*present)
        return DDP_OK;
    const char *missing = saved_crc ? NULL : crc_key;
    for (int i = 0; i < n; i++)
        missing = text[i] ? missing : keys[i];
    if (missing)
        return DDP_ERR(DDP_BAD_INPUT, "%s: damaged: its %s %s incomplete ('%s' missing)", path, what,
                       plural ? "are" : "is", missing);
    char crc[16];
    strings_checksum(text, n, crc);
    if (strcmp(saved_crc, crc) != 0)
        return DDP_ERR(DDP_BAD_INPUT, "%s: damaged: the checksum of its %s is %s but %s to %s", path, what,
                       saved_crc, plural ? "they sum" : "it sums", crc);
    return DDP_OK;
}

/* TEXT, the metadata KEY's, as a finite double in *V; with COUNT, a whole
 * count of samples, at least LEAST. */
static DdpStatus meta_number(const DdpSafetensors *f, const char *key, const char *text, int count, double least,
                             double *v)
{
    char *end = NULL;
    errno = 0;
    *v = strtod(text, &end);
    if (!*text || *end || errno || !isfinite(*v) || (count && (*v < least || *v > 0x1p53 || *v != floor(*v))))
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a usable checkpoint: its metadata '%s' is '%s'",
                       ddp_safetensors_path(f), key, text);
    return DDP_OK;
}

/* The loss sums from the metadata, all 0 in a file without them (written
 * before them); checked: their checksum, finite values, sample counts that
 * are whole and not negative, the span's within the epoch's. */
static DdpStatus meta_loss_sums(const DdpSafetensors *f, DdpCheckpointRun *run)
{
    const char *text[4];
    int present;
    run->epoch_loss = run->span_loss = (DdpLossSum){0, 0};
    DDP_CHECK(meta_group(f, LOSS_KEYS, 4, "loss_crc32", "loss sums", 1, text, &present));
    if (!present)
        return DDP_OK;
    double v[4];
    for (int i = 0; i < 4; i++)
        DDP_CHECK(meta_number(f, LOSS_KEYS[i], text[i], i % 2 == 1, 0, &v[i]));
    if (v[3] > v[1])
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a usable checkpoint: its metadata '%s' is '%s'",
                       ddp_safetensors_path(f), LOSS_KEYS[3], text[3]);
    run->epoch_loss = (DdpLossSum){v[0], v[1]};
    run->span_loss = (DdpLossSum){v[2], v[3]};
    return DDP_OK;
}

/* The training set's size from the metadata: 0 in a file without it;
 * checked as the loss sums are, and at least 1. */
static DdpStatus meta_train_samples(const DdpSafetensors *f, DdpCheckpointRun *run)
{
    const char *text[1];
    int present;
    run->train_samples = 0;
    DDP_CHECK(meta_group(f, TRAIN_SAMPLES_KEYS, 1, "train_samples_crc32", "training set's size", 0, text, &present));
    if (present && (!ddp_parse_int(text[0], &run->train_samples) || run->train_samples < 1))
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a usable checkpoint: its metadata '%s' is '%s'",
                       ddp_safetensors_path(f), TRAIN_SAMPLES_KEYS[0], text[0]);
    return DDP_OK;
}

/* The report a stop left out, from the metadata: none in a file without
 * one; checked as the loss sums are, and its kind known. */
static DdpStatus meta_left_out(const DdpSafetensors *f, DdpCheckpointRun *run)
{
    const char *text[4];
    int present;
    run->left_out = DDP_LEFT_OUT_NONE;
    run->left_out_loss = (DdpLossSum){0, 0};
    run->left_out_lr = 0;
    DDP_CHECK(meta_group(f, LEFT_OUT_KEYS, 4, "left_out_crc32", "report left out", 0, text, &present));
    if (!present)
        return DDP_OK;
    DdpLeftOut kind = DDP_LEFT_OUT_NONE;
    for (int k = DDP_LEFT_OUT_EPOCH; k <= DDP_LEFT_OUT_EVAL; k++)
        kind = strcmp(text[0], LEFT_OUT_NAMES[k]) == 0 ? (DdpLeftOut)k : kind;
    if (kind == DDP_LEFT_OUT_NONE)
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a usable checkpoint: its metadata '%s' is '%s'",
                       ddp_safetensors_path(f), LEFT_OUT_KEYS[0], text[0]);
    double v[3];
    DDP_CHECK(meta_number(f, LEFT_OUT_KEYS[1], text[1], 0, 0, &v[0]));
    DDP_CHECK(meta_number(f, LEFT_OUT_KEYS[2], text[2], 1, 1, &v[1]));
    DDP_CHECK(meta_number(f, LEFT_OUT_KEYS[3], text[3], 0, 0, &v[2]));
    run->left_out = kind;
    run->left_out_loss = (DdpLossSum){v[0], v[1]};
    run->left_out_lr = v[2];
    return DDP_OK;
}

/* RUN is run_text's; CHOICES the conv choices, "" when none (as in the
 * checkpoints written before they were kept: their checksums still hold). */
static uint32_t checksum(const Contents *c, const char *run, const char *choices)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, (const Bytef *)run, (uInt)strlen(run));
    crc = crc32(crc, (const Bytef *)choices, (uInt)strlen(choices));
    for (int i = 0; i < c->n; i++) {
        const DdpTensor *t = &c->tensors[i];
        crc = crc32(crc, (const Bytef *)t->name, (uInt)strlen(t->name) + 1);
        size_t bytes = ddp_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++)
            bytes *= (size_t)t->shape[d];
        /* crc32_z takes a size_t; plain crc32 a uInt, too small for a large tensor */
        crc = crc32_z(crc, (const Bytef *)t->data, bytes);
    }
    return (uint32_t)crc;
}

/* The checksum of a checkpoint's net name and hash, kept apart from the
 * contents' (which checkpoints written before it cover without them, and
 * still hold): it tells a damaged name or hash, skipped as any damage is,
 * from a checkpoint of another net or version, which --resume refuses. */
static void net_checksum(const char *name, const char *hash, char crc[16])
{
    strings_checksum((const char *const[2]){name, hash}, 2, crc);
}

/* The first float tensor of C holding a NaN or an infinity; NULL if none. */
static const char *first_nonfinite(const Contents *c)
{
    for (int i = 0; i < c->n; i++) {
        const DdpTensor *t = &c->tensors[i];
        if (t->dtype != DDP_DTYPE_F32)
            continue;
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++)
            numel *= t->shape[d];
        const float *x = t->data;
        for (int64_t j = 0; j < numel; j++)
            if (!isfinite(x[j]))
                return t->name;
    }
    return NULL;
}

DdpStatus ddp_checkpoint_nonfinite(const DdpNet *net, const DdpCheckpointState *state, char *name, size_t len)
{
    Contents c;
    DDP_CHECK(contents_make(net, state, 0, &c));
    const char *bad = first_nonfinite(&c);
    snprintf(name, len, "%s", bad ? bad : "");
    contents_free(&c);
    return DDP_OK;
}

DdpStatus ddp_checkpoint_make_dir(const char *dir, int *made)
{
    char part[4096];
    int result = ddp_make_dirs(dir, part, sizeof part);
    if (made)
        *made = result == 1;
    if (result < 0) {
        if (errno == ENOTDIR)
            return DDP_ERR(DDP_BAD_INPUT, "--save %s: %s is not a directory", dir, part);
        return DDP_ERR(DDP_BAD_INPUT, "--save %s: cannot create %s: %s", dir, part, strerror(errno));
    }
    if (access(dir, W_OK | X_OK) != 0)
        return DDP_ERR(DDP_BAD_INPUT, "--save %s: cannot write into it: %s", dir, strerror(errno));
    return DDP_OK;
}

/* The name a net's checkpoints are filed under (file_stem). */
static const char *net_name(const DdpNet *net) { return net->name && *net->name ? net->name : "net"; }

/* The net NAME's part of its checkpoints' names: the name itself, whose
 * bytes are those ddp_net_name_byte allows, so that nets of different names
 * never share files (any other byte, which no net's name has, is made '_').
 * EARLIER gives the part as versions before this one wrote it, with '-' and
 * '.' made '_' too, so that "a-b" and "a_b" shared one: those files are
 * still resumed from, each checked for the net it holds (list_dir), and
 * never pruned. A name longer than STEM_KEPT keeps its first STEM_KEPT
 * characters and adds a hash of the whole (FNV-1a), so that two long names
 * alike at the start do not share files, and prune each other's. */
static void file_stem(const char *name, int earlier, char stem[MAX_STEM])
{
    size_t i = 0, len = strlen(name);
    for (; i < len && i < STEM_KEPT; i++) {
        char ch = name[i];
        int kept = ddp_net_name_byte(ch) && !(earlier && (ch == '-' || ch == '.'));
        stem[i] = kept ? ch : '_';
    }
    stem[i] = '\0';
    if (len > STEM_KEPT) {
        uint32_t h = 2166136261u;
        for (size_t k = 0; k < len; k++)
            h = (h ^ (unsigned char)name[k]) * 16777619u;
        snprintf(stem + i, MAX_STEM - i, "-%08x", (unsigned)h);
    }
}

/* The step of a checkpoint's file name, PREFIX STEM "-" digits SUFFIX (with
 * TMP, a temporary name a writer uses: that plus DDP_OUTPUT_TMP and a unique
 * suffix, or ".tmp" as earlier versions wrote); with STEM NULL, the older
 * names that say nothing of the net, PREFIX digits SUFFIX. -1 for any other. */
static int64_t name_step(const char *name, const char *stem, int tmp)
{
    size_t plen = strlen(PREFIX);
    if (strncmp(name, PREFIX, plen) != 0)
        return -1;
    const char *p = name + plen;
    if (stem) {
        size_t slen = strlen(stem);
        if (strncmp(p, stem, slen) != 0 || p[slen] != '-')
            return -1;
        p += slen + 1;
    }
    int64_t step = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 18; p++, digits++)
        step = step * 10 + (*p - '0');
    if (digits == 0)
        return -1;
    if (!tmp)
        return strcmp(p, SUFFIX) == 0 ? step : -1;
    size_t slen = strlen(SUFFIX DDP_OUTPUT_TMP);
    int ours = strncmp(p, SUFFIX DDP_OUTPUT_TMP, slen) == 0 && strlen(p + slen) == 6;
    return ours || strcmp(p, SUFFIX ".tmp") == 0 ? step : -1;
}

typedef struct {
    int64_t step;
    int legacy;             /* an earlier version's name, which may be another net's (file_stem) */
    char *name;
} Candidate;

static int newest_first(const void *a, const void *b)
{
    int64_t x = ((const Candidate *)a)->step, y = ((const Candidate *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* NET's checkpoints in DIR, newest first (TMP: the temporary files
 * instead); with LEGACY also those named as earlier versions named them,
 * whoever's they are: PREFIX digits SUFFIX, or PREFIX the earlier stem
 * (file_stem) "-" digits SUFFIX. */
static DdpStatus list_dir(const DdpNet *net, const char *dir, int tmp, int legacy, Candidate **out, int *n)
{
    *out = NULL;
    *n = 0;
    char stem[MAX_STEM], earlier[MAX_STEM];
    file_stem(net_name(net), 0, stem);
    file_stem(net_name(net), 1, earlier);
    const int renamed = strcmp(stem, earlier) != 0;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? DDP_OK : DDP_ERR(DDP_BAD_INPUT, "%s: cannot read the directory: %s", dir,
                                                  strerror(errno));
    Candidate *c = calloc(MAX_CANDIDATES, sizeof *c);
    if (!c) {
        closedir(d);
        return DDP_ERR(DDP_FAIL, "out of memory");
    }
    struct dirent *e;
    while ((e = readdir(d)) && *n < MAX_CANDIDATES) {
        int64_t step = name_step(e->d_name, stem, tmp);
        int old = 0;
        if (step < 0 && legacy && !tmp)
            old = (step = name_step(e->d_name, NULL, 0)) >= 0 ||
                  (renamed && (step = name_step(e->d_name, earlier, 0)) >= 0);
        if (step < 0 || !(c[*n].name = strdup(e->d_name)))
            continue;
        c[*n].legacy = old;
        c[(*n)++].step = step;
    }
    closedir(d);
    qsort(c, (size_t)*n, sizeof *c, newest_first);
    *out = c;
    return DDP_OK;
}

static void list_free(Candidate *c, int n)
{
    for (int i = 0; c && i < n; i++)
        free(c[i].name);
    free(c);
}

/* The lock this process holds (ddp_checkpoint_lock), until it ends: its
 * file's descriptor, deliberately kept, and the directory it was taken in,
 * by name and by what the name led to then (relock_if_moved). */
static struct {
    int fd;
    char *dir;
    dev_t dev;
    ino_t ino;
} held = {.fd = -1};

/* Takes note of DIR, whose lock this process now holds in FD. */
static void hold(int fd, const char *dir)
{
    struct stat sb;
    held.fd = fd;
    held.dir = strdup(dir); /* NULL (out of memory): no move is then seen */
    if (stat(dir, &sb) == 0) {
        held.dev = sb.st_dev;
        held.ino = sb.st_ino;
    }
}

DdpStatus ddp_checkpoint_lock(const DdpNet *net, const char *dir)
{
    if (held.fd >= 0)
        return DDP_OK;
    char stem[MAX_STEM], *path = NULL;
    file_stem(net_name(net), 0, stem);
    /* every name a save makes in DIR must fit a path, its writer's
     * temporary one too: found here, at start-up, not at the first save */
    enum { STEP_DIGITS = 19 /* DDP_STEP_COUNT_MAX's */ };
    size_t longest = strlen(dir) + strlen("/" PREFIX) + strlen(stem) + strlen("-") + STEP_DIGITS +
                     strlen(SUFFIX DDP_OUTPUT_TMP "XXXXXX");
    if (longest >= PATH_MAX)
        return DDP_ERR(DDP_BAD_INPUT, "--save %s: the directory's name is too long", dir);
    if (asprintf(&path, "%s/" PREFIX "%s.lock", dir, stem) < 0)
        return DDP_ERR(DDP_FAIL, "out of memory");
    DdpStatus st = DDP_OK;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        st = DDP_ERR(DDP_BAD_INPUT, "--save %s: cannot create %s: %s", dir, path, strerror(errno));
    } else if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
        hold(fd, dir);
    } else if (errno == ENOLCK || errno == ENOSYS || errno == EOPNOTSUPP) {
        /* a file system without locks (some NFS and Lustre mounts): said, not fatal */
        fprintf(stderr, "warning: --save %s: cannot lock %s (%s): make sure no other run of net '%s' saves "
                        "there\n", dir, path, strerror(errno), net->name);
        hold(fd, dir);
    } else {
        st = errno == EWOULDBLOCK
            ? DDP_ERR(DDP_BAD_INPUT, "--save %s is in use by another run of net '%s' (it holds %s): give this run "
                      "another --save directory, or let that one end first", dir, net->name, path)
            : DDP_ERR(DDP_BAD_INPUT, "--save %s: cannot lock %s: %s", dir, path, strerror(errno));
        close(fd);
    }
    free(path);
    return st;
}

/* DIR, locked at start-up, moved or removed since and made again by this
 * save: the lock is the old directory's, and another run could have taken
 * this one (and resumed from what it found). The lock is taken again here,
 * said, or the save fails where another run holds it now. */
static DdpStatus relock_if_moved(const DdpNet *net, const char *dir)
{
    struct stat sb;
    if (held.fd < 0 || !held.dir || strcmp(held.dir, dir) != 0 || stat(dir, &sb) != 0 ||
        (sb.st_dev == held.dev && sb.st_ino == held.ino))
        return DDP_OK;
    close(held.fd);
    free(held.dir);
    held.fd = -1;
    held.dir = NULL;
    DDP_CHECK(ddp_checkpoint_lock(net, dir));
    fprintf(stderr, "warning: --save %s was moved or removed during the run: its checkpoints go on in a new %s, "
                    "which this run holds now\n", dir, dir);
    return DDP_OK;
}

/* Whether DIR/NAME passes a load's checks of its header, against the
 * file's length (ddp_checkpoint_step): one cut short, with a damaged header,
 * of another version of the net or of the format, or not a regular file
 * (links followed) does not. Only the header is read: the data's checksums
 * are checked when a file is loaded, since reading every kept checkpoint at
 * each save would cost more than writing one. */
static int header_checks_out(const DdpNet *net, const char *dir, const char *name)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, name) < 0)
        return 1; /* unknown: counted, as every file once was */
    int64_t step;
    const int whole = ddp_checkpoint_step(net, path, &step) == DDP_OK;
    if (!whole)
        ddp_error_clear();
    free(path);
    return whole;
}

/* Removes what a save of NET leaves behind: its checkpoints up to STEP older
 * than the KEEP newest whose headers check out (header_checks_out), and its
 * temporary files of killed writers (no other writer of NET's can be at
 * work in DIR: ddp_checkpoint_lock). Up to KEEP damaged files among the
 * newest stay but are not counted, so they never cost a good one its
 * place; each goes once KEEP good ones are newer. Older damaged ones count
 * as good ones do: a header check that failed for every file (a reader
 * that could not open them) still leaves at most 2 x KEEP of those up to
 * STEP. Newer checkpoints (a run resumed from an older one), other nets'
 * files and files named the older way are left alone; the one just
 * written, finite (ddp_checkpoint_save), is the newest kept, so a good one
 * always stays. Failing to remove is not worth stopping training for. */
static void prune(const DdpNet *net, const char *dir, int64_t step)
{
    Candidate *c;
    int n, kept = 0, uncounted = 0;
    for (int tmp = 0; tmp <= 1; tmp++) {
        if (list_dir(net, dir, tmp, 0, &c, &n) != DDP_OK)
            continue;
        for (int i = 0; i < n; i++) {
            if (!tmp && c[i].step > step)
                continue;
            if (!tmp && kept < DDP_CHECKPOINT_KEEP) {
                if (header_checks_out(net, dir, c[i].name) || ++uncounted > DDP_CHECKPOINT_KEEP)
                    kept++;
                continue;
            }
            char *path = NULL;
            if (asprintf(&path, "%s/%s", dir, c[i].name) >= 0)
                (void)unlink(path);
            free(path);
        }
        list_free(c, n);
    }
}

DdpStatus ddp_checkpoint_save(const DdpNet *net, const char *dir, const DdpCheckpointRun *run,
                              const DdpCheckpointState *state, char *path, size_t len)
{
    if (len > 0)
        path[0] = '\0'; /* nothing written, as every early return leaves it */
    DDP_CHECK(ddp_checkpoint_make_dir(dir, NULL));
    DDP_CHECK(relock_if_moved(net, dir));
    char stem[MAX_STEM];
    file_stem(net_name(net), 0, stem);
    int written = snprintf(path, len, "%s/" PREFIX "%s-%09lld" SUFFIX, dir, stem, (long long)run->step);
    if (written < 0 || (size_t)written >= len) {
        if (len > 0)
            path[0] = '\0';
        return DDP_ERR(DDP_BAD_INPUT, "--save %s: the directory's name is too long", dir);
    }
    Contents c;
    DDP_CHECK(contents_make(net, state, run->step, &c));
    /* a diverged run must not push good checkpoints out (the trainer checks
     * first, to stop every rank; this keeps the promise for any caller) */
    const char *bad = first_nonfinite(&c);
    if (bad) {
        DdpStatus st = DDP_ERR(DDP_FAIL, "%s: not written: tensor '%s' is not finite (nan or inf)", path, bad);
        contents_free(&c);
        return st;
    }
    char text[256], crc[16], net_crc[16], step[24], epoch[24], seed[24], batch[24], world[24], k[24], shuffle[4];
    run_text(run, text, sizeof text);
    net_checksum(net->name ? net->name : "", net->hash ? net->hash : "", net_crc);
    const char *choices = state->conv_choices ? state->conv_choices : "";
    snprintf(crc, sizeof crc, "%08" PRIx32, checksum(&c, text, choices));
    snprintf(step, sizeof step, "%lld", (long long)run->step);
    snprintf(epoch, sizeof epoch, "%lld", (long long)run->epoch);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)run->seed);
    snprintf(batch, sizeof batch, "%lld", (long long)run->batch);
    snprintf(world, sizeof world, "%lld", (long long)run->world);
    snprintf(k, sizeof k, "%lld", (long long)run->no_sync_every);
    snprintf(shuffle, sizeof shuffle, "%d", run->shuffle);
    char loss_text[4][LOSS_TEXT], loss_crc[16];
    loss_texts(run, loss_text);
    strings_checksum((const char *const[4]){loss_text[0], loss_text[1], loss_text[2], loss_text[3]}, 4, loss_crc);
    /* a report of no sample is none: the reader refuses one */
    char left_text[3][LOSS_TEXT], left_crc[16];
    const char *left_kind = (run->left_out == DDP_LEFT_OUT_EPOCH || run->left_out == DDP_LEFT_OUT_EVAL) &&
                            run->left_out_loss.samples > 0 ? LEFT_OUT_NAMES[run->left_out] : "";
    snprintf(left_text[0], LOSS_TEXT, "%.17g", run->left_out_loss.sum);
    snprintf(left_text[1], LOSS_TEXT, "%.17g", run->left_out_loss.samples);
    snprintf(left_text[2], LOSS_TEXT, "%.17g", run->left_out_lr);
    strings_checksum((const char *const[4]){left_kind, left_text[0], left_text[1], left_text[2]}, 4, left_crc);
    const DdpMeta always[] = {
        {"format", FORMAT}, {"version", VERSION},
        {"net", net->name ? net->name : ""}, {"hash", net->hash ? net->hash : ""}, {"net_crc32", net_crc},
        {"step", step}, {"epoch", epoch}, {"seed", seed}, {"batch", batch}, {"world_size", world},
        {"no_sync_every", k}, {"shuffle", shuffle}, {"crc32", crc},
        {"precision", ddp_precision_name(run->precision)}, {"layout", layout_name(run->channels_last)},
        {LOSS_KEYS[0], loss_text[0]}, {LOSS_KEYS[1], loss_text[1]}, {LOSS_KEYS[2], loss_text[2]},
        {LOSS_KEYS[3], loss_text[3]}, {"loss_crc32", loss_crc},
    };
    /* and what is written only where it says something: the training set's
     * size, a report left out, the conv choices */
    char train_samples[24], train_crc[16];
    snprintf(train_samples, sizeof train_samples, "%lld", (long long)run->train_samples);
    strings_checksum((const char *const[1]){train_samples}, 1, train_crc);
    DdpMeta meta[sizeof always / sizeof always[0] + 8];
    int metas = (int)(sizeof always / sizeof always[0]);
    memcpy(meta, always, sizeof always);
    if (run->train_samples > 0) {
        meta[metas++] = (DdpMeta){TRAIN_SAMPLES_KEYS[0], train_samples};
        meta[metas++] = (DdpMeta){"train_samples_crc32", train_crc};
    }
    if (*left_kind) { /* written only where there is one */
        meta[metas++] = (DdpMeta){LEFT_OUT_KEYS[0], left_kind};
        meta[metas++] = (DdpMeta){LEFT_OUT_KEYS[1], left_text[0]};
        meta[metas++] = (DdpMeta){LEFT_OUT_KEYS[2], left_text[1]};
        meta[metas++] = (DdpMeta){LEFT_OUT_KEYS[3], left_text[2]};
        meta[metas++] = (DdpMeta){"left_out_crc32", left_crc};
    }
    if (*choices)
        meta[metas++] = (DdpMeta){"conv_choices", choices};
    struct stat before, after;
    const int existed = lstat(path, &before) == 0;
    DdpStatus st = ddp_safetensors_write(path, c.tensors, c.n, meta, metas);
    contents_free(&c);
    if (st == DDP_OK)
        prune(net, dir, run->step);
    /* a new file in place after a failure: renamed, but its directory not
     * synced (dirs.h); otherwise nothing was written */
    else if (!(lstat(path, &after) == 0 && S_ISREG(after.st_mode) && (!existed || after.st_ino != before.st_ino)))
        path[0] = '\0';
    return st;
}

/* A metadata value that must be a whole number in [LO, HI]. */
static DdpStatus meta_int(const DdpSafetensors *f, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const char *v = ddp_safetensors_meta(f, key);
    int64_t x = 0;
    if (!v || !ddp_parse_int(v, &x) || x < lo || x > hi)
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a usable checkpoint: its metadata '%s' is %s%s%s",
                       ddp_safetensors_path(f), key, v ? "'" : "missing", v ? v : "", v ? "'" : "");
    *out = x;
    return DDP_OK;
}

/* The seed: any 64-bit unsigned number, in decimal (DDP_SEED_MAX). */
static DdpStatus meta_seed(const DdpSafetensors *f, uint64_t *out)
{
    const char *v = ddp_safetensors_meta(f, "seed");
    if (!v || !ddp_parse_u64(v, out))
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a usable checkpoint: its metadata 'seed' is %s%s%s",
                       ddp_safetensors_path(f), v ? "'" : "missing", v ? v : "", v ? "'" : "");
    return DDP_OK;
}

/* What read_header says of a checkpoint that is not this net's; and what
 * load says of a file it could not open, whose bytes are unknown. */
enum { FOREIGN_NET = 1, FOREIGN_VERSION = 2 };

/* What the file says of itself: a ddpc checkpoint of this net, and the run. */
static DdpStatus read_header(const DdpNet *net, const DdpSafetensors *f, DdpCheckpointRun *run, int *foreign)
{
    const char *path = ddp_safetensors_path(f);
    const char *format = ddp_safetensors_meta(f, "format");
    if (!format || strcmp(format, FORMAT) != 0)
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a ddpc checkpoint%s", path,
                       format && strcmp(format, "ddpc") == 0 ? " but a weights file (--export writes those; "
                                                               "--init loads them)" : "");
    const char *version = ddp_safetensors_meta(f, "version");
    if (!version || strcmp(version, VERSION) != 0)
        return DDP_ERR(DDP_BAD_INPUT, "%s: a checkpoint of format version %s; this program reads version %s",
                       path, version ? version : "(none)", VERSION);
    const char *name = ddp_safetensors_meta(f, "net"), *hash = ddp_safetensors_meta(f, "hash");
    const char *my_name = net->name ? net->name : "", *my_hash = net->hash ? net->hash : "";
    const char *saved_net_crc = ddp_safetensors_meta(f, "net_crc32");
    char net_crc[16];
    net_checksum(name ? name : "", hash ? hash : "", net_crc);
    if (saved_net_crc && (!name || !hash || strcmp(saved_net_crc, net_crc) != 0))
        return DDP_ERR(DDP_BAD_INPUT, "%s: damaged: the checksum of its net's name and version is %s but they sum "
                       "to %s", path, saved_net_crc, net_crc);
    if (!name || strcmp(name, my_name) != 0) {
        *foreign = FOREIGN_NET;
        return DDP_ERR(DDP_BAD_INPUT, "%s: a checkpoint of net '%s', not of '%s'", path, name ? name : "?",
                       my_name);
    }
    if (!hash || strcmp(hash, my_hash) != 0) {
        *foreign = FOREIGN_VERSION;
        return DDP_ERR(DDP_BAD_INPUT, "%s: a checkpoint of another version of net '%s' (its layers differ "
                       "from this program's)", path, my_name);
    }
    int64_t shuffle;
    DDP_CHECK(meta_int(f, "step", 0, DDP_STEP_COUNT_MAX, &run->step));
    DDP_CHECK(meta_int(f, "epoch", 0, DDP_STEP_COUNT_MAX, &run->epoch));
    DDP_CHECK(meta_seed(f, &run->seed));
    /* the limits a run has, so that batch x world (the global batch) cannot overflow */
    DDP_CHECK(meta_int(f, "batch", 1, DDP_FLAGS_MAX_BATCH, &run->batch));
    DDP_CHECK(meta_int(f, "world_size", 1, DDP_MAX_RANKS, &run->world));
    DDP_CHECK(meta_int(f, "no_sync_every", 1, INT64_MAX, &run->no_sync_every));
    DDP_CHECK(meta_int(f, "shuffle", 0, 1, &shuffle));
    run->shuffle = (int)shuffle;
    const char *precision = ddp_safetensors_meta(f, "precision");
    run->precision = DDP_PRECISION_FP32;
    if (precision && !ddp_precision_parse(precision, &run->precision))
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a usable checkpoint: its metadata '%s' is '%s'", path, "precision",
                       precision);
    const char *layout = ddp_safetensors_meta(f, "layout");
    run->channels_last = layout && strcmp(layout, layout_name(1)) == 0;
    if (layout && !run->channels_last && strcmp(layout, layout_name(0)) != 0)
        return DDP_ERR(DDP_BAD_INPUT, "%s: not a usable checkpoint: its metadata '%s' is '%s'", path, "layout", layout);
    DDP_CHECK(meta_loss_sums(f, run));
    DDP_CHECK(meta_train_samples(f, run));
    return meta_left_out(f, run);
}

static DdpStatus read_tensors(const DdpNet *net, DdpSafetensors *f, const DdpCheckpointRun *run,
                              DdpCheckpointState *state)
{
    DDP_CHECK(ddp_weights_read(net, f, state->params, state->buffers, state->counts));
    /* The file holds each step count as PyTorch would (start + steps taken). */
    for (int i = 0; i < net->n_params; i++)
        state->counts[i] -= run->step;
    Contents c;
    DDP_CHECK(contents_make(net, state, run->step, &c));
    DdpStatus st = DDP_OK;
    for (int i = c.n_weights; i < c.n && st == DDP_OK; i++) {
        const DdpTensor *t = &c.tensors[i];
        const void *data;
        st = ddp_safetensors_expect(f, t->name, DDP_DTYPE_F32, t->shape, t->ndim, &data);
        if (st == DDP_OK)
            memcpy((void *)t->data, data, ddp_safetensors_find(f, t->name)->nbytes);
    }
    if (st == DDP_OK)
        st = ddp_safetensors_check_unused(f);
    const char *choices = ddp_safetensors_meta(f, "conv_choices");
    if (st == DDP_OK && choices && strlen(choices) >= DDP_CONV_CHOICES_TEXT)
        st = DDP_ERR(DDP_BAD_INPUT, "%s: not a usable checkpoint: its metadata 'conv_choices' is longer than %d bytes",
                     ddp_safetensors_path(f), DDP_CONV_CHOICES_TEXT - 1);
    DdpConvChoices read;
    if (st == DDP_OK && choices && ddp_conv_choices_parse(choices, &read) != DDP_OK) {
        char message[DDP_ERROR_MESSAGE_LEN];
        snprintf(message, sizeof message, "%s", ddp_error_message());
        st = DDP_ERR(DDP_BAD_INPUT, "%s: not a usable checkpoint: %s", ddp_safetensors_path(f), message);
    } else if (st == DDP_OK && choices)
        ddp_conv_choices_free(&read);
    if (st == DDP_OK) {
        char text[256], crc[16];
        run_text(run, text, sizeof text);
        snprintf(crc, sizeof crc, "%08" PRIx32, checksum(&c, text, choices ? choices : ""));
        const char *saved = ddp_safetensors_meta(f, "crc32");
        if (!saved || strcmp(saved, crc) != 0)
            st = DDP_ERR(DDP_BAD_INPUT, "%s: damaged: its checksum is %s but its contents sum to %s",
                         ddp_safetensors_path(f), saved ? saved : "missing", crc);
    }
    const char *bad = st == DDP_OK ? first_nonfinite(&c) : NULL;
    if (bad)
        st = DDP_ERR(DDP_BAD_INPUT, "%s: tensor '%s' is not finite (nan or inf): training had diverged when it was "
                     "written", ddp_safetensors_path(f), bad);
    if (st == DDP_OK && state->conv_choices)
        snprintf(state->conv_choices, DDP_CONV_CHOICES_TEXT, "%s", choices ? choices : "");
    contents_free(&c);
    return st;
}

static DdpStatus load(const DdpNet *net, const char *path, DdpCheckpointRun *run, DdpCheckpointState *state,
                      int *foreign)
{
    *foreign = 0;
    DdpSafetensors *f;
    DDP_CHECK(ddp_safetensors_open(path, &f));
    DdpStatus st = read_header(net, f, run, foreign);
    if (st == DDP_OK)
        st = read_tensors(net, f, run, state);
    ddp_safetensors_close(f);
    return st;
}

DdpStatus ddp_checkpoint_load(const DdpNet *net, const char *path, DdpCheckpointRun *run,
                              DdpCheckpointState *state)
{
    int foreign;
    return load(net, path, run, state, &foreign);
}

/* Whether the candidate PATH of ddp_checkpoint_latest can be opened. One
 * that cannot (its permissions, a link to a volume not mounted, a file
 * system's error) may be a good checkpoint: skipped as damaged, it would
 * have the run start over above it and prune it, so it is an error. One
 * gone since the directory was listed (pruned by a run training beside an
 * evaluation) is passed over: *GONE. O_NONBLOCK, as ddp_safetensors_open
 * has it: a FIFO is not waited on. */
static DdpStatus open_candidate(const char *path, int *gone)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        return DDP_OK;
    }
    int err = errno;
    struct stat sb;
    if (err == ENOENT && lstat(path, &sb) != 0) { /* not even a dangling link */
        *gone = 1;
        return DDP_OK;
    }
    /* what the user can mend is bad input; a file system's own error a
     * failure, which a restart may outlive */
    const int users = err == EACCES || err == EPERM || err == ENOENT || err == ELOOP || err == ENOTDIR;
    return DDP_ERR(users ? DDP_BAD_INPUT : DDP_FAIL, "%s: cannot open: %s: a checkpoint that may be good is not "
                   "skipped (make it readable, or move it out of the --save directory)", path, strerror(err));
}

DdpStatus ddp_checkpoint_latest(const DdpNet *net, const char *dir, int64_t after, DdpCheckpointRun *run,
                                DdpCheckpointState *state, char *path, size_t len, int *found,
                                char *skipped, size_t skipped_len, int *unusable)
{
    *found = 0;
    *unusable = 0;
    if (skipped_len)
        skipped[0] = '\0';
    Candidate *c;
    int n;
    DDP_CHECK(list_dir(net, dir, 0, 1, &c, &n));
    DdpStatus st = DDP_OK;
    for (int i = 0; i < n && !*found && st == DDP_OK && c[i].step > after; i++) {
        snprintf(path, len, "%s/%s", dir, c[i].name);
        int gone = 0;
        st = open_candidate(path, &gone);
        if (st != DDP_OK || gone)
            continue;
        int foreign;
        DdpStatus one = load(net, path, run, state, &foreign);
        if (one == DDP_OK)
            *found = 1;
        else if (foreign == FOREIGN_NET && c[i].legacy)
            ddp_error_clear(); /* an earlier version's name may be another net's, which shares the directory */
        else if (foreign)
            st = one;
        else {
            size_t used = strlen(skipped);
            if (used < skipped_len)
                snprintf(skipped + used, skipped_len - used, "%s\n", ddp_error_message());
            ddp_error_clear();
            ++*unusable;
        }
    }
    list_free(c, n);
    return st;
}

DdpStatus ddp_checkpoint_step(const DdpNet *net, const char *path, int64_t *step)
{
    DdpSafetensors *f;
    DDP_CHECK(ddp_safetensors_open_header(path, &f));
    DdpCheckpointRun run;
    int foreign;
    DdpStatus st = read_header(net, f, &run, &foreign);
    ddp_safetensors_close(f);
    if (st == DDP_OK)
        *step = run.step;
    return st;
}

/* 1 when PATH is a safetensors file with a checkpoint's metadata; with NET,
 * one of that net's name. */
static int is_checkpoint(const char *path, const DdpNet *net)
{
    DdpSafetensors *f;
    if (ddp_safetensors_open_header(path, &f) != DDP_OK) {
        ddp_error_clear();
        return 0;
    }
    const char *format = ddp_safetensors_meta(f, "format"), *name = ddp_safetensors_meta(f, "net");
    int yes = format && strcmp(format, FORMAT) == 0 &&
              (!net || (name && strcmp(name, net->name ? net->name : "") == 0));
    ddp_safetensors_close(f);
    return yes;
}

int ddp_checkpoint_file_is_one(const char *path) { return is_checkpoint(path, NULL); }

DdpStatus ddp_checkpoint_find(const DdpNet *net, const char *dir, int64_t after, char *path, size_t len,
                              int *found)
{
    *found = 0;
    Candidate *c;
    int n;
    DDP_CHECK(list_dir(net, dir, 0, 1, &c, &n));
    for (int i = 0; i < n && !*found && c[i].step > after; i++) {
        snprintf(path, len, "%s/%s", dir, c[i].name);
        *found = !c[i].legacy || is_checkpoint(path, net);
    }
    list_free(c, n);
    return DDP_OK;
}

/* One setting's check: saved and now, and the flag that sets it. */
static DdpStatus same(const char *path, const char *what, long long saved, long long now, const char *flag)
{
    if (saved == now)
        return DDP_OK;
    return DDP_ERR(DDP_BAD_INPUT, "--resume %s: the checkpoint was made with %s %lld, this run has %lld; "
                   "a run continues bit for bit only with the same settings (%s %lld)",
                   path, what, saved, now, flag, saved);
}

DdpStatus ddp_checkpoint_check_run(const char *path, const DdpCheckpointRun *saved, const DdpCheckpointRun *now)
{
    DDP_CHECK(same(path, "seed", (long long)saved->seed, (long long)now->seed, "--seed"));
    /* The world size may change: a step is the same global batch, the same
     * samples, whichever ranks they are dealt to (the sampler's order
     * depends on seed and epoch alone, and the epoch's steps on the global
     * batch alone), so the step count is the position at any world size. */
    const long long saved_global = (long long)(saved->batch * saved->world);
    const long long now_global = (long long)(now->batch * now->world);
    if (saved_global != now_global)
        return DDP_ERR(DDP_BAD_INPUT, "--resume %s: the checkpoint was made with a global batch of %lld (%lld per rank "
                       "x %lld rank%s), this run has %lld (%lld x %lld); a run continues bit for bit only with the "
                       "same global batch (--global-batch %lld, on any world size that divides it)", path,
                       saved_global, (long long)saved->batch, (long long)saved->world, saved->world == 1 ? "" : "s",
                       now_global, (long long)now->batch, (long long)now->world, saved_global);
    DDP_CHECK(same(path, "--no-sync-every", saved->no_sync_every, now->no_sync_every, "--no-sync-every"));
    /* the step is a place in epochs of the checkpoint's samples: on another
     * training set it would be another place, and its epoch's report wrong */
    if (saved->train_samples && now->train_samples && saved->train_samples != now->train_samples)
        return DDP_ERR(DDP_BAD_INPUT, "--resume %s: the checkpoint was made on a training set of %lld samples, this "
                       "run's --data has %lld; a run continues bit for bit only on the same data", path,
                       (long long)saved->train_samples, (long long)now->train_samples);
    if (saved->shuffle != now->shuffle)
        return DDP_ERR(DDP_BAD_INPUT, "--resume %s: the checkpoint was made %s --no-shuffle; resume it the same way",
                       path, saved->shuffle ? "without" : "with");
    if (saved->precision != now->precision)
        return DDP_ERR(DDP_BAD_INPUT, "--resume %s: the checkpoint was made with %s %s, this run has %s; "
                       "a run continues bit for bit only with the same settings (%s %s)", path, "--precision",
                       ddp_precision_name(saved->precision), ddp_precision_name(now->precision), "--precision",
                       ddp_precision_name(saved->precision));
    /* On GPUs cuDNN runs other kernels on channels-last values; on CPUs the
     * two layouts take the same steps, but a checkpoint does not say where
     * it was made */
    if (saved->channels_last != now->channels_last)
        return DDP_ERR(DDP_BAD_INPUT, "--resume %s: the checkpoint was made by a program built with ddpc --layout %s, "
                       "this one was built with --layout %s; a run continues bit for bit only in the same layout "
                       "(build it again with --layout %s)", path, layout_name(saved->channels_last),
                       layout_name(now->channels_last), layout_name(saved->channels_last));
    return DDP_OK;
}
