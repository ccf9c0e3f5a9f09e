/*
 * flags.c: the generated program's command line.
 *
 * One table describes every flag: its name, what kind of value it takes, the
 * range it accepts, where in DdpFlags it lands, and its --help line. Parsing,
 * range checking, the messages and --help all read that table, so a flag's
 * accepted range and the range its message quotes cannot drift apart.
 *
 * Checking happens here, at start-up, and names the flag: a bad value found
 * after an hour of training, or reported by whatever code first trips over
 * it, would cost the user far more than a strict parser does.
 */
#include "flags.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "buckets.h"  // DDP_BUCKET_LEAST_BYTES, _MOST_BYTES: --bucket-cap-mb's range, the .net's
#include "dataset.h"  // DDP_DATA_DEFAULT_DIR
#include "loader.h"   // DDP_LOADER_MOST_WORKERS: --workers' default, in its help
#include "numbers.h"  // ddp_parse_int, ddp_parse_u64, ddp_parse_real, DDP_SEED_MAX
#include "suggest.h"  // ddp_suggest_nearest

typedef enum {
    KIND_PATH,     /* a non-empty string */
    KIND_INT,      /* int64_t in [min, max] */
    KIND_SEED,     /* uint64_t, any */
    KIND_REAL,     /* double, finite, above lo (or at it unless lo_open), at most hi */
    KIND_SWITCH,   /* no value; sets an int to `min` */
    KIND_BACKEND,  /* nccl | mpi */
    KIND_PRECISION, /* fp32 | tf32 | bf16 (precision.h) */
    KIND_ADDRESS,  /* env:// | tcp://HOST:PORT */
    KIND_OPTIONAL, /* --resume [PATH]: sets an int to 1, and a string if a value follows */
} FlagKind;

typedef struct {
    const char *name;    /* without the leading "--" */
    FlagKind kind;
    const char *metavar; /* in --help */
    size_t offset;       /* of the field in DdpFlags */
    int64_t min, max;    /* KIND_INT; KIND_SWITCH stores min */
    double lo, hi;       /* KIND_REAL */
    int lo_open;         /* KIND_REAL: lo itself is refused */
    int single;          /* KIND_REAL: used as a float, so a value no float holds (1e39, 1e-50) is refused */
    DdpAgree agree;      /* across ranks: flags.h */
    const char *help;
} FlagSpec;

#define AT(field) offsetof(DdpFlags, field)
/* A macro's value as text, for a help line that gives a limit the code holds */
#define TEXT_OF_(x) #x
#define TEXT_OF(x) TEXT_OF_(x)

static const FlagSpec specs[DDP_FLAG_COUNT] = {
    /* the path may differ from host to host: the ranks compare the data's sizes and digest instead */
    [DDP_FLAG_DATA] = {"data", KIND_PATH, "DIR", AT(data),
        .agree = DDP_AGREE_LOCAL,
        .help = "the data set: MNIST-format IDX files (in DIR, DIR/raw, DIR/MNIST/raw or DIR/FashionMNIST/raw), "
                "CIFAR-10/100's binary files (in DIR, DIR/cifar-10-batches-bin or DIR/cifar-100-binary), NumPy "
                "arrays (DIR/x_train.npy, y_train.npy, x_test.npy, y_test.npy) or PNG and JPEG images in a "
                "folder per class (DIR/train/CLASS/, DIR/val/CLASS/)"},
    [DDP_FLAG_COARSE_LABELS] = {"coarse-labels", KIND_SWITCH, NULL, AT(coarse_labels), .min = 1,
        .agree = DDP_AGREE_VALUE,
        .help = "CIFAR-100: train on its 20 superclasses (the coarse labels) instead of its 100 classes"},
    [DDP_FLAG_CHANNELS_FIRST] = {"channels-first", KIND_SWITCH, NULL, AT(channels_first), .min = 1,
        .agree = DDP_AGREE_VALUE,
        .help = "NumPy: the images are N x C x H x W (needed only where the shape does not tell)"},
    [DDP_FLAG_CHANNELS_LAST] = {"channels-last", KIND_SWITCH, NULL, AT(channels_last), .min = 1,
        .agree = DDP_AGREE_VALUE,
        .help = "NumPy: the images are N x H x W x C (needed only where the shape does not tell)"},
    [DDP_FLAG_WORKERS] = {"workers", KIND_INT, "N", AT(workers), .min = 0, .max = DDP_FLAGS_MAX_WORKERS,
        .agree = DDP_AGREE_LOCAL,
        .help = "threads making training batches ahead of the step (default: 1 on CPUs, whose step has the cores; "
                "on GPUs the cores a rank has, less one, up to " TEXT_OF(DDP_LOADER_MOST_WORKERS) "); 0: each batch "
                "made when the step needs it"},
    [DDP_FLAG_NO_AUGMENT] = {"no-augment", KIND_SWITCH, NULL, AT(augment), .min = 0,
        .agree = DDP_AGREE_VALUE,
        .help = "train without the data { } block's random crop and flips (normalize stays)"},
    [DDP_FLAG_EPOCHS] = {"epochs", KIND_INT, "N", AT(epochs), .min = 1, .max = DDP_FLAGS_MAX_EPOCHS,
        .agree = DDP_AGREE_VALUE,
        .help = "passes over the training set"},
    [DDP_FLAG_BATCH_SIZE] = {"batch-size", KIND_INT, "N", AT(batch_size), .min = 1, .max = DDP_FLAGS_MAX_BATCH,
        .agree = DDP_AGREE_VALUE,
        .help = "samples per step on each rank"},
    [DDP_FLAG_GLOBAL_BATCH] = {"global-batch", KIND_INT, "N", AT(global_batch), .min = 1, .max = DDP_FLAGS_MAX_BATCH,
        .agree = DDP_AGREE_VALUE,
        .help = "samples per step on all ranks together, N / world size each: any world size that divides N "
                "trains alike (instead of --batch-size)"},
    [DDP_FLAG_LR] = {"lr", KIND_REAL, "X", AT(lr), .lo = 0, .hi = FLT_MAX, .single = 1,
        .agree = DDP_AGREE_VALUE,
        .help = "peak learning rate of the schedule"},
    [DDP_FLAG_SEED] = {"seed", KIND_SEED, "N", AT(seed),
        .agree = DDP_AGREE_VALUE,
        .help = "seeds the initial weights, the shuffling, dropout and the data { } block's crops and flips"},
    [DDP_FLAG_PRECISION] = {"precision", KIND_PRECISION, "fp32|tf32|bf16", AT(precision),
        .agree = DDP_AGREE_VALUE,
        .help = "round the operands of every conv and linear layer to this format (to nearest, ties to even) before "
                "they are multiplied; weights, sums and gradients stay FP32"},
    /* LOCAL: a rank may ask for it alone, and then every rank runs call by
     * call (ddp_dist_check_same: NCCL needs a collective captured on every
     * rank or on none) */
    [DDP_FLAG_NO_CUDA_GRAPH] = {"no-cuda-graph", KIND_SWITCH, NULL, AT(cuda_graph), .min = 0,
        .agree = DDP_AGREE_LOCAL,
        .help = "queue each step's kernels and library calls one by one rather than replay a CUDA graph of the "
                "step made once per batch shape (a CPU build's steps replay their twin of it)"},
    /* LOCAL: every rank checks it at start-up, as --log's, but rank 0 alone
     * takes from it and writes it (trainer.c), the others take what rank 0
     * runs; the path may differ from host to host */
    [DDP_FLAG_CONV_ALGORITHMS] = {"conv-algorithms", KIND_PATH, "FILE", AT(conv_algorithms),
        .agree = DDP_AGREE_LOCAL,
        .help = "GPU builds: run the convs' cuDNN algorithms recorded in FILE; where FILE does not exist yet, time "
                "them at start-up (as DDP_CUDNN_BENCHMARK=1) and record them there, so that every run given FILE "
                "runs the same fast algorithms and makes the same bytes"},
    [DDP_FLAG_MAX_STEPS] = {"max-steps", KIND_INT, "N", AT(max_steps), .min = 0, .max = INT64_MAX,
        .agree = DDP_AGREE_VALUE,
        .help = "stop at global step N, counted from the start of training"},
    [DDP_FLAG_NO_SHUFFLE] = {"no-shuffle", KIND_SWITCH, NULL, AT(shuffle), .min = 0,
        .agree = DDP_AGREE_VALUE,
        .help = "visit the training samples in file order every epoch"},
    [DDP_FLAG_EVAL_EVERY] = {"eval-every", KIND_INT, "N", AT(eval_every), .min = 0, .max = INT64_MAX,
        .agree = DDP_AGREE_VALUE,
        .help = "evaluate every N steps too (0: at the end of each epoch only)"},
    [DDP_FLAG_LOG] = {"log", KIND_PATH, "FILE.jsonl", AT(log),
        .agree = DDP_AGREE_GIVEN,
        .help = "write a start record, then each epoch's and evaluation's numbers, as JSON lines"},
    [DDP_FLAG_TENSORBOARD] = {"tensorboard", KIND_PATH, "DIR", AT(tensorboard),
        .agree = DDP_AGREE_GIVEN,
        .help = "write loss, lr, accuracy and samples/s as TensorBoard event files into DIR"},
    [DDP_FLAG_LOG_EVERY] = {"log-every", KIND_INT, "N", AT(log_every), .min = 0, .max = INT64_MAX,
        .agree = DDP_AGREE_VALUE,
        .help = "gather each rank's time per step (data, forward, backward, all-reduce, optimizer) every N steps "
                "into --log and --tensorboard, naming a straggler (0: at the end of each epoch)"},
    [DDP_FLAG_EXPORT] = {"export", KIND_PATH, "FILE.safetensors", AT(export_path),
        .agree = DDP_AGREE_GIVEN,
        .help = "write the weights after the last step"},
    [DDP_FLAG_INIT] = {"init", KIND_PATH, "FILE.safetensors", AT(init),
        .agree = DDP_AGREE_GIVEN,
        .help = "start from these weights instead of a seeded initialisation"},
    [DDP_FLAG_EVAL_ONLY] = {"eval-only", KIND_SWITCH, NULL, AT(eval_only), .min = 1,
        .agree = DDP_AGREE_VALUE,
        .help = "evaluate the weights of --init (or --resume) on the test set instead of training: loss, accuracy "
                "and each class's accuracy; the confusion matrix into --log"},
    [DDP_FLAG_PREDICT] = {"predict", KIND_PATH, "FILE", AT(predict),
        .agree = DDP_AGREE_LOCAL,
        .help = "print the likeliest classes of each image of FILE (a PNG or JPEG image, IDX images, or a NumPy "
                "array of them) with the weights of --init, instead of training; one rank"},
    [DDP_FLAG_TOP] = {"top", KIND_INT, "K", AT(top), .min = 1, .max = 256,
        .agree = DDP_AGREE_LOCAL,
        .help = "--predict: the K likeliest classes of each input"},
    [DDP_FLAG_JSON] = {"json", KIND_SWITCH, NULL, AT(json), .min = 1,
        .agree = DDP_AGREE_LOCAL,
        .help = "--predict: one JSON line per input"},
    [DDP_FLAG_NPROC_PER_NODE] = {"nproc-per-node", KIND_INT, "N", AT(nproc_per_node), .min = 1, .max = 1024,
        .agree = DDP_AGREE_LOCAL,
        .help = "start N local ranks, as mp.spawn does"},
    [DDP_FLAG_MAX_RESTARTS] = {"max-restarts", KIND_INT, "N", AT(max_restarts), .min = 0, .max = 1000,
        .agree = DDP_AGREE_LOCAL,
        .help = "with --nproc-per-node and --save: when a rank fails, start every rank again from the newest "
                "checkpoint, at most N times (torchrun's --max-restarts)"},
    /* LOCAL: ranks that chose different backends never form one group; the
     * flag alone may differ (given on one rank, the build's default on another) */
    [DDP_FLAG_BACKEND] = {"backend", KIND_BACKEND, "nccl|mpi", AT(backend),
        .agree = DDP_AGREE_LOCAL,
        .help = "how ranks talk"},
    [DDP_FLAG_INIT_METHOD] = {"init-method", KIND_ADDRESS, "env://|tcp://HOST:PORT", AT(init_method),
        .agree = DDP_AGREE_LOCAL,
        .help = "how ranks find each other"},
    [DDP_FLAG_RANK] = {"rank", KIND_INT, "R", AT(rank), .min = 0, .max = DDP_MAX_RANKS - 1,
        .agree = DDP_AGREE_LOCAL,
        .help = "this process's rank (with --world-size)"},
    /* LOCAL: the world size itself, from the flag or a launcher's variables,
     * is compared apart (distributed.c); a flag next to WORLD_SIZE may differ */
    [DDP_FLAG_WORLD_SIZE] = {"world-size", KIND_INT, "W", AT(world_size), .min = 1, .max = DDP_MAX_RANKS,
        .agree = DDP_AGREE_LOCAL,
        .help = "ranks in all"},
    /* the .net's bucket line's range (buckets.h), in MiB */
    [DDP_FLAG_BUCKET_CAP_MB] = {"bucket-cap-mb", KIND_REAL, "X", AT(bucket_cap_mb),
        .lo = DDP_BUCKET_LEAST_BYTES / 1048576.0, .hi = DDP_BUCKET_MOST_BYTES / 1048576.0, .agree = DDP_AGREE_VALUE,
        .help = "gradient all-reduce bucket cap in MiB"},
    [DDP_FLAG_NO_SYNC_EVERY] = {"no-sync-every", KIND_INT, "K", AT(no_sync_every), .min = 1, .max = 1000000,
        .agree = DDP_AGREE_VALUE,
        .help = "accumulate gradients over K steps between all-reduces"},
    [DDP_FLAG_SAVE] = {"save", KIND_PATH, "DIR", AT(save),
        .agree = DDP_AGREE_GIVEN,
        .help = "write checkpoints into DIR"},
    [DDP_FLAG_SAVE_EVERY] = {"save-every", KIND_INT, "N", AT(save_every), .min = 1, .max = INT64_MAX,
        .agree = DDP_AGREE_VALUE,
        .help = "checkpoint every N steps (default: each epoch)"},
    [DDP_FLAG_RESUME] = {"resume", KIND_OPTIONAL, "[PATH]", AT(resume_path),
        .agree = DDP_AGREE_GIVEN,
        .help = "continue from a checkpoint (default: the latest in --save)"},
    [DDP_FLAG_TIMEOUT] = {"timeout", KIND_REAL, "SECONDS", AT(timeout), .lo = 0, .lo_open = 1, .hi = 31536000,
        .agree = DDP_AGREE_LOCAL,
        .help = "how long a rank waits for the others before failing"},
    [DDP_FLAG_QUIET] = {"quiet", KIND_SWITCH, NULL, AT(quiet), .min = 1,
        .agree = DDP_AGREE_LOCAL,
        .help = "print nothing but errors"},
    [DDP_FLAG_HELP] = {"help", KIND_SWITCH, NULL, AT(help), .min = 1, .agree = DDP_AGREE_LOCAL,
        .help = "show this help"},
};

/* The field a spec writes, typed. */
#define FIELD(flags, spec, type) ((type *)((char *)(flags) + (spec)->offset))

void ddp_flags_init(DdpFlags *f, const DdpTrainConfig *train)
{
    memset(f, 0, sizeof *f);
    f->epochs = train->epochs;
    f->batch_size = train->batch;
    f->lr = train->lr;
    f->seed = train->seed;
    f->precision = train->precision;
    f->max_steps = -1;
    f->shuffle = 1;
    f->cuda_graph = 1;
    f->workers = -1;
    f->augment = 1;
    f->rank = -1;
    f->world_size = -1;
    f->bucket_cap_mb = (double)train->bucket_cap_bytes / (1024.0 * 1024.0);
    f->no_sync_every = 1;
    f->timeout = DDP_FLAGS_DEFAULT_TIMEOUT;
    f->top = DDP_FLAGS_DEFAULT_TOP;
}

/* ---- "did you mean" ------------------------------------------------------- */

enum { SUGGEST_MAX = 32 };

/* The flag nearest to WORD[0..len) (no dashes), by the rule ddpc's own
 * suggestions follow (suggest.c); words over SUGGEST_MAX bytes get none. */
static const char *suggest(const char *word, size_t len)
{
    if (len == 0 || len > SUGGEST_MAX)
        return NULL;
    char copy[SUGGEST_MAX + 1]; /* WORD may go on with "=value" */
    memcpy(copy, word, len);
    copy[len] = '\0';
    const char *names[DDP_FLAG_COUNT];
    for (int i = 0; i < DDP_FLAG_COUNT; i++)
        names[i] = specs[i].name;
    return ddp_suggest_nearest(copy, names, DDP_FLAG_COUNT);
}

/* ---- values ----------------------------------------------------------------- */

/* What SPEC accepts, for messages: "a whole number from 1 to 1000000". */
static const char *accepted(const FlagSpec *spec, char *buf, size_t len)
{
    switch (spec->kind) {
    case KIND_PATH:
        snprintf(buf, len, "a %s", strcmp(spec->metavar, "DIR") == 0 ? "directory" : "file name");
        break;
    case KIND_INT:
        if (spec->max == INT64_MAX)
            snprintf(buf, len, "a whole number >= %lld", (long long)spec->min);
        else
            snprintf(buf, len, "a whole number from %lld to %lld", (long long)spec->min, (long long)spec->max);
        break;
    case KIND_SEED:
        snprintf(buf, len, "a whole number from 0 to %llu", (unsigned long long)DDP_SEED_MAX);
        break;
    case KIND_REAL:
        if (spec->single)
            snprintf(buf, len, "a number %s %.15g that a float holds (0, or %.2g to %.2g)", spec->lo_open ? ">" : ">=",
                     spec->lo, (double)FLT_TRUE_MIN, (double)FLT_MAX);
        else if (isinf(spec->hi))
            snprintf(buf, len, "a number %s %.15g", spec->lo_open ? ">" : ">=", spec->lo);
        else
            snprintf(buf, len, "a number %s %.15g and at most %.15g", spec->lo_open ? ">" : ">=", spec->lo,
                     spec->hi);
        break;
    case KIND_BACKEND:
        snprintf(buf, len, "nccl or mpi");
        break;
    case KIND_PRECISION:
        snprintf(buf, len, "%s, %s or %s", ddp_precision_names[0], ddp_precision_names[1], ddp_precision_names[2]);
        break;
    case KIND_ADDRESS:
        snprintf(buf, len, "env:// or tcp://HOST:PORT");
        break;
    case KIND_OPTIONAL:
        snprintf(buf, len, "a checkpoint path, or nothing");
        break;
    case KIND_SWITCH:
        snprintf(buf, len, "no value");
        break;
    }
    return buf;
}

static DdpStatus bad_value(const FlagSpec *spec, const char *value)
{
    char what[128];
    return DDP_ERR(DDP_BAD_INPUT, "--%s expects %s, got '%s'", spec->name, accepted(spec, what, sizeof what),
                   value);
}

/* env:// or tcp://...: the form only. The host and the port are checked
 * where they are used (topology.c), whose messages say which part is wrong. */
static int valid_address(const char *s)
{
    return strcmp(s, "env://") == 0 || strncmp(s, "tcp://", 6) == 0;
}

/* Stores VALUE for SPEC, checked. */
static DdpStatus store(DdpFlags *f, const FlagSpec *spec, const char *value)
{
    switch (spec->kind) {
    case KIND_PATH:
        if (!*value)
            return bad_value(spec, value);
        *FIELD(f, spec, const char *) = value;
        return DDP_OK;
    case KIND_INT: {
        int64_t v;
        if (!ddp_parse_int(value, &v) || v < spec->min || v > spec->max)
            return bad_value(spec, value);
        *FIELD(f, spec, int64_t) = v;
        return DDP_OK;
    }
    case KIND_SEED: {
        uint64_t v;
        if (!ddp_parse_u64(value, &v)) /* any uint64: DDP_SEED_MAX */
            return bad_value(spec, value);
        *FIELD(f, spec, uint64_t) = v;
        return DDP_OK;
    }
    case KIND_REAL: {
        double v;
        if (!ddp_parse_real(value, &v) || v < spec->lo ||
            (spec->lo_open && v == spec->lo) ||
            v > spec->hi || (spec->single && v != 0 && (float)v == 0))
            return bad_value(spec, value);
        *FIELD(f, spec, double) = v;
        return DDP_OK;
    }
    case KIND_BACKEND:
        if (strcmp(value, "nccl") == 0)
            f->backend = DDP_BACKEND_NCCL;
        else if (strcmp(value, "mpi") == 0)
            f->backend = DDP_BACKEND_MPI;
        else
            return bad_value(spec, value);
        return DDP_OK;
    case KIND_PRECISION:
        if (!ddp_precision_parse(value, FIELD(f, spec, DdpPrecision)))
            return bad_value(spec, value);
        return DDP_OK;
    case KIND_ADDRESS:
        if (!valid_address(value))
            return bad_value(spec, value);
        *FIELD(f, spec, const char *) = value;
        return DDP_OK;
    case KIND_OPTIONAL:
        f->resume = 1;
        if (value && !*value)
            return bad_value(spec, value);
        *FIELD(f, spec, const char *) = value;
        return DDP_OK;
    case KIND_SWITCH:
        *FIELD(f, spec, int) = (int)spec->min;
        return DDP_OK;
    }
    return DDP_ERR(DDP_FAIL, "internal error: flag kind %d", (int)spec->kind);
}

/* ---- the command line ---------------------------------------------------------- */

static DdpStatus unknown(const char *arg)
{
    if (arg[0] != '-')
        return DDP_ERR(DDP_BAD_INPUT, "unexpected argument '%s': every option starts with --", arg);
    const char *word = arg + strspn(arg, "-");
    const char *near = suggest(word, strcspn(word, "="));
    if (near)
        return DDP_ERR(DDP_BAD_INPUT, "unknown option '%.*s'; did you mean '--%s'?", (int)strcspn(arg, "="), arg,
                       near);
    return DDP_ERR(DDP_BAD_INPUT, "unknown option '%.*s' (--help lists them)", (int)strcspn(arg, "="), arg);
}

/* The spec named by ARG ("--name" or "--name=value"), or NULL. */
static const FlagSpec *lookup(const char *arg, const char **inline_value)
{
    *inline_value = NULL;
    if (strncmp(arg, "--", 2) != 0)
        return NULL;
    const char *name = arg + 2;
    size_t len = strcspn(name, "=");
    for (int i = 0; i < DDP_FLAG_COUNT; i++)
        if (strlen(specs[i].name) == len && strncmp(specs[i].name, name, len) == 0) {
            if (name[len] == '=')
                *inline_value = name + len + 1;
            return &specs[i];
        }
    return NULL;
}

/* How a flag's value reads in a message: quoted, or said to be absent (a
 * bare --resume). */
static const char *as_given(const char *value, char *buf, size_t len)
{
    if (!*value)
        return "without a value";
    snprintf(buf, len, "as '%s'", value);
    return buf;
}

/* The first of the N flags IDS that F was given, or DDP_FLAG_COUNT. */
static DdpFlagId first_given(const DdpFlags *f, const DdpFlagId *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (f->given[ids[i]])
            return ids[i];
    return DDP_FLAG_COUNT;
}
#define N_IDS(ids) (sizeof (ids) / sizeof (ids)[0])

DdpStatus ddp_flags_parse(DdpFlags *f, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            f->help = 1;
            f->given[DDP_FLAG_HELP] = 1;
            return DDP_OK;
        }
    /* A flag given again replaces its value, as argparse's do (a script's
     * defaults, then the user's), but for --resume: its bare form and
     * --resume PATH name different checkpoints, and the one that came last
     * (say the bare one, the newest) is not surely the one meant. Each
     * flag's value as first given, "" for none. */
    const char *first[DDP_FLAG_COUNT] = {0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value;
        const FlagSpec *spec = lookup(arg, &value);
        if (!spec)
            return unknown(arg);
        /* A following "--word" is the next flag, not this one's value: `--data
         * --epochs 3` is a forgotten value far more often than a directory
         * called --epochs (which --data=--epochs can still name). */
        const char *next = i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 ? argv[i + 1] : NULL;
        if (spec->kind == KIND_SWITCH) {
            if (value)
                return DDP_ERR(DDP_BAD_INPUT, "--%s takes no value, got '%s'", spec->name, arg);
        } else if (spec->kind == KIND_OPTIONAL) {
            if (!value && next && next[0] != '-')
                value = argv[++i];
        } else if (!value) {
            char what[128];
            if (!next)
                return DDP_ERR(DDP_BAD_INPUT, "--%s needs a value: %s", spec->name,
                               accepted(spec, what, sizeof what));
            value = argv[++i];
        }
        const int which = (int)(spec - specs);
        if (spec->kind == KIND_OPTIONAL && f->given[which] && strcmp(first[which], value ? value : "") != 0) {
            char was[96], now[96];
            return DDP_ERR(DDP_BAD_INPUT, "--%s given twice, %s and %s: give it once", spec->name,
                           as_given(first[which], was, sizeof was), as_given(value ? value : "", now, sizeof now));
        }
        DDP_CHECK(store(f, spec, value));
        f->given[which] = 1;
        first[which] = value ? value : "";
    }

    /* What single flags cannot check. */
    if (f->given[DDP_FLAG_BATCH_SIZE] && f->given[DDP_FLAG_GLOBAL_BATCH])
        return DDP_ERR(DDP_BAD_INPUT, "--batch-size (each rank's) and --global-batch (all ranks') both set the "
                                      "batch: give one");
    if (f->given[DDP_FLAG_RANK] && !f->given[DDP_FLAG_WORLD_SIZE])
        return DDP_ERR(DDP_BAD_INPUT, "--rank needs --world-size");
    if (f->given[DDP_FLAG_RANK] && f->rank >= f->world_size)
        return DDP_ERR(DDP_BAD_INPUT, "--rank %lld is out of range for --world-size %lld (ranks are 0 to %lld)",
                       (long long)f->rank, (long long)f->world_size, (long long)f->world_size - 1);
    if (f->given[DDP_FLAG_MAX_RESTARTS] && !f->given[DDP_FLAG_NPROC_PER_NODE])
        return DDP_ERR(DDP_BAD_INPUT, "--max-restarts needs --nproc-per-node N: it restarts the ranks that launcher "
                                      "starts (under mpirun or srun, restart the job there)");
    if (f->given[DDP_FLAG_MAX_RESTARTS] && !f->given[DDP_FLAG_SAVE])
        return DDP_ERR(DDP_BAD_INPUT, "--max-restarts needs --save DIR: the ranks restart from its newest checkpoint");
    /* a restart takes DIR's newest, which is this run's only when the run
     * began from DIR's newest too (bare --resume) or from an unused DIR */
    if (f->given[DDP_FLAG_MAX_RESTARTS] && f->resume_path)
        return DDP_ERR(DDP_BAD_INPUT, "--max-restarts restarts from the newest checkpoint in --save %s, not from "
                                      "--resume %s: give --resume alone, with %s's newest (copy the file there under its "
                                      "checkpoint-NET-STEP.safetensors name, which --resume looks for)",
                       f->save, f->resume_path, f->save);
    if (f->given[DDP_FLAG_SAVE_EVERY] && !f->given[DDP_FLAG_SAVE])
        return DDP_ERR(DDP_BAD_INPUT, "--save-every needs --save DIR");
    /* a checkpoint named holds the weights: --init's would be loaded, then
     * replaced without a word (bare --resume may well find nothing: then
     * --init's weights are the start, as a restarted run's first try) */
    if (f->given[DDP_FLAG_INIT] && f->resume_path)
        return DDP_ERR(DDP_BAD_INPUT, "--init %s and --resume %s both give the weights: give one", f->init,
                       f->resume_path);
    if (f->resume && !f->resume_path && !f->save)
        return DDP_ERR(DDP_BAD_INPUT, "--resume without a PATH takes the newest checkpoint in --save DIR: "
                                      "give one or the other");
    /* weights never trained are nothing to evaluate */
    if (f->eval_only && !f->given[DDP_FLAG_INIT] && !f->resume)
        return DDP_ERR(DDP_BAD_INPUT, "--eval-only evaluates given weights: add --init FILE.safetensors (or --resume "
                                      "PATH)");
    if (f->predict && !f->given[DDP_FLAG_INIT])
        return DDP_ERR(DDP_BAD_INPUT, "--predict classifies with given weights: add --init FILE.safetensors");
    if (f->predict && f->eval_only)
        return DDP_ERR(DDP_BAD_INPUT, "--predict and --eval-only: give one");
    if ((f->given[DDP_FLAG_TOP] || f->json) && !f->predict)
        return DDP_ERR(DDP_BAD_INPUT, "--%s says how --predict prints: add --predict FILE",
                       f->given[DDP_FLAG_TOP] ? "top" : "json");
    /* what would be accepted and then do nothing */
    static const DdpFlagId predict_writes_none[] = {DDP_FLAG_SAVE, DDP_FLAG_RESUME, DDP_FLAG_LOG,
                                                    DDP_FLAG_TENSORBOARD, DDP_FLAG_EXPORT,
                                                    DDP_FLAG_CONV_ALGORITHMS};
    DdpFlagId unread = f->predict ? first_given(f, predict_writes_none, N_IDS(predict_writes_none)) : DDP_FLAG_COUNT;
    if (unread != DDP_FLAG_COUNT)
        return DDP_ERR(DDP_BAD_INPUT, "--predict prints its lines and nothing else: leave out --%s", specs[unread].name);
    /* a training's flags, which a command line copied from one brings along,
     * and which --predict and --eval-only would pass unread; --predict reads
     * no data set and meets no ranks either (--data would pass unread even
     * where it names nothing) */
    static const DdpFlagId trains_only[] = {
        DDP_FLAG_WORKERS,    DDP_FLAG_NO_AUGMENT, DDP_FLAG_EPOCHS,    DDP_FLAG_LR,            DDP_FLAG_SEED,
        DDP_FLAG_MAX_STEPS,  DDP_FLAG_NO_SHUFFLE, DDP_FLAG_EVAL_EVERY, DDP_FLAG_LOG_EVERY,    DDP_FLAG_BUCKET_CAP_MB,
        DDP_FLAG_NO_SYNC_EVERY};
    static const DdpFlagId predict_meets_none[] = {DDP_FLAG_DATA, DDP_FLAG_COARSE_LABELS, DDP_FLAG_TIMEOUT};
    unread = f->predict ? first_given(f, predict_meets_none, N_IDS(predict_meets_none)) : DDP_FLAG_COUNT;
    if (unread == DDP_FLAG_COUNT && (f->predict || f->eval_only))
        unread = first_given(f, trains_only, N_IDS(trains_only));
    if (unread != DDP_FLAG_COUNT)
        return DDP_ERR(DDP_BAD_INPUT, f->predict ? "--predict classifies the inputs of its FILE and trains nothing: "
                       "leave out --%s" : "--eval-only evaluates the weights given and trains nothing: leave out --%s",
                       specs[unread].name);
    if (f->predict && (f->nproc_per_node > 1 || f->world_size > 1))
        return DDP_ERR(DDP_BAD_INPUT, "--predict runs on one rank: leave out --%s",
                       f->nproc_per_node > 1 ? "nproc-per-node" : "world-size");
    if (f->eval_only && f->save && !f->resume)
        return DDP_ERR(DDP_BAD_INPUT, "--eval-only --save %s: an evaluation writes no checkpoint; add --resume to "
                                      "evaluate the newest there", f->save);
    if (f->eval_only && f->tensorboard)
        return DDP_ERR(DDP_BAD_INPUT, "--eval-only draws no curves in --tensorboard: its numbers go to --log");
    return DDP_OK;
}

void ddp_flags_apply(const DdpFlags *f, DdpTrainConfig *train)
{
    train->epochs = f->epochs;
    if (f->given[DDP_FLAG_GLOBAL_BATCH])
        train->batch = f->global_batch, train->batch_global = 1;
    else if (f->given[DDP_FLAG_BATCH_SIZE])
        train->batch = f->batch_size, train->batch_global = 0;
    train->lr = f->lr;
    train->seed = f->seed;
    train->precision = f->precision;
    if (f->given[DDP_FLAG_BUCKET_CAP_MB])
        train->bucket_cap_bytes = (int64_t)(f->bucket_cap_mb * 1024.0 * 1024.0);
}

void ddp_flags_allow_tf32(DdpFlags *f, const char *allow_tf32, int gpu)
{
    if (gpu && allow_tf32 && *allow_tf32 && strcmp(allow_tf32, "0") != 0 && !f->given[DDP_FLAG_PRECISION] &&
        f->precision == DDP_PRECISION_FP32)
        f->precision = DDP_PRECISION_TF32;
}

void ddp_flags_usage(FILE *out, const char *prog, const char *name, const DdpTrainConfig *train)
{
    fprintf(out, "usage: %s [options]\n\nTrains the net '%s' on IDX, CIFAR, NumPy or image-folder data, data-parallel.\n\n", prog, name);
    for (int i = 0; i < DDP_FLAG_COUNT; i++) {
        const FlagSpec *s = &specs[i];
        char left[64], dflt[96] = "";
        snprintf(left, sizeof left, "--%s%s%s", s->name, s->metavar ? " " : "", s->metavar ? s->metavar : "");
        switch (i) {
        case DDP_FLAG_DATA: snprintf(dflt, sizeof dflt, " (default %s)", DDP_DATA_DEFAULT_DIR); break;
        case DDP_FLAG_EPOCHS: snprintf(dflt, sizeof dflt, " (default %lld)", (long long)train->epochs); break;
        case DDP_FLAG_BATCH_SIZE:
            if (!train->batch_global)
                snprintf(dflt, sizeof dflt, " (default %lld)", (long long)train->batch);
            break;
        case DDP_FLAG_GLOBAL_BATCH:
            if (train->batch_global)
                snprintf(dflt, sizeof dflt, " (default %lld)", (long long)train->batch);
            break;
        case DDP_FLAG_LR: snprintf(dflt, sizeof dflt, " (default %g)", train->lr); break;
        case DDP_FLAG_SEED: snprintf(dflt, sizeof dflt, " (default %llu)", (unsigned long long)train->seed); break;
        case DDP_FLAG_PRECISION: snprintf(dflt, sizeof dflt, " (default %s)", ddp_precision_name(train->precision)); break;
        case DDP_FLAG_BUCKET_CAP_MB:
            snprintf(dflt, sizeof dflt, " (default %g)", (double)train->bucket_cap_bytes / (1024.0 * 1024.0));
            break;
        case DDP_FLAG_TIMEOUT: snprintf(dflt, sizeof dflt, " (default %g)", DDP_FLAGS_DEFAULT_TIMEOUT); break;
        case DDP_FLAG_TOP: snprintf(dflt, sizeof dflt, " (default %d)", DDP_FLAGS_DEFAULT_TOP); break;
        default: break;
        }
        fprintf(out, "  %-38s %s%s\n", left, s->help, dflt);
    }
    fprintf(out, "\nEvery option also takes the form --option=value. Topology comes from the\n"
                 "environment torchrun, mpirun or srun set, or from the options above.\n");
}

DdpAgree ddp_flags_agreement(DdpFlagId id)
{
    return id >= 0 && id < DDP_FLAG_COUNT ? specs[id].agree : DDP_AGREE_UNSET;
}

const char *ddp_flags_name(DdpFlagId id)
{
    return id >= 0 && id < DDP_FLAG_COUNT ? specs[id].name : "?";
}

/* The shortest %g spelling of V that reads back as V: "0.01", not 0.01000000000000000021. */
static void shortest_real(double v, char *buf, size_t len)
{
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, len, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

void ddp_flags_agreed_value(const DdpFlags *f, DdpFlagId id, char *buf, size_t len)
{
    const FlagSpec *spec = &specs[id];
    if (spec->agree == DDP_AGREE_GIVEN) {
        int given = spec->kind == KIND_OPTIONAL ? f->resume : *FIELD(f, spec, const char *const) != NULL;
        snprintf(buf, len, "%s", given ? "given" : "not given");
        return;
    }
    switch (spec->kind) {
    case KIND_INT: snprintf(buf, len, "%lld", (long long)*FIELD(f, spec, const int64_t)); break;
    case KIND_SEED: snprintf(buf, len, "%llu", (unsigned long long)*FIELD(f, spec, const uint64_t)); break;
    case KIND_REAL: shortest_real(*FIELD(f, spec, const double), buf, len); break;
    case KIND_SWITCH: snprintf(buf, len, "%s", f->given[id] ? "given" : "not given"); break;
    case KIND_BACKEND:
        snprintf(buf, len, "%s", f->backend == DDP_BACKEND_NCCL ? "nccl" : f->backend == DDP_BACKEND_MPI ? "mpi"
                                                                                                : "the build's");
        break;
    case KIND_PRECISION: snprintf(buf, len, "%s", ddp_precision_name(*FIELD(f, spec, const DdpPrecision))); break;
    case KIND_PATH:
    case KIND_ADDRESS:
    case KIND_OPTIONAL: {
        const char *v = *FIELD(f, spec, const char *const);
        snprintf(buf, len, "%s", v ? v : "not given");
        break;
    }
    }
}

const char *ddp_prog_name(const char *argv0)
{
    if (!argv0 || !*argv0)
        return "ddp";
    const char *slash = strrchr(argv0, '/');
    return slash && slash[1] ? slash + 1 : argv0;
}

/* Appends WORD to BUF at *USED, in single quotes unless it is made only of
 * characters a shell takes as they are. */
static void put_shell_word(char *buf, size_t len, size_t *used, const char *word)
{
    static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%";
    char quoted[4096];
    size_t q = 0;
    int needs = !*word || word[strspn(word, plain)] != '\0';
    if (needs)
        quoted[q++] = '\'';
    for (const char *c = word; *c && q + 5 < sizeof quoted; c++) {
        if (*c == '\'' && needs) { /* 'it'\''s' */
            memcpy(quoted + q, "'\\''", 4);
            q += 4;
        } else {
            quoted[q++] = *c;
        }
    }
    if (needs)
        quoted[q++] = '\'';
    quoted[q] = '\0';
    if (*used >= len)
        return;
    int n = snprintf(buf + *used, len - *used, "%s%s", *used ? " " : "", quoted);
    *used += n > 0 ? (size_t)n : 0;
    if (*used >= len && len > 4)
        memcpy(buf + len - 4, "...", 4);
}

void ddp_flags_resume_command(int argc, char **argv, char *buf, size_t len)
{
    size_t used = 0;
    if (len)
        buf[0] = '\0';
    for (int i = 0; i < argc; i++) {
        if (i > 0 && strcmp(argv[i], "--resume") == 0) {
            if (i + 1 < argc && argv[i + 1][0] != '-') /* its PATH: the parser's rule */
                i++;
            continue;
        }
        if (i > 0 && strncmp(argv[i], "--resume=", 9) == 0)
            continue;
        put_shell_word(buf, len, &used, argv[i]);
    }
    put_shell_word(buf, len, &used, "--resume");
}
