/*
 * flags.h: the generated program's command line (SPEC.md, "The generated
 * program"), parsed and range-checked into one struct.
 *
 * Parsing never prints and never exits: a bad flag is DDP_BAD_INPUT with a
 * message naming the flag and what it accepts, and ddp_main turns that into
 * "PROG: error: MESSAGE" and exit status 2.
 */
#ifndef DDPRT_FLAGS_H
#define DDPRT_FLAGS_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"   // DdpTrainConfig
#include "topology.h"  // DDP_MAX_RANKS
#include "status.h"  // DdpStatus

/* One per flag, in the order --help lists them. */
typedef enum {
    DDP_FLAG_DATA,
    DDP_FLAG_COARSE_LABELS,
    DDP_FLAG_CHANNELS_FIRST,
    DDP_FLAG_CHANNELS_LAST,
    DDP_FLAG_WORKERS,
    DDP_FLAG_NO_AUGMENT,
    DDP_FLAG_EPOCHS,
    DDP_FLAG_BATCH_SIZE,
    DDP_FLAG_GLOBAL_BATCH,
    DDP_FLAG_LR,
    DDP_FLAG_SEED,
    DDP_FLAG_PRECISION,
    DDP_FLAG_NO_CUDA_GRAPH,
    DDP_FLAG_CONV_ALGORITHMS,
    DDP_FLAG_MAX_STEPS,
    DDP_FLAG_NO_SHUFFLE,
    DDP_FLAG_EVAL_EVERY,
    DDP_FLAG_LOG,
    DDP_FLAG_TENSORBOARD,
    DDP_FLAG_LOG_EVERY,
    DDP_FLAG_EXPORT,
    DDP_FLAG_INIT,
    DDP_FLAG_EVAL_ONLY,
    DDP_FLAG_PREDICT,
    DDP_FLAG_TOP,
    DDP_FLAG_JSON,
    DDP_FLAG_NPROC_PER_NODE,
    DDP_FLAG_MAX_RESTARTS,
    DDP_FLAG_BACKEND,
    DDP_FLAG_INIT_METHOD,
    DDP_FLAG_RANK,
    DDP_FLAG_WORLD_SIZE,
    DDP_FLAG_BUCKET_CAP_MB,
    DDP_FLAG_NO_SYNC_EVERY,
    DDP_FLAG_SAVE,
    DDP_FLAG_SAVE_EVERY,
    DDP_FLAG_RESUME,
    DDP_FLAG_TIMEOUT,
    DDP_FLAG_QUIET,
    DDP_FLAG_HELP,
    DDP_FLAG_COUNT
} DdpFlagId;

typedef enum { DDP_BACKEND_AUTO, DDP_BACKEND_NCCL, DDP_BACKEND_MPI } DdpBackend;

/* Whether a flag must be the same on every rank. Every flag that changes
 * what a rank sends, or how many collectives it makes, or whether rank 0
 * does something the others must know of, is one: ddp_dist_check_same
 * compares them all at start-up, by this classification, so a new flag is
 * checked as soon as its table row says so (and test_flags fails on a row
 * that says nothing). */
typedef enum {
    DDP_AGREE_UNSET,  /* not classified: an internal error */
    DDP_AGREE_VALUE,  /* the same value everywhere (the net's default counts as a value) */
    DDP_AGREE_GIVEN,  /* given on every rank or on none; a path may differ from host to host */
    DDP_AGREE_LOCAL,  /* this rank's own business (--rank, --timeout, --quiet...) */
} DdpAgree;

/* Range limits, shared with --help and the tests. */
#define DDP_FLAGS_MAX_EPOCHS 1000000
#define DDP_FLAGS_MAX_BATCH (1 << 20)
/* --workers: more threads than this only contend for the cores */
#define DDP_FLAGS_MAX_WORKERS 64
/* --top: as many as torchvision's top-5 accuracy looks at. */
#define DDP_FLAGS_DEFAULT_TOP 5
/* --timeout: ten minutes, as PyTorch's NCCL process groups wait. */
#define DDP_FLAGS_DEFAULT_TIMEOUT 600.0

typedef struct {
    const char *data;         /* NULL: DDP_DATA_DEFAULT_DIR */
    int coarse_labels;        /* CIFAR-100's 20 superclasses instead of its 100 classes */
    int channels_first, channels_last; /* NumPy images: N x C x H x W or N x H x W x C (neither: the shape tells) */
    int64_t workers;          /* threads making training batches ahead (loader.h); -1: not given */
    int augment;              /* 0 with --no-augment: the data { } block's crop and flips left out */
    int64_t epochs;           /* the net's train { epochs } unless given */
    int64_t batch_size;       /* per rank; the net's train { batch } unless given */
    int64_t global_batch;     /* all ranks together, shared evenly; 0 unless given */
    double lr;                /* the net's optimizer lr unless given */
    uint64_t seed;            /* the net's train { seed } unless given */
    DdpPrecision precision;   /* the net's train { precision } unless given */
    int cuda_graph;           /* 0 with --no-cuda-graph: each step's work queued call by call */
    const char *conv_algorithms; /* --conv-algorithms FILE: cuDNN's, taken or timed and written; or NULL */
    int64_t max_steps;        /* -1: no limit */
    int shuffle;              /* 0 with --no-shuffle */
    int64_t eval_every;       /* steps; 0: at the end of each epoch only */
    int64_t log_every;        /* steps between the ranks' times in the log; 0: each epoch's end */
    const char *log;          /* --log FILE.jsonl, or NULL */
    const char *tensorboard;  /* --tensorboard DIR, or NULL */
    const char *export_path;  /* --export FILE.safetensors, or NULL */
    const char *init;         /* --init FILE.safetensors, or NULL */
    int eval_only;            /* --eval-only: the test set once, with --init's or --resume's weights */
    const char *predict;      /* --predict FILE: its inputs' classes with --init's weights, or NULL */
    int64_t top;              /* --predict: classes shown per input */
    int json;                 /* --predict: JSON lines */

    /* Several ranks and checkpoints. */
    int64_t nproc_per_node;   /* 0: not given */
    int64_t max_restarts;     /* --nproc-per-node's restarts from the newest checkpoint; 0: none */
    DdpBackend backend;
    const char *init_method;  /* "env://" or "tcp://HOST:PORT"; NULL: not given */
    int64_t rank;             /* -1: not given */
    int64_t world_size;       /* -1: not given */
    double bucket_cap_mb;     /* the net's train { bucket } unless given */
    int64_t no_sync_every;    /* 1: all-reduce every step */
    const char *save;         /* checkpoint directory, or NULL */
    int64_t save_every;       /* steps; 0: at the end of each epoch */
    int resume;               /* --resume given */
    const char *resume_path;  /* its optional PATH; NULL: the latest in --save */
    double timeout;           /* seconds a collective may wait */

    int quiet, help;
    unsigned char given[DDP_FLAG_COUNT]; /* 1 for each flag on the command line */
} DdpFlags;

/* The defaults: TRAIN's values where the net sets them, SPEC.md's otherwise. */
void ddp_flags_init(DdpFlags *flags, const DdpTrainConfig *train);

/* Parses ARGV[1..argc) over the defaults in FLAGS: `--flag value` and
 * `--flag=value`, the last of a repeated flag winning. With --help (or -h)
 * anywhere it only sets flags->help. DDP_BAD_INPUT names the flag: an unknown
 * one with the nearest known name ("unknown option '--epoch'; did you mean
 * '--epochs'?"), a missing or out-of-range value with the range accepted. */
DdpStatus ddp_flags_parse(DdpFlags *flags, int argc, char **argv);

/* The training configuration the run uses: TRAIN with the flags that override
 * it (epochs, batch, lr, seed, precision, bucket cap) applied. */
void ddp_flags_apply(const DdpFlags *flags, DdpTrainConfig *train);

/* DDP_ALLOW_TF32 (its value ALLOW_TF32, NULL when unset): set and not "0",
 * on a GPU build (GPU 1), the older spelling of --precision tf32, where
 * --precision is not given and the net's precision is fp32. CPU builds
 * ignored it before there was a precision and still do: a variable left set
 * must not change their bits. */
void ddp_flags_allow_tf32(DdpFlags *flags, const char *allow_tf32, int gpu);

/* --help: usage and every flag, with the defaults of the net NAME. */
void ddp_flags_usage(FILE *out, const char *prog, const char *name, const DdpTrainConfig *train);

/* How flag ID must agree across ranks, and its name (without "--"). */
DdpAgree ddp_flags_agreement(DdpFlagId id);
const char *ddp_flags_name(DdpFlagId id);

/* Flag ID's value as ranks compare it, into BUF: "0.01", "2", "on"/"off"
 * for a switch, "given"/"not given" for DDP_AGREE_GIVEN. */
void ddp_flags_agreed_value(const DdpFlags *flags, DdpFlagId id, char *buf, size_t len);

/* The command that resumes a run started with ARGV (ARGC words), into BUF
 * (LEN bytes, cut short with "..." if need be): ARGV less any --resume and
 * its PATH, then a bare --resume (the newest checkpoint in --save DIR), each
 * word quoted for a POSIX shell where it needs to be. */
void ddp_flags_resume_command(int argc, char **argv, char *buf, size_t len);

/* The program's name for messages: ARGV0's last path component ("ddp" if none). */
const char *ddp_prog_name(const char *argv0);

#endif
