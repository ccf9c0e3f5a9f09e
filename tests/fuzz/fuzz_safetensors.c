/*
 * fuzz_safetensors.c: libFuzzer harness for the readers of weights and
 * checkpoint files (runtime/safetensors.c, weights.c, checkpoint.c), which
 * take whatever file --init and --resume are pointed at.
 *
 * Each input is written to a memfd and read through /proc/self/fd/N, the
 * same path the program takes (fopen, fstat, fread), with no file system
 * traffic. The input goes three ways: ddp_safetensors_open and, when it opens,
 * every reader function; ddp_weights_load into a small net's host arrays; and
 * ddp_checkpoint_load of the same net. Beyond "no crash, no sanitizer report"
 * it checks what callers rely on when a file opens: every tensor lies inside
 * the file's data, aligned to its element size and as long as dtype and shape
 * say; lookup by name finds the same entry; expecting a tensor as it is
 * always succeeds, and once every tensor was expected none is unused; what
 * loaded can be written back after more steps (ddp_weights_tensors).
 *
 * The net is tests/unit/tiny_net.c's layout made small (fc.weight [3,4],
 * fc.bias [3] trainable; norm.running_mean, norm.running_var [3] buffers;
 * norm.num_batches_tracked a step count; SGD, one optimizer slot), so valid
 * checkpoints stay a few hundred bytes. `-write_seeds=DIR` writes the seed
 * corpus (a checkpoint and weights files of this net, valid; a hand-made file
 * with a misaligned tensor, metadata escapes and unknown fields) and exits:
 *
 *   make build/fuzz_safetensors
 *   build/fuzz_safetensors -write_seeds=tests/fuzz/safetensors-seeds
 *   mkdir -p /tmp/st-corpus && build/fuzz_safetensors -max_total_time=600 /tmp/st-corpus \
 *       tests/fuzz/safetensors-seeds
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"   // ddp_checkpoint_load, ddp_checkpoint_save, ddp_checkpoint_check_run
#include "conv_choices.h" // DDP_CONV_CHOICES_TEXT, ddp_conv_choices_parse
#include "model.h"        // DdpNet, DdpParamInfo
#include "safetensors.h"  // ddp_safetensors_open, _count, _tensor, _find, _meta, _expect, _write
#include "weights.h"      // ddp_weights_load, ddp_weights_export
#include "fuzz_check.h"  // CHECK

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { CLASSES = 3, FEATURES = 4, N_PARAM_FLOATS = CLASSES * FEATURES + CLASSES, N_BUFFER_FLOATS = 2 * CLASSES };

static const DdpParamInfo params[] = {
    {.name = "fc.weight", .ndim = 2, .shape = {CLASSES, FEATURES}, .numel = CLASSES * FEATURES,
     .trainable = 1, .offset = 0, .init = DDP_INIT_KAIMING_UNIFORM, .fan_in = FEATURES},
    {.name = "fc.bias", .ndim = 1, .shape = {CLASSES}, .numel = CLASSES, .trainable = 1,
     .offset = CLASSES * FEATURES, .init = DDP_INIT_KAIMING_UNIFORM, .fan_in = FEATURES},
    {.name = "norm.running_mean", .ndim = 1, .shape = {CLASSES}, .numel = CLASSES, .offset = 0,
     .init = DDP_INIT_ZEROS},
    {.name = "norm.running_var", .ndim = 1, .shape = {CLASSES}, .numel = CLASSES, .offset = CLASSES,
     .init = DDP_INIT_ONES},
    {.name = "norm.num_batches_tracked", .ndim = 0, .numel = 1, .is_step_count = 1, .init = DDP_INIT_ZEROS},
};
enum { N_PARAMS = sizeof params / sizeof params[0] };

static const DdpNet net = {
    .name = "tiny",
    .hash = "0123456789abcdef",
    .sample_rank = 1,
    .sample_shape = {FEATURES},
    .sample_numel = FEATURES,
    .num_classes = CLASSES,
    .params = params,
    .n_params = N_PARAMS,
    .n_param_floats = N_PARAM_FLOATS,
    .n_buffer_floats = N_BUFFER_FLOATS,
    .opt_slots = 1,
    .train = {.batch = 2, .epochs = 1, .optimizer = DDP_OPT_SGD, .lr = 0.1, .momentum = 0.9, .seed = 7},
    .arena_per_sample = CLASSES,
};

/* The input as a file: a memfd, rewritten for each input, and its path. */
static int input_fd = -1;
static char input_path[64];

static const char *as_file(const uint8_t *data, size_t size)
{
    if (input_fd < 0) {
        input_fd = memfd_create("fuzz_safetensors", 0);
        CHECK(input_fd >= 0);
        snprintf(input_path, sizeof input_path, "/proc/self/fd/%d", input_fd);
    }
    CHECK(ftruncate(input_fd, 0) == 0);
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(input_fd, data + done, size - done, (off_t)done);
        CHECK(w > 0);
        done += (size_t)w;
    }
    return input_path;
}

/* Every reader function on an open file, and what callers rely on. */
static void walk(DdpSafetensors *f)
{
    int n = ddp_safetensors_count(f);
    CHECK(n >= 0);
    CHECK(ddp_safetensors_tensor(f, -1) == NULL && ddp_safetensors_tensor(f, n) == NULL);
    volatile unsigned char sink = 0;
    for (int i = 0; i < n; i++) {
        const DdpTensor *t = ddp_safetensors_tensor(f, i);
        CHECK(t && t->name && (unsigned)t->dtype < DDP_DTYPE_COUNT);
        CHECK(t->ndim >= 0 && t->ndim <= DDP_TENSOR_MAX_DIMS);
        CHECK(ddp_safetensors_find(f, t->name) == t);
        size_t elem = ddp_dtype_size(t->dtype), bytes = elem;
        for (int d = 0; d < t->ndim; d++) {
            CHECK(t->shape[d] >= 0);
            bytes *= (size_t)t->shape[d];
        }
        CHECK(bytes == t->nbytes);
        CHECK(t->nbytes == 0 || (t->data && (uintptr_t)t->data % elem == 0));
        for (size_t b = 0; b < t->nbytes; b++)  /* ASan: every byte is inside an allocation */
            sink ^= ((const unsigned char *)t->data)[b];
    }
    (void)sink;
    static const char *const keys[] = {"format", "version", "net", "hash", "step", "crc32", "", "__metadata__"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const char *v = ddp_safetensors_meta(f, keys[k]);
        CHECK(!v || strlen(v) < (size_t)1 << 30);
    }

    /* Wrong expectations fail without marking anything used. */
    const void *data;
    for (int i = 0; i < n; i++) {
        const DdpTensor *t = ddp_safetensors_tensor(f, i);
        DdpDtype other = (DdpDtype)((t->dtype + 1) % DDP_DTYPE_COUNT);
        CHECK(ddp_safetensors_expect(f, t->name, other, t->shape, t->ndim, &data) == DDP_BAD_INPUT && !data);
        if (t->ndim < DDP_TENSOR_MAX_DIMS) {
            int64_t longer[DDP_TENSOR_MAX_DIMS + 1] = {0};
            memcpy(longer, t->shape, sizeof t->shape);
            longer[t->ndim] = 1;
            CHECK(ddp_safetensors_expect(f, t->name, t->dtype, longer, t->ndim + 1, &data) == DDP_BAD_INPUT);
        }
    }
    CHECK(ddp_safetensors_check_unused(f) == (n ? DDP_BAD_INPUT : DDP_OK));
    /* Shapes of every rank, the net's and beyond the limit, for the messages. */
    int64_t shape[DDP_TENSOR_MAX_DIMS + 1] = {3, 4, 1, 1, 1, 1, 1, 1, 1};
    for (int ndim = 0; ndim <= DDP_TENSOR_MAX_DIMS + 1; ndim++)
        (void)ddp_safetensors_expect(f, "fc.weight", DDP_DTYPE_F32, shape, ndim, &data);

    /* Expecting each tensor as it is succeeds; then none is unused. */
    for (int i = 0; i < n; i++) {
        const DdpTensor *t = ddp_safetensors_tensor(f, i);
        CHECK(ddp_safetensors_expect(f, t->name, t->dtype, t->shape, t->ndim, &data) == DDP_OK);
        CHECK(data == t->data);
        if (i == n / 2)  /* half way: the rest are listed */
            CHECK(ddp_safetensors_check_unused(f) == (i + 1 < n ? DDP_BAD_INPUT : DDP_OK));
    }
    CHECK(ddp_safetensors_check_unused(f) == DDP_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = as_file(data, size);

    DdpSafetensors *f;
    DdpStatus st = ddp_safetensors_open(path, &f);
    CHECK(st == DDP_OK || st == DDP_BAD_INPUT);
    CHECK((st == DDP_OK) == (f != NULL));
    if (f) {
        CHECK(strcmp(ddp_safetensors_path(f), path) == 0);
        walk(f);
        ddp_safetensors_close(f);
    }

    static float host_params[N_PARAM_FLOATS], host_buffers[N_BUFFER_FLOATS], opt_state[N_PARAM_FLOATS];
    static int64_t counts[N_PARAMS];
    DdpTensor out[N_PARAMS];
    int64_t steps_at[N_PARAMS];
    st = ddp_weights_load(&net, path, host_params, host_buffers, counts);
    CHECK(st == DDP_OK || st == DDP_BAD_INPUT);
    if (st == DDP_OK)  /* what --export or --save writes after a step: counts plus steps taken */
        ddp_weights_tensors(&net, host_params, host_buffers, counts, 1, out, steps_at);

    DdpCheckpointRun run;
    static char conv_choices[DDP_CONV_CHOICES_TEXT]; /* cuDNN's timed algorithms, read and checked */
    DdpCheckpointState state = {.params = host_params, .buffers = host_buffers, .opt_state = opt_state,
                                .counts = counts, .conv_choices = conv_choices};
    st = ddp_checkpoint_load(&net, path, &run, &state);
    CHECK(st == DDP_OK || st == DDP_BAD_INPUT);
    if (st == DDP_OK) {
        DdpConvChoices record; /* a record the load let through reads */
        memset(&record, 0, sizeof record);
        CHECK(!conv_choices[0] || ddp_conv_choices_parse(conv_choices, &record) == DDP_OK);
        ddp_conv_choices_free(&record);
        CHECK(run.step >= 0 && run.batch >= 1 && run.world >= 1 && run.no_sync_every >= 1);
        CHECK(run.shuffle == 0 || run.shuffle == 1);
        CHECK(ddp_checkpoint_check_run(path, &run, &run) == DDP_OK);
        ddp_weights_tensors(&net, host_params, host_buffers, counts, run.step < INT64_MAX ? run.step + 1 : run.step,
                            out, steps_at);
    }
    return 0;
}

/* ---- the seed corpus ------------------------------------------------------------ */

static void write_file(const char *dir, const char *name, const void *bytes, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *out = fopen(path, "wb");
    CHECK(out && fwrite(bytes, 1, len, out) == len && fclose(out) == 0);
}

/* A file by hand: what our writer never makes (a misaligned tensor, escapes,
 * unknown fields, metadata after the tensors). */
static void write_handmade(const char *dir)
{
    static const char header[] =
        "{\"a\\u00e9\\ud83d\\ude00\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
        "\"x\":[{\"y\":[true,false,null,-1.5e+3]}]},"
        " \"fc.bias\" : {\"shape\":[3],\"dtype\":\"F32\",\"data_offsets\":[1,13]},"
        "\"e\":{\"dtype\":\"BF16\",\"shape\":[0,7],\"data_offsets\":[13,13]},"
        "\"__metadata__\":{\"format\":\"ddpc\",\"k\\\"\\n\":\"v\\t\\/\"}}";
    size_t hlen = sizeof header - 1;
    unsigned char buf[sizeof header + 8 + 13];
    for (int b = 0; b < 8; b++)
        buf[b] = (unsigned char)((uint64_t)hlen >> (8 * b));
    memcpy(buf + 8, header, hlen);
    static const float bias[3] = {0.5f, -1, 2};
    buf[8 + hlen] = 7;
    memcpy(buf + 8 + hlen + 1, bias, sizeof bias);
    write_file(dir, "handmade.safetensors", buf, 8 + hlen + 13);
    /* The smallest file that opens. */
    static const unsigned char empty[] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    write_file(dir, "empty.safetensors", empty, sizeof empty);
}

static void write_seeds(const char *dir)
{
    CHECK(mkdir(dir, 0777) == 0 || access(dir, W_OK) == 0);
    float p[N_PARAM_FLOATS], b[N_BUFFER_FLOATS], opt[N_PARAM_FLOATS];
    int64_t counts[N_PARAMS] = {0};
    for (int i = 0; i < N_PARAM_FLOATS; i++) {
        p[i] = (float)(i - 7) / 8;
        opt[i] = (float)i / 16;
    }
    for (int i = 0; i < N_BUFFER_FLOATS; i++)
        b[i] = (float)i / 4;
    counts[N_PARAMS - 1] = 2;

    char path[4096];
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    CHECK(ddp_weights_export(&net, path, p, b, counts, 5) == DDP_OK);

    /* The same weights as PyTorch might save them in double precision. */
    double p64[N_PARAM_FLOATS], b64[N_BUFFER_FLOATS];
    for (int i = 0; i < N_PARAM_FLOATS; i++)
        p64[i] = p[i];
    for (int i = 0; i < N_BUFFER_FLOATS; i++)
        b64[i] = b[i];
    int64_t tracked = 7;
    const DdpTensor t64[] = {
        {.name = "fc.weight", .dtype = DDP_DTYPE_F64, .ndim = 2, .shape = {CLASSES, FEATURES}, .data = p64},
        {.name = "fc.bias", .dtype = DDP_DTYPE_F64, .ndim = 1, .shape = {CLASSES}, .data = p64 + CLASSES * FEATURES},
        {.name = "norm.running_mean", .dtype = DDP_DTYPE_F64, .ndim = 1, .shape = {CLASSES}, .data = b64},
        {.name = "norm.running_var", .dtype = DDP_DTYPE_F64, .ndim = 1, .shape = {CLASSES}, .data = b64 + CLASSES},
        {.name = "norm.num_batches_tracked", .dtype = DDP_DTYPE_I64, .ndim = 0, .data = &tracked},
    };
    snprintf(path, sizeof path, "%s/weights-f64.safetensors", dir);
    CHECK(ddp_safetensors_write(path, t64, N_PARAMS, NULL, 0) == DDP_OK);

    /* A checkpoint; ddp_checkpoint_save names it, so it is written in a
     * scratch directory and copied. */
    char scratch[] = "/tmp/fuzz-safetensors-XXXXXX";
    CHECK(mkdtemp(scratch));
    DdpCheckpointRun run = {.step = 11, .seed = 7, .batch = 2, .world = 2, .no_sync_every = 1, .shuffle = 1};
    char record[] = "cudnn=91900|device=NVIDIA H200|workspace=4096|0:1.3.1,1.3.1,1.3.1,0.3.1,0.3.1,0.3.1";
    DdpCheckpointState state = {.params = p, .buffers = b, .opt_state = opt, .counts = counts,
                                .conv_choices = record}; /* cuDNN's timed algorithms, for the parser */
    char saved[4096];
    CHECK(ddp_checkpoint_save(&net, scratch, &run, &state, saved, sizeof saved) == DDP_OK);
    FILE *in = fopen(saved, "rb");
    static unsigned char bytes[1 << 16];
    size_t len = in ? fread(bytes, 1, sizeof bytes, in) : 0;
    CHECK(in && len > 0 && len < sizeof bytes && fclose(in) == 0);
    write_file(dir, "checkpoint.safetensors", bytes, len);
    CHECK(unlink(saved) == 0 && rmdir(scratch) == 0);
    /* It must load as is, or the fuzzer never gets past the checksum. */
    DdpCheckpointRun back;
    CHECK(ddp_checkpoint_load(&net, as_file(bytes, len), &back, &state) == DDP_OK);

    write_handmade(dir);
}

/* -write_seeds=DIR: write the seed corpus and exit (before libFuzzer reads its flags). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const char flag[] = "-write_seeds=";
    for (int i = 1; i < *argc; i++)
        if (strncmp((*argv)[i], flag, sizeof flag - 1) == 0) {
            write_seeds((*argv)[i] + sizeof flag - 1);
            exit(0);
        }
    return 0;
}
