/*
 * ddpc.h: the one header of the compiler, split by the file that implements
 * each part, in pipeline order:
 *
 *   text --(grammar/net.l, net.y via parse.c)--> AST --(sema.c, layers.c,
 *   train.c)--> Net (the checked IR) --(summary.c, and later passes)--> output
 *
 * Data flows one way. The AST is what the user wrote, with locations, and no
 * meaning attached; the Net is what it means: a straight-line list of nodes
 * over numbered values with every shape, parameter and count already worked
 * out, so that no later pass re-derives one.
 *
 * Memory: everything of one compilation lives in one Arena and is freed with
 * it, which is what lets the parser drop values during error recovery and the
 * fuzzer run millions of inputs without leaking.
 */
#ifndef DDPC_H
#define DDPC_H

#include <limits.h>  // PATH_MAX
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "buckets.h"  // DdpBucket, ddp_buckets_plan: the runtime's bucket planner
#include "suggest.h"  // ddp_suggest_nearest: the runtime's "did you mean", shared with its flags
#include "precision.h"  // DdpPrecision, ddp_precision_names: the runtime's own, one list of names

#define DDPC_VERSION "0.1.0"

/* The elements of array A (an array, not a pointer), as an int. */
#define DDPC_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Whether WORD is one of SET[0..n) (a table of words or keys, a list of
 * directories). */
static inline bool ddpc_word_in(const char *word, const char *const *set, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(word, set[i]) == 0)
            return true;
    return false;
}

//
// arena.c
//

typedef struct ArenaBlock ArenaBlock;
typedef struct {
    ArenaBlock *head;
} Arena;

void *arena_alloc(Arena *a, size_t size); /* zeroed; aborts only if malloc fails */
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void arena_free(Arena *a);

//
// diag.c: compiler-style messages (file:line:col: error: ... + line + caret)
//

/* A span of source text. Lines and columns are 1-based; last_column is one
 * past the span's last byte. This is bison's YYLTYPE, so the parser fills it. */
typedef struct {
    int first_line, first_column, last_line, last_column;
} Loc;

typedef enum { SEV_ERROR, SEV_WARNING, SEV_NOTE } Severity;

typedef struct Diagnostic Diagnostic;
typedef struct {
    const char *file;      /* as the user named it */
    const char *src;       /* the whole file, for quoting lines */
    size_t len;
    int errors, warnings;
    Diagnostic *list;      /* buffered, printed sorted by position */
    int count, cap;
    FILE *out;             /* NULL: keep quiet (the fuzzer) */
    size_t *line_starts;   /* built on first use by diag_line */
    int n_lines;
} Diag;

#define DIAG_MAX_PRINTED_ERRORS 50

void diag_init(Diag *d, const char *file, const char *src, size_t len, FILE *out);
void diag_at(Diag *d, Severity sev, Loc loc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A fault of the whole file, with no position: "file: error: ...". */
void diag_file(Diag *d, Severity sev, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prints what was gathered, in source order, and forgets it. */
void diag_flush(Diag *d);
void diag_free(Diag *d);
/* Line LINE of the source (1-based), without its line end. */
bool diag_line(Diag *d, int line, const char **start, size_t *len);
/* A user-supplied word made safe to quote: printable, at most 40 bytes. */
const char *diag_quote(Arena *a, const char *s);

//
// parse.c: the AST, built by grammar/net.y
//

typedef enum {
    VAL_INT,   /* 64 */
    VAL_FLOAT, /* 0.5, 5e-4 */
    VAL_SIZE,  /* 25MB: i holds bytes */
    VAL_DIMS,  /* 1x28x28 */
    VAL_ARROW, /* 1->32: dims[0] -> dims[1] */
    VAL_WORD,  /* relu, k5, nobias, same */
    VAL_LIST,  /* 0.9,0.999: items */
} ValueKind;

#define MAX_DIMS 4

typedef struct Value Value;
struct Value {
    ValueKind kind;
    Loc loc;
    const char *text;       /* as written */
    bool overflow;          /* a number too large for int64 / double */
    int64_t i;              /* VAL_INT, VAL_SIZE */
    double f;               /* VAL_FLOAT (and VAL_INT, converted) */
    int ndims;              /* VAL_DIMS, VAL_ARROW */
    int64_t dims[MAX_DIMS];
    Value *items;           /* VAL_LIST: the elements, chained by next */
    Value *next;
};

/* One argument: positional (`2`, `1->32`, `k5`) or `key=value`. */
typedef struct Arg Arg;
struct Arg {
    const char *key;        /* NULL when positional */
    Loc key_loc;
    Value *val;
    Loc loc;                /* the whole argument */
    bool used;              /* set by sema; an argument nobody used is reported */
    Arg *next;
};

/* One statement: `[label:] word args [{ body }]`. A block holds statements;
 * a statement the parser could not read stays in the list as is_error, so
 * later passes know something is missing there and don't pile on. */
typedef struct Stmt Stmt;
struct Stmt {
    Loc loc;                /* the word through the last argument */
    const char *label;      /* `stem:`, or NULL */
    Loc label_loc;
    const char *word;
    Loc word_loc;
    Arg *args;
    bool has_block;
    Loc open_loc;           /* of `{` */
    Stmt *body;
    bool unclosed;          /* its '}' is missing: the body ran to the end of the file */
    bool is_error;
    Stmt *next;
};

typedef struct {
    Stmt *stmts;
    int syntax_errors;
} Ast;

/* Parses SRC (LEN bytes; NULs and any bytes allowed) into AST. Returns false
 * when there were syntax errors (reported through D); AST then holds what
 * could be read. */
bool parse_net(Arena *a, Diag *d, const char *src, size_t len, Ast *ast);

/* What the scanner and parser share; lives in the scanner's `extra`. */
#define PARSE_MAX_NESTING 1000
typedef struct {
    Arena *arena;
    Diag *diag;
    Stmt *result;
    Loc open_braces[PARSE_MAX_NESTING]; /* where each unclosed '{' is */
    int depth;
    bool unmatched_close;               /* the last token was a '}' with no '{' */
    bool closed_at_eof;                 /* blocks were closed by the end of the file */
    const char *last_text;              /* the last token's text, for messages */
    int line, column;                   /* the scanner's position */
} ParseState;

//
// sema.c, layers.c: the AST checked and lowered into the IR
//

typedef enum {
    OP_INPUT,
    OP_CONV,
    OP_MAXPOOL,
    OP_AVGPOOL,
    OP_GLOBAL_AVGPOOL,
    OP_LINEAR,
    OP_FLATTEN,
    OP_RELU,
    OP_LEAKY_RELU,
    OP_SIGMOID,
    OP_TANH,
    OP_GELU,
    OP_DROPOUT,
    OP_BATCHNORM,
    OP_RESIDUAL_ADD, /* the join of `residual { }`: out = in + skip */
    OP_LOG_SOFTMAX,
    OP_LOSS,
    OP_COUNT
} OpKind;

typedef enum { LOSS_CROSS_ENTROPY, LOSS_NLL, LOSS_MSE } LossKind;
enum { LOSS_KINDS = LOSS_MSE + 1 };

/* Each LossKind as a net writes it (`loss nll`), in enum order. */
static const char *const loss_words[LOSS_KINDS] = {[LOSS_CROSS_ENTROPY] = "cross_entropy", [LOSS_NLL] = "nll", [LOSS_MSE] = "mse"};

/* The shape of one sample (the batch dimension is implicit): rank 1 is
 * features, rank 3 is channels x height x width. Rank 0 means unknown, after
 * an error: checks that need it are skipped instead of piling on. */
typedef struct {
    int rank;
    int64_t d[3];
} Shape;

typedef enum {
    PARAM_WEIGHT,
    PARAM_BIAS,
    PARAM_RUNNING_MEAN,
    PARAM_RUNNING_VAR,
    PARAM_NUM_BATCHES_TRACKED,
    PARAM_ROLE_COUNT
} ParamRole;

/* A tensor of the state_dict, named as PyTorch names it. Buffers (running
 * statistics) are not trainable: no gradient, not in the optimizer. */
typedef struct {
    const char *name;       /* conv1.weight */
    int node;
    ParamRole role;
    bool trainable;
    bool is_int64;          /* num_batches_tracked */
    int ndim;
    int64_t shape[4];
    int64_t numel;
} Param;

typedef struct {
    OpKind op;
    const char *name;       /* conv1, stem, res1 */
    bool labeled;           /* named by the user, not numbered */
    const char *kind_word;  /* the .net word: conv, linear, residual... */
    Loc loc;                /* its statement, for messages and .cu comments */
    const char *text;       /* the statement as written, for .cu comments */
    int line;
    int depth;              /* residual nesting */
    int in, skip, out;      /* value ids; skip only for OP_RESIDUAL_ADD */
    Shape in_shape, out_shape;

    /* attributes, as the op needs them */
    int64_t in_ch, out_ch;  /* conv channels, linear features */
    int64_t kernel, stride, pad, groups;
    bool bias;
    double p;               /* dropout */
    int dropout_layer;      /* dropout: 1 for the net's first, 2 for the next, named or not: its
                             * masks' layer key, the same in the program and --emit torch */
    double slope;           /* leaky_relu */
    double eps, momentum;   /* batchnorm */
    bool sync;              /* batchnorm across ranks */
    bool gelu_tanh;         /* gelu approximate=tanh */
    LossKind loss;

    int first_param, n_params;
    int64_t params;         /* trainable parameter count */
    int64_t flops;          /* forward, per sample; a multiply-add is 2 */
} Node;

typedef enum { OPT_SGD, OPT_ADAM, OPT_ADAMW } OptimizerKind;
typedef enum { SCHED_CONSTANT, SCHED_STEP, SCHED_COSINE } ScheduleKind;

typedef struct {
    int64_t batch, epochs;
    bool batch_global;      /* `batch N global`: N is the global batch, N / world a rank's */
    OptimizerKind optimizer;
    double lr, momentum, dampening, weight_decay;
    bool nesterov;
    double beta1, beta2, eps;
    ScheduleKind schedule;
    int64_t warmup;         /* cosine: steps of linear warm-up */
    int64_t step_every;     /* step: epochs between decays */
    double gamma;
    int64_t bucket_cap_bytes, first_bucket_bytes;
    uint64_t seed;
    DdpPrecision precision; /* of the products' operands: fp32, tf32, bf16 */
} TrainConfig;

/* The `data { }` block: what the program does to a sample between the data
 * set and the net (data.c checks it; runtime/augment.h applies it). */
typedef enum { PAD_ZERO, PAD_REFLECT } PadMode;

typedef struct {
    /* normalize: (x - mean[c]) / std[c] on every sample, channel c of
     * n_channels (the input's channels; 1 for a features input). NULL: none. */
    const double *mean, *std;
    int64_t n_channels;
    Loc normalize_loc;
    /* random_crop: in training, a crop_h x crop_w window at a random place
     * of the sample padded by pad on each side. crop_h 0: none. */
    int64_t crop_h, crop_w, pad;
    PadMode pad_mode;
    Loc crop_loc;
    /* flip: in training, the sample mirrored left-right (flip_h) or upside
     * down (flip_v) with this probability; 0: never. */
    double flip_h, flip_v;
    Loc flip_loc[2];         /* of each: horizontal, vertical */
    /* resize and center_crop: how an image file becomes a sample, before
     * all the above (runtime/image_decode.h). resize HxW sets resize_h and
     * resize_w; resize N sets resize_shorter (the shorter side to N); 0: none. */
    int64_t resize_h, resize_w, resize_shorter;
    Loc resize_loc;
    int64_t center_h, center_w;
    Loc center_loc;
} DataConfig;

typedef struct {
    const char *name;       /* `net NAME`, or the file's stem */
    const char *file;
    Node *nodes;            /* forward execution order */
    int n_nodes;
    Shape *values;          /* shape of each value id */
    int n_values;
    Param *params;
    int n_params;
    int64_t total_params;   /* trainable */
    int64_t total_buffers;
    int64_t total_flops;
    int64_t num_classes;    /* features reaching the loss */
    TrainConfig train;
    DataConfig data;
} Net;

/* Checks AST and lowers it into NET. Returns false if there were errors. */
bool sema_net(Arena *a, Diag *d, const Ast *ast, const char *file, Net *net);

/* layers.c: one entry per layer word. CHECK reads the statement's arguments
 * into the node (reporting bad ones) and, when the input shape is known,
 * checks it and sets the output shape, parameters and FLOPs. */
typedef struct Sema Sema;
typedef struct {
    const char *word;
    OpKind op;
    const char *name_prefix;  /* unnamed layers: prefix + ordinal (bn1) */
    void (*check)(Sema *s, const Stmt *st, Node *n);
} LayerKind;

const LayerKind *layer_kind_find(const char *word);
/* Fills OUT with up to MAX layer words (for suggestions); returns how many. */
int layer_words(const char **out, int max);

//
// op_facts.c: what each op kind is to the passes after sema, one row per kind
//

/* Where an op's forward result lives. */
typedef enum {
    OUT_NEW,   /* its own storage in the arena (the conv's or linear's when fused into one) */
    OUT_VIEW,  /* the input's floats seen in another shape (flatten) */
    OUT_DATA,  /* the batch itself, ctx->x (input) */
    OUT_LOSS,  /* no activation: per-sample loss rows, summed by the reduce kernel (loss) */
} OpOutput;

/* What an op's backward reads of its forward pass. */
typedef enum {
    READS_NOTHING,
    READS_INPUT,
    READS_OUTPUT,
    READS_OUTPUT_IF_SLOPE_POSITIVE, /* leaky_relu: y keeps x's sign only for a positive slope; else x */
} BackwardReads;

/* How big an op's scratch is. */
typedef enum {
    SCRATCH_NONE,
    SCRATCH_PER_OUTPUT_ELEMENT, /* batch-sized: one per output element (maxpool's argmax) */
    SCRATCH_TWO_PER_SAMPLE,     /* batch-sized: two per sample (the loss's rows) */
    SCRATCH_CHANNEL_SUMS,       /* fixed: per channel 2 DdpSums (kernel.h, at most 4 floats each), and their count */
    SCRATCH_CHANNEL_STATS,      /* fixed: per channel 2 floats (mean, 1/std) */
} ScratchSize;

enum { OP_MAX_SCRATCH = 2 }; /* scratch buffers an op may have */

/* A buffer an op's kernels keep from forward to backward. */
typedef struct {
    const char *name;  /* in the generated code, after the layer's: maxpool1_argmax */
    const char *type;  /* its element type there */
    ScratchSize size;
} ScratchFact;

/* How a parameter starts, as PyTorch's reset_parameters. */
typedef enum {
    INIT_NONE,            /* the op has no parameter in this role */
    INIT_ZEROS,
    INIT_ONES,
    INIT_KAIMING_UNIFORM, /* uniform in +-1/sqrt(fan-in), the weight's fan-in */
} ParamInit;

typedef struct {
    OpKind op;                  /* the row's own kind: rows are in OpKind's order */
    OpOutput output;
    bool activation;            /* elementwise y = f(x), in act_*_expr (emit_cu.c) */
    bool library_product;       /* conv, linear: a product with the weight by the library ops; backward is
                                 * two (dW and dx), and an activation after it may fuse into its bias kernel */
    bool gradient_passes;       /* d input = d output (flatten, residual's body): may share its storage */
    bool differs_in_training;   /* forward's TRAIN changes what it does (dropout, batchnorm) */
    BackwardReads backward_reads;
    ScratchFact scratch[OP_MAX_SCRATCH];
    const char *kernels[4];     /* its kernels besides NAME_forward and NAME_backward, by the word after the
                                 * layer's name (batchnorm: bn1_sums_forward, bn1_eval_forward) */
    ParamInit init[PARAM_ROLE_COUNT];
} OpFacts;

/* The row of op K. */
const OpFacts *op_facts(OpKind k);
/* What N's backward reads, READS_OUTPUT_IF_SLOPE_POSITIVE resolved. */
BackwardReads op_backward_reads(const Node *n);
/* Scratch K of N in floats: per sample (batch-sized) or fixed. */
void op_scratch_floats(const Node *n, int k, int64_t *per_sample, int64_t *fixed);
/* N's weight fan-in, as PyTorch computes it from the weight's shape
 * (dimension 1 times the kernel's size), or its input channels if it has no
 * weight. */
int64_t op_fan_in(const Net *net, const Node *n);

/* What layers.c and train.c need from sema.c. */
struct Sema {
    Arena *arena;
    Diag *diag;
    Net *net;
    int nodes_cap, params_cap, values_cap;
};

Arg *sema_take_positional(Sema *s, const Stmt *st);
Arg *sema_take_key(Sema *s, const Stmt *st, const char *key);
void sema_report_unused(Sema *s, const Stmt *st, const char *const *keys, int n_keys);
bool sema_value_int(Sema *s, const Value *v, const char *what, int64_t lo, int64_t hi, int64_t *out);
/* A whole number from 0 to HI as uint64, read as the program reads its
 * flags (numbers.h), where int64 would stop short: the seed. */
bool sema_value_u64(Sema *s, const Value *v, const char *what, uint64_t hi, uint64_t *out);
bool sema_value_real(Sema *s, const Value *v, const char *what, double lo, double hi, double *out);
bool sema_value_bool(Sema *s, const Arg *a, bool *out);
void sema_add_param(Sema *s, Node *n, ParamRole role, int ndim, const int64_t *shape);
const char *shape_str(Arena *a, Shape sh);
int64_t shape_numel(Shape sh);
/* a*b, or -1 past 2^62 (shapes that big are reported, not computed) */
int64_t checked_mul(int64_t a, int64_t b);
int64_t checked_add(int64_t a, int64_t b);

//
// gen_names.c: the names the generated code derives from a layer's, which
// the emitter spells and sema checks labels against, from one place
//

/* A gradient's name: d_conv1_out, d_conv1_weight (no label may start so). */
#define GEN_GRADIENT_PREFIX "d_"
/* gen_name_suffixes' most suffixes for a kind, and its longest (sema looks a
 * label up by its last LONGEST_NAME_SUFFIX characters only, which keeps a
 * long label's check linear) */
enum { MAX_NAME_SUFFIXES = 64, LONGEST_NAME_SUFFIX = 64 };

/* A kernel's direction, the last word of its name. */
typedef enum { GEN_FORWARD, GEN_BACKWARD } GenPass;
/* The generated code's kernels that are no layer's. */
typedef enum { GEN_LOSS_FORWARD_BACKWARD, GEN_LOSS_REDUCE, GEN_LOSS_KERNEL_COUNT } GenLossKernel;

/* N's kernel: relu1_forward; with WORD, one of its op row's kernels:
 * bn1_sums_backward. */
const char *gen_name_kernel(Arena *a, const Node *n, const char *word, GenPass pass);
/* A conv or linear N's kernel after its product, adding its bias and
 * applying activation ACT (a layer word, or NULL): conv1_bias_relu_forward. */
const char *gen_name_product_kernel(Arena *a, const Node *n, const char *act, GenPass pass);
/* N's output, or its GRADIENT: conv1_out, d_conv1_out. */
const char *gen_name_buffer(Arena *a, const Node *n, bool gradient);
/* N's scratch K: maxpool1_argmax. */
const char *gen_name_scratch(Arena *a, const Node *n, int k);
/* A buffer's or scratch's offset in the arena table: conv1_out_at. */
const char *gen_name_offset(Arena *a, const char *buffer);
/* The word of a parameter in PyTorch's name (conv1.weight) and ours. */
const char *gen_param_word(ParamRole role);
/* N's parameter, or its GRADIENT: conv1_weight, d_conv1_weight. */
const char *gen_name_param(Arena *a, const Node *n, ParamRole role, bool gradient);
/* A conv's DdpConvShape: conv1_shape. */
const char *gen_name_conv_shape(Arena *a, const Node *n);
const char *gen_name_loss_kernel(GenLossKernel k);
/* What the names above may add to the name of a layer of kind OP (with a
 * bias, for conv and linear: BIAS): fills OUT with up to MAX suffixes
 * (strings in A; _bias_relu_forward, _out, _weight) and returns how many.
 * sema refuses two layers whose names and suffixes would meet. */
int gen_name_suffixes(Arena *a, OpKind op, bool bias, const char **out, int max);

//
// train.c
//

void train_defaults(TrainConfig *t);
void train_check(Sema *s, const Stmt *block);

//
// data.c
//

/* Reads the `data { }` block into s->net->data. */
void data_check(Sema *s, const Stmt *block);
/* D draws something per sample in training (a crop or a flip); D fits
 * image files to the input (resize, center_crop); D does anything. */
bool data_has_draws(const DataConfig *d);
bool data_has_fitting(const DataConfig *d);
bool data_any(const DataConfig *d);
/* --summary's line for D ("data:         random_crop 28 pad=2, ..."); nothing when D
 * is empty. */
void data_summary(FILE *out, const DataConfig *d);
/* Checks what was read against the net's INPUT shape (rank 0: unknown,
 * after an error) once the whole file is read, and gives normalize one
 * mean and std per channel. */
void data_check_input(Sema *s, Shape input);

//
// plan.c: fusion, parameter layout, buckets, memory plan, hash
//

/* Every place in the activation arena, and the batch region's size per
 * sample, is a multiple of this many floats (128 bytes): a buffer lies at
 * offset x B (the batch) and the fixed ones after B x the region, so all
 * start on 128 bytes of the arena's start whatever B is. cuDNN's and
 * cuBLASLt's vector loads need 16 bytes (an odd batch left buffers on 8),
 * GPUs read 128-byte lines, CPUs 64-byte ones; the padding costs under 128
 * bytes a buffer and sample. */
#define PLAN_ARENA_ALIGN 32

/* One piece of the activation arena: batch-sized (per_sample floats for each
 * sample) or fixed (fixed floats). offset: per-sample units in the batch
 * region, floats in the fixed region. */
typedef struct {
    int64_t per_sample, fixed;
    int start, end;         /* lifetime on the step's timeline */
    int64_t offset;
} Storage;

typedef struct {
    int fused_act;          /* conv/linear: the activation node applied in its kernels, or -1 */
    int fused_into;         /* activation: the conv/linear that applies it, or -1 */
    /* A relu fused into a conv/linear whose output only a maxpool reads: the
     * pool's backward applies the relu's mask (plan_fusion says why it may) */
    int mask_in_pool;       /* conv/linear: that maxpool, or -1 */
    int masks_for;          /* maxpool: that conv/linear, or -1 */
    int scratch[OP_MAX_SCRATCH]; /* storages of its scratch (op_facts.c), -1 for none */
    int conv_id;            /* the library op's id */
    /* flatten of a channels-last value: its output is a copy in C x H x W
     * order (the linear layer's weights are PyTorch's), not a view */
    bool flatten_permutes;
} NodePlan;

typedef struct {
    NodePlan *nodes;
    int *act, *grad;        /* per value: its storage, -1 for none (value 0 is ctx->x) */
    bool *is_data;          /* per value: the data itself, value 0 or a flatten of it (ctx->x, no gradient) */
    /* per value: whether a gradient reaches it, a node with trainable
     * parameters at or before its producer; none before the first such
     * node, whose backward then computes no dx, and whose layers before it
     * have no backward at all (plan_build) */
    bool *carries_grad;
    /* Every C x H x W value but the data in ctx->x is stored channels-last,
     * each sample H x W x C (plan_channels_last); the data is permuted into
     * act[0] where the two layouts differ for it (more than one channel and
     * one pixel: plan.c's layouts_differ) and something but a flatten reads
     * it. */
    bool channels_last, input_permuted;
    unsigned char *grad_first; /* per node: bit 1 (input), 2 (skip): backward writes, not adds */
    Storage *storages;
    int n_storages, storages_cap;
    int n_convs;
    int64_t *param_offset;  /* per Param: floats into params or buffers; -1 for step counts */
    int64_t n_param_floats, n_buffer_floats;
    DdpBucket *buckets;     /* in launch order; positions index bucket_param */
    int *bucket_param;      /* position in reverse trainable order -> index into Net.params */
    int n_buckets;
    int64_t arena_per_sample, arena_fixed;
    int64_t place_work;     /* steps plan_place took: tests hold it to O(n log n) */
    const char *hash;
} Plan;

/* How --layout asks for the spatial values to be stored. */
typedef enum { LAYOUT_AUTO, LAYOUT_NCHW, LAYOUT_NHWC } LayoutRequest;

/* Whether NET's C x H x W values are stored channels-last (NHWC) in a
 * program for a GPU (GPU) or a CPU, as REQUESTED (asked for NHWC, a net
 * that makes no C x H x W value stays NCHW: nothing would change). By default on GPUs, for a
 * net with a conv whose precision multiplies on tensor cores (tf32, bf16),
 * where cuDNN's convolutions are made for NHWC; else NCHW. The precision is
 * the .net's: a program's --precision comes after it is built. A CPU program
 * is NHWC only when asked: its convs then transpose around NCHW ones, the
 * same bits, a twin of the GPU's layout for checks. */
bool plan_channels_last(const Net *net, bool gpu, LayoutRequest requested);
/* --summary's layout line, which covers both targets (nothing for a net
 * without a conv, unless --layout asked for one; nothing, asked, for one
 * that makes no C x H x W value). */
void plan_layout_summary(FILE *out, const Net *net, LayoutRequest requested);

void plan_net(Arena *a, const Net *net, bool channels_last, Plan *p);
/* Places p's storages (their offsets, the arena's sizes), as plan_net does
 * last; tests call it on made-up lifetimes. Each storage's lifetime must have
 * start <= end (an internal error otherwise: its place would be freed before
 * it is taken). */
void plan_place(Plan *p);

//
// scaling.c: scaling on paper (--emit plan --world N --link GBPS)
//

typedef struct {
    double gbit_per_s;      /* each rank's link, each way */
    double hop_latency_s;   /* one step of the ring */
} ScalingLink;

typedef struct {
    const int64_t *worlds;  /* the rank counts to predict, each at least 1 */
    int n_worlds;
    ScalingLink link;
    double tflops;          /* what one rank achieves in training, not its peak */
    int bytes_per_gradient; /* on the wire: a float (cuda), two doubles (cpu: exact_sum.h) */
    double flops_per_exact_part; /* cpu: what adding one part to an order-free sum costs */
    const char *target;
} ScalingModel;

/* One bucket's all-reduce in a predicted step, in seconds from the start of backward. */
typedef struct {
    double bytes, ready_s, start_s, allreduce_s, done_s;
} ScalingBucket;

/* A step predicted at WORLD ranks (seconds). */
typedef struct {
    int64_t world, batch;   /* batch: a rank's */
    double forward_s, backward_s;
    double allreduce_s;     /* all buckets' all-reduces, overlapped or not */
    double exposed_s;       /* what of them runs past the end of backward */
    double step_s, samples_per_s; /* samples/s: all ranks together */
    ScalingBucket *buckets; /* per bucket of the plan, in launch order */
} ScalingStep;

/* One ring all-reduce of BYTES over WORLD ranks: 2(WORLD-1) hops' latency and
 * 2(WORLD-1)/WORLD of the bytes at the link's rate; 0 for one rank. */
double scaling_ring_allreduce_s(const ScalingLink *link, int64_t world, double bytes);
/* The step at WORLD ranks into *P; false when a global batch does not divide. */
bool scaling_predict(Arena *a, const Net *net, const Plan *plan, const ScalingModel *m, int64_t world,
                     ScalingStep *p);
/* Prints, after the bucket plan, each world's bucket timeline and the table
 * of step time, exposed all-reduce and scaling efficiency (see scaling.c). */
void scaling_print(Arena *a, FILE *out, const Net *net, const Plan *plan, const ScalingModel *m);

//
// launch_table.c: each launch's threads and work per thread on a GPU
//

/* Which steps a launch of forward() is made in: batchnorm's statistics in
 * training only, its running statistics in evaluation only; eval_step's own
 * launches in evaluation. */
typedef enum { LAUNCH_ALWAYS, LAUNCH_TRAINING, LAUNCH_EVALUATION } LaunchWhen;

typedef struct LaunchTable LaunchTable;

LaunchTable *launch_table_new(Arena *a);
/* A DDP_LAUNCH of KERNEL in FUNCTION over PER_SAMPLE x n + FIXED items, each
 * making ITEM_WORK trips through its inner loops (0: as many as the batch's
 * samples, a loop over the batch). */
void launch_table_items(LaunchTable *t, const char *function, LaunchWhen when, const char *kernel, int64_t per_sample,
                        int64_t fixed, int64_t item_work);
/* A DDP_LAUNCH_CHANNELS of KERNEL: sums over CHANNELS planes of PIXELS. */
void launch_table_channels(LaunchTable *t, const char *function, LaunchWhen when, const char *kernel,
                           int64_t channels, int64_t pixels);
/* A library call (ddp_conv_forward, ddp_gemm...), named CALL. */
void launch_table_library(LaunchTable *t, const char *function, LaunchWhen when, const char *call);
/* The table at BATCH samples a rank, each line starting with PREFIX ("// "
 * in OUT.cu). */
void launch_table_print(FILE *out, const LaunchTable *t, int64_t batch, const char *prefix);

//
// emit_cu.c: the generated program's source, one file for CUDA and CPU
//

/* OUT.cu, ending with its launch table at the net's batch. */
void emit_cu(FILE *out, const Net *net, const Plan *plan, const char *build_command);
/* The launch table alone, at the net's batch (a global batch: one rank's at a
 * world of one), as `--emit plan` shows it; false (said) when out of memory. */
bool emit_launch_table(FILE *out, const Net *net, const Plan *plan);

//
// emit_torch.c: the equivalent PyTorch module
//

/* Writes NET's PyTorch module to OUT; false (said on stderr, nothing
 * written) where PyTorch cannot hold it: a layer named 'training' with a
 * module of its own. */
bool emit_torch(FILE *out, const Net *net);

//
// output.c: the files ddpc writes, and which paths it may write
//

/* PATH, its links followed, when it names a regular file or nothing yet;
 * NULL (reported, the message starting "WHO: ") for a directory, a device,
 * a FIFO, a socket or a path under a regular file. */
char *output_target(Arena *a, const char *who, const char *path);
/* Whether A and B both exist and are one file (device and inode). */
bool output_same_file(const char *a, const char *b);
/* A new file beside PATH, open for writing under a unique temporary name
 * (*TMP); NULL (reported) when PATH's directory cannot take it. */
FILE *output_open(Arena *a, const char *path, char **tmp);
/* Closes F, written under TMP in place of PATH; false (reported as PATH's
 * failure, TMP removed) on error. */
bool output_close(FILE *f, const char *tmp, const char *path);
/* Renames TMP over PATH; false (reported, TMP removed) on error. */
bool output_rename(const char *tmp, const char *path);
/* A unique unused name beside PATH, for a file another program writes;
 * NULL (reported) when PATH's directory cannot take a file. */
char *output_temp_name(Arena *a, const char *path);

//
// build.c: compiling OUT.cu into OUT
//

/* What a CPU program is compiled with, after DDPC_CPU_CXX (config.h) and
 * before its -I: the tests that compile a generated source into a harness
 * of their own take the same (they decide how DDP_SIMD_SUM splits a sum
 * into lanes). -fno-trapping-math: a float comparison may then run where
 * its result is not used, so the kernels' selects (relu, the max of a
 * pooling window, lane_math.h's) vectorise: an MNIST step took 11% less
 * time. It changes no value, only whether FE_INVALID is raised, which
 * nothing here reads. -fno-math-errno: sqrtf need not set errno for a
 * negative operand, so loops with it (Adam's) vectorise: mlp.net's
 * optimizer took about half the time. The same values.
 * -ffp-contract=off: each a * b + c is the two roundings written, never an
 * FMA. g++ (unlike gcc in ISO C mode) fuses some by default, and not the
 * same ones in a loop it vectorises as in one it leaves scalar: mlp.net's,
 * resnet.net's and everything.net's steps then took other bits built with
 * -fno-tree-vectorize, so they hung on which loops a compiler vectorised
 * (its version, the CPU's vector width, a hand-tuned kernel). Off, a
 * program takes the same steps whichever of its plain loops are vectorised
 * (tests/unit/test_lanes.c); DDP_SIMD_SUM's loops split their sums into
 * lanes by design. */
#define DDPC_CPU_CXXFLAGS                                                                                          \
    "-x c++ -std=c++17 -O3 -march=native -fno-trapping-math -fno-math-errno -ffp-contract=off -fopenmp -Wall -Wextra"

bool build_target_available(const char *target);
/* cuda when nvcc was found and the CUDA driver sees a GPU; else cpu, saying
 * so on stderr when nvcc was found (cross-building takes --target cuda). */
const char *build_default_target(void);
/* Checks -o OUT: neither OUT nor OUT.cu may be a directory, a device, a FIFO,
 * or one of the build's inputs (INPUT, the .net, or NULL for stdin; the
 * runtime library). Sets *PROG and *CU to the files to write (links
 * followed); false (reported) otherwise. */
bool build_check_outputs(Arena *a, const char *out, const char *input, const char *target, const char **prog,
                         const char **cu);
/* The command that builds OUT from CU for TARGET (cuda or cpu), or NULL
 * (reported); ARCH is sm_XX or NULL for the default (toolchain_arch_flags). */
char *build_command(Arena *a, const char *target, const char *arch, const char *cu_path, const char *out_path);
/* Runs COMMAND with its source set to CU and its output to a temporary name
 * renamed to OUT once built: 0 built, 1 failed, 2 a bad command. SHOWN_CU is
 * the source's name once ddpc is done (CU, or the name a temporary CU takes):
 * a failed build's message shows the command with it and OUT, the files the
 * user has, not the temporary names it ran with. */
int build_run(Arena *a, const char *command, const char *cu, const char *shown_cu, const char *out, bool verbose);
/* --doctor: the toolchain report (toolchain_doctor) with the runtime ddpc found. */
void build_doctor(FILE *out);
/* Builds F from F.cu (CU_PATH) with the ddpc-build line recorded in it:
 * 0 built, 1 failed, 2 bad file. */
int build_rebuild(const char *cu_path, bool verbose);

//
// toolchain.c: where cuDNN, cuBLAS, cuBLASLt and NCCL are, and which GPUs to build for
//

enum { TOOL_LIBS = 4 }; /* cuDNN, cuBLAS, cuBLASLt, NCCL */

/* One library found (or not): what is linked, from where. */
typedef struct {
    const char *name;         /* cuDNN */
    bool found;
    const char *where;        /* which place: "CUDNN_HOME", "the CUDA toolkit", ... */
    char lib[2 * PATH_MAX];       /* the library file linked, by full path */
    char libdir[PATH_MAX];        /* its directory (the program's RUNPATH) */
    char include[PATH_MAX];       /* the directory holding its header */
    char version[32];         /* from its header: "9.19.0" */
    char looked[8192];        /* the places tried and what each lacked, for messages */
} ToolLib;

typedef struct {
    ToolLib libs[TOOL_LIBS];
} Toolchain;

/* The libraries, found on the first call and kept. */
const Toolchain *toolchain_get(void);
/* Whether the CUDA driver sees a GPU (honouring CUDA_VISIBLE_DEVICES). */
bool toolchain_gpu_visible(void);
/* True when every library --target cuda links was found; else says, on
 * stderr, for each missing one where it was looked for and what to do. */
bool toolchain_cuda_ready(void);
/* nvcc's -gencode flags for ARCH ("sm_90"), or for NULL the default: native
 * where a GPU is visible, else the Makefile's CUDA_ARCHS (those this nvcc
 * builds) and PTX of the newest. */
const char *toolchain_arch_flags(Arena *a, const char *arch);
/* NULL when this nvcc builds sm_ARCH (or cannot say which it builds); else
 * the ones it builds, as words ("50 52 ... 100"), for the refusal. */
const char *toolchain_nvcc_refuses(Arena *a, int arch);

/* Whether the GPU runtime's kernels, built for the Makefile's CUDA_ARCHS
 * (those this nvcc builds), load on an sm_ARCH GPU: machine code of its
 * major version and no newer minor (sm_86's runs on sm_89), or the newest's
 * PTX for a GPU newer than it. */
bool toolchain_runtime_loads_on(int arch);
/* The Makefile's CUDA_ARCHS as words ("80 86 89 90 100"), with WITH put in
 * its place when not 0: the list to give make for a runtime that loads on
 * sm_WITH too. */
const char *toolchain_runtime_archs(Arena *a, int with);
/* The libraries to link, by full path, and the RUNPATH naming their
 * directories; *INCLUDE_FLAGS the -I flags for their headers ("" or ending in
 * a space): words joined by spaces. Call after toolchain_cuda_ready, which
 * refuses a path with a space. */
const char *toolchain_cuda_link(Arena *a, const char **include_flags);
/* --doctor: what was found and where, and what is missing disables.
 * RUNTIME_LIB is libddprt_cuda.a (NULL if missing), RUNTIME_MPI whether it uses MPI. */
void toolchain_doctor(FILE *out, const char *runtime_lib, int runtime_mpi);

//
// summary.c
//

/* LAYOUT: what --layout asked, for the layout line (plan_layout_summary). */
void summary_print(FILE *out, const Net *net, LayoutRequest layout);
/* 184586 -> "184,586", as the summary (and the PyTorch module's comments) print counts. */
const char *summary_grouped(Arena *a, int64_t v);

#endif
