/*
 * ops_cpu.c: the library ops on the CPU (interface in ops.h): convolutions
 * and matrix products, on this runtime's own fixed-order products
 * (gemm_cpu.c), with OpenMP for the parallelism; most convolutions' passes
 * go to oneDNN, one sample per call (onednn_cpu.h; plan_onednn says which).
 *
 * A convolution is a matrix product once the input is unrolled (im2col): for
 * one sample and one group, the matrix whose row (c, r, s) and column (oh, ow)
 * holds x[c][oh*stride - pad + r][ow*stride - pad + s]. Then
 *   forward          y  = W . col               (Kg x CRS) . (CRS x P)
 *   backward data    dx = col2im(W^T . dy)      col2im sums overlapping taps
 *   backward filter  dw = sum over samples dy . col^T
 * with CRS = C/groups * R * S and P = out_h * out_w. A 1x1 stride-1 unpadded
 * conv needs no unrolling: x itself is the matrix. Stride-1 convs with 8 or
 * more channels each way and kernel sides 3..7 go to winograd_cpu.c instead
 * (ddp_winograd_suits), which needs 5 to 6 times fewer multiplies and keeps
 * the promises below; so does oneDNN's one sample per call.
 *
 * Results must not depend on the batch a sample is in, on the thread count,
 * or on the machine's BLAS (the distributed tests compare 1 rank with 2 and
 * 3, and --resume promises bit-for-bit). The products promise that for every
 * element (gemm_cpu.h); the rest is how the work is split:
 *  - forward and backward data split the batch: one sample per task, each
 *    output belongs to one sample;
 *  - backward filter sums over samples, so it splits the weight gradient instead,
 *    into blocks of im2col rows (an even share per thread); each task unrolls
 *    only its own rows, and adds each sample's float product to the block's
 *    order-free sums (exact_sum.h; ops.h: DdpGrad), merged into dw at the end;
 *  - ddp_gemm splits C into blocks of rows and columns as the thread count
 *    suggests (no element's bits depend on the blocks);
 *  - ddp_gemm_grad splits DW into blocks of its rows or columns; each
 *    product of two floats (exact in double) is one part of an element's
 *    order-free sum.
 *
 * Channels last (ops.h: DdpConvShape): an NHWC conv copies its NHWC operands
 * into NCHW scratch, makes the NCHW call (whichever path above the shape
 * takes) and copies the result back, so every call gives the very bits of
 * the NCHW call on the same values transposed. Backward data with a nonzero
 * beta copies dx in first, so that the NCHW call adds to it in its own order;
 * the weights and their gradients are K x C/groups x R x S in either layout
 * and are not copied. The CPU build runs NHWC only when asked (ddpc --layout
 * nhwc), as a twin of the GPU build's layout for checks, so exactness and
 * clarity come before speed here: two more passes over the activations per
 * call. winograd_cpu.c and onednn_cpu.c read a shape's sizes, never its
 * channels_last: they always see the NCHW conv.
 *
 * Scratch: per thread, one im2col matrix (one sample, one group), one
 * sample's block of the weight gradient, the products' packed copies and the
 * block's order-free sums,
 * sized in ddp_ops_finalize for the largest conv; one buffer that the
 * Winograd convs share, sized for the largest of them, one that the
 * oneDNN convs share likewise, and one that the NHWC convs share for an
 * input's and an output's NCHW copies at the planned batch. ddp_gemm's and
 * ddp_gemm_grad's packed copies grow on their first call at a size (the
 * first step); after that the per-step calls never allocate.
 *
 * Precision (precision.h): in tf32 and bf16 every call first rounds its two
 * operands into copies of its own (round_operands; grown on first use like
 * the gemm packs), then computes on them exactly as in fp32. Rounding is
 * element by element, so every promise above still holds.
 */
#include "ops.h"
#include "ops_conv_table.h"  // DdpConvSlot, ddp_conv_table_*: the planned convs
#include "ops_failure.h"  // DdpOpsFailure: the first failure of a per-step call
#include "gemm_cpu.h"     // ddp_sgemm_fixed, ddp_gradsum_exact: products in a fixed order
#include "device_calls.h"  // ddp_device_call_note: scratch growing is counted as on GPUs
#include "onednn_cpu.h"   // OnednnConv: convs by oneDNN, one sample per call
#include "winograd_cpu.h" // WinogradPlan: stride-1 convs with fewer multiplies
#include "round_cpu.h"    // ddp_round_operands: tf32 and bf16
#include "ops_sizes.h"    // ddp_conv_*_floats, ddp_matrix_span: what a call's operands span

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>  // sysconf: the cores, for the thread count's message

#ifdef _OPENMP
#include <omp.h>     // omp_get_max_threads, omp_get_thread_num
#define DDP_PRAGMA(text) _Pragma(#text)
#define OMP(directive) DDP_PRAGMA(omp directive)
#else
#define OMP(directive)
static int omp_get_max_threads(void) { return 1; }
static int omp_get_thread_num(void) { return 0; }
#endif

/* How work is split. No bit depends on it: every element of a product is
 * the same bits whatever the blocks (gemm_cpu.h), and the weight gradients'
 * sums are order-free (exact_sum.h). The sizes come from measurements on the
 * 2-core build box: blocks of about 96 rows (task_grid) keep 2..8 cores
 * busy without making blocks so narrow that packing dominates. */

/* Backward filter: im2col rows per block, a multiple of 8, at least 32: a
 * group's CRS rows split evenly among the threads, and no more than keep a
 * block's order-free sums (KG x rows, 16 bytes each) within 1 MiB (for KG
 * up to 2048), in the core's cache while every sample adds to them. Every
 * sample's part is a product of its own, so each block packs the sample's dy
 * again: blocks of 128 rows (MNIST's conv2 in 7) made its weight gradient 40%
 * slower on one thread than one block. A first conv (CRS 25) is one block. */
static int wgrad_block_rows(int crs, int kg, int nthreads)
{
    int rows = ((crs + nthreads - 1) / nthreads + 7) / 8 * 8;
    const int most = (1 << 20) / 16 / kg / 8 * 8;
    rows = rows < most ? rows : most;
    return rows < 32 ? 32 : rows;
}

/* ddp_gemm's and ddp_gemm_grad's tasks: see task_grid. */
#define GEMM_SPLIT_MIN_MACS (1L << 21)
enum { TASK_ROWS = 96, TASK_COLS_MULTIPLE = 32 }; /* columns: whole tiles at either vector width */

typedef struct {
    DdpConvSlot slot; /* the shape, planned: ops_conv_table.h */
    OnednnConv *onednn; /* oneDNN's primitives (onednn_cpu.h), for the passes in onednn_passes */
    int onednn_passes;  /* DDP_ONEDNN_DATA, DDP_ONEDNN_FILTER: see plan_onednn */
    char onednn_why[128]; /* why oneDNN does no pass, when it does none */
    int direct;     /* 1x1, stride 1, pad 0: x is its own im2col matrix */
    int winograd;   /* winograd_cpu.c does this conv (ddp_winograd_suits) */
    int winograd_filter; /* and its weight gradient (ddp_winograd_filter_suits); else im2col */
    WinogradPlan wino;
    int wgrad_rows; /* backward filter: im2col rows per block */
} ConvPlan;

/* The scratch ddp_ops_finalize allocates, sized by the planned convs
 * (scratch_sizes). */
typedef struct {
    size_t per_thread;     /* floats of a thread's part: the im2col matrix, */
    size_t wgrad_offset;   /* then from here a sample's block of the weight gradient, */
    size_t pack_offset;    /* then from here the products' packed copies, */
    size_t sums_offset;    /* then from here the block's order-free sums (HI then LO, doubles) */
    size_t winograd_bytes; /* the Winograd convs' shared scratch, */
    size_t onednn_bytes;   /* the oneDNN convs' (whole cache lines already), */
    size_t nchw_floats;    /* and the NHWC convs' NCHW copies */
} ScratchSizes;

/* Scratch that per-step calls size by their arguments: grown on first use. */
typedef struct {
    void *data;
    size_t bytes;
} GrowingBuffer;

struct DdpOps {
    ConvPlan *convs;
    int nconvs;                /* ids below this have a slot (planned or not) */
    int finalized;
    int nthreads;              /* OpenMP threads the scratch was sized for */
    ScratchSizes sizes;        /* of the four buffers below, set by finalize */
    float *scratch;            /* per thread, sizes.per_thread floats */
    void *winograd_scratch;    /* shared by the Winograd convs, one at a time */
    void *onednn_scratch;      /* shared by the oneDNN convs, one at a time */
    float *nchw;               /* an NHWC conv's operands in NCHW: the input's copy, then the output's; */
    GrowingBuffer gemm_packs;  /* ddp_gemm's packed copies, one set per thread */
    GrowingBuffer gemm_grad_packs; /* ddp_gemm_grad's, likewise */
    DdpPrecision precision;    /* of the products' operands */
    GrowingBuffer operands[2]; /* a call's two operands, rounded to it (not in fp32) */

    /* The first failure of a per-step call, reported by ddp_ops_status. */
    DdpOpsFailure failure;
};

#define OPS_FAIL(ops, ...) ddp_ops_failure_record(&(ops)->failure, __FILE__, __LINE__, __VA_ARGS__)

/* More OpenMP threads than this per core only slow training (each waits
 * its turn for a core, and every parallel loop waits for the last): more is
 * a mistake in OMP_NUM_THREADS, refused before any per-thread scratch is
 * sized for it (100,000 threads asked for 44 GiB, which an overcommitting
 * machine grants, and then could not start the threads). */
enum { MAX_THREADS_PER_CORE = 8 };

DdpStatus ddp_ops_create(DdpOps **ops, void *stream)
{
    (void)stream;
    *ops = NULL;
    DDP_CHECK(ddp_onednn_check_environment());
    int nthreads = omp_get_max_threads();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores > 0 && nthreads > MAX_THREADS_PER_CORE * cores) {
        const char *env = getenv("OMP_NUM_THREADS");
        return DDP_ERR(DDP_BAD_INPUT, "OMP_NUM_THREADS=%s asks for %d threads on %ld cores: more than %d per core "
                       "only slows training; set it to at most the cores", env ? env : "unset", nthreads, cores,
                       (int)MAX_THREADS_PER_CORE);
    }
    *ops = calloc(1, sizeof **ops);
    if (!*ops)
        return DDP_ERR(DDP_FAIL, "out of memory creating the ops context");
    (*ops)->nthreads = nthreads;
    return DDP_OK;
}

void ddp_ops_destroy(DdpOps *ops)
{
    if (!ops)
        return;
    for (int id = 0; id < ops->nconvs; id++)
        ddp_onednn_conv_destroy(ops->convs[id].onednn);
    free(ops->convs);
    free(ops->scratch);
    free(ops->winograd_scratch);
    free(ops->onednn_scratch);
    free(ops->nchw);
    free(ops->gemm_packs.data);
    free(ops->gemm_grad_packs.data);
    for (int i = 0; i < 2; i++)
        free(ops->operands[i].data);
    free(ops);
}

DdpStatus ddp_ops_set_precision(DdpOps *ops, DdpPrecision precision)
{
    DDP_CHECK(ddp_precision_set_check(ops->finalized, precision));
    ops->precision = precision;
    return DDP_OK;
}

/* Nothing to size here: the rounded copies grow on first use. */
DdpStatus ddp_ops_plan_linear(DdpOps *ops, int n, int in, int out)
{
    return ddp_linear_plan_check(ops->finalized, n, in, out);
}

/* Which passes oneDNN does (onednn_cpu.h): by the shape and by oneDNN's
 * kernels here (AVX-512 or AVX2), and then by what oneDNN can do with it on
 * this kind of machine (a direct kernel, the bits check), so that every rank
 * and every run of a program on one kind of machine choose alike. The rule
 * follows one sample's calls against the runtime's own on a batch of 64
 * (bench/conv_cpu.sh, which times the examples' convs all three ways;
 * README.md gives the figures):
 *  - Winograd with 8x8 tiles (5x5 to 7x7 kernels: 6 times fewer multiplies
 *    than direct) keeps all three passes;
 *  - so does Winograd for a 3x3 with C x K of 2048 or more, where its 4
 *    times fewer multiplies outweigh its transforms (its weight gradient
 *    went to oneDNN's AVX-512 kernels until it summed each block of pairs
 *    in registers and gave each thread whole samples: cifar10.net and
 *    wide.net then trained 1.13 to 1.25 times faster); where Winograd does
 *    not take the weight gradient (fewer than 4 tiles a sample, or too much
 *    scratch: ddp_winograd_filter_suits), it goes to oneDNN's AVX-512
 *    kernels as before, or im2col;
 *  - a conv with fewer than 8 channels in (a first conv) gives oneDNN's
 *    AVX-512 kernels its weight gradient alone (im2col's forward is about as
 *    fast, its backward data several times faster), and its AVX2 kernels
 *    nothing (im2col's weight gradient is faster on MNIST's conv1);
 *  - every other conv goes to oneDNN (resnet.net's 3x3s of 16 and 32
 *    channels: forward and backward data faster, on either), but for a
 *    weight gradient that Winograd takes: it is faster than oneDNN's
 *    AVX-512 kernels there too (2.2 ms against 2.6 on the 16 -> 16 at
 *    28x28, 2.3 against 3.3 on the 32 -> 32 at 14x14; fashion_resnet.net
 *    then trained 1.08 to 1.14 times faster, resnet.net 0.97 to 1.07
 *    times: within the noise). Not measured against oneDNN's AVX2 kernels,
 *    whose weight gradients were the slower ones (README.md). */
enum { WINOGRAD_KEEPS_ALL_FROM = 2048, ONEDNN_DATA_FROM_CHANNELS = 8,
       ONEDNN_ALL = DDP_ONEDNN_DATA | DDP_ONEDNN_FILTER };

static DdpStatus plan_onednn(DdpOps *ops, ConvPlan *p)
{
    const DdpConvShape *sh = &p->slot.shape;
    int passes = ONEDNN_ALL; /* always with DDP_CPU_CONV=onednn, for measuring the rule */
    const char *why = NULL;  /* why no pass, where the rule gives none */
    if (ddp_onednn_choice() != DDP_CONV_ONEDNN) {
        const int filter_alone = ddp_onednn_avx512() ? DDP_ONEDNN_FILTER : 0;
        if (p->winograd && p->wino.alpha == 8)
            passes = 0, why = "Winograd with 8x8 tiles is faster";
        else if (p->winograd && (long)sh->c * sh->k >= WINOGRAD_KEEPS_ALL_FROM)
            passes = p->winograd_filter ? 0 : filter_alone, why = "Winograd is faster";
        else if (sh->c / sh->groups < ONEDNN_DATA_FROM_CHANNELS)
            passes = filter_alone, why = "im2col is faster than oneDNN's kernels without AVX-512";
        else if (p->winograd && p->winograd_filter)
            passes = DDP_ONEDNN_DATA;
    }
    /* with no pass planned, the reason oneDNN gives (not built in, ...) first */
    DDP_CHECK(ddp_onednn_conv_create(&p->onednn, sh, passes, ops->nthreads, p->onednn_why, sizeof p->onednn_why));
    if (!passes && !p->onednn_why[0])
        snprintf(p->onednn_why, sizeof p->onednn_why, "%s", why);
    p->onednn_passes = p->onednn ? passes : 0;
    if (p->onednn_passes & DDP_ONEDNN_FILTER)
        p->winograd_filter = 0;
    return DDP_OK;
}

DdpStatus ddp_ops_plan_conv(DdpOps *ops, int id, const DdpConvShape *shape)
{
    void *plans = ops->convs, *plan = NULL;
    DdpStatus st = ddp_conv_table_add(&plans, &ops->nconvs, sizeof *ops->convs, ops->finalized, id, shape, &plan);
    ops->convs = plans; /* grown or not */
    DDP_CHECK(st);
    ConvPlan *p = plan;
    const DdpConvShape checked = p->slot.shape;
    p->direct = checked.r == 1 && checked.s == 1 && checked.stride == 1 && checked.pad == 0;
    p->wgrad_rows = wgrad_block_rows(checked.c / checked.groups * checked.r * checked.s, checked.k / checked.groups,
                                     ops->nthreads);
    p->winograd = ddp_winograd_suits(&checked);
    if (p->winograd) {
        ddp_winograd_plan(&p->wino, &checked, ops->nthreads);
        p->winograd_filter = ddp_winograd_filter_suits(&p->wino);
    }
    return plan_onednn(ops, p);
}


/* The scratch is per OpenMP thread: when it does not fit, the thread count
 * is named, and when it is above the cores (OMP_NUM_THREADS=100000) it is
 * the likely cause, so the user's setting is bad input. */
static DdpStatus scratch_failure(const DdpOps *ops, const char *what, size_t bytes)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char *env = getenv("OMP_NUM_THREADS");
    if (cores > 0 && ops->nthreads > cores)
        return DDP_ERR(DDP_BAD_INPUT, "out of memory allocating %.1f MiB of %s scratch for %d OpenMP threads "
                       "(OMP_NUM_THREADS=%s) on %ld cores: set OMP_NUM_THREADS to at most the cores",
                       bytes / 1048576.0, what, ops->nthreads, env ? env : "unset", cores);
    return DDP_ERR(DDP_FAIL, "out of memory allocating %.1f MiB of %s scratch for %d OpenMP threads",
                   bytes / 1048576.0, what, ops->nthreads);
}

/* The scratch for the convs planned so far: for each buffer, the most that
 * any conv needs of it. */
static ScratchSizes scratch_sizes(const DdpOps *ops)
{
    ScratchSizes z;
    memset(&z, 0, sizeof z);
    size_t col_max = 0, wgrad_max = 0, pack_max = 0;
    for (int id = 0; id < ops->nconvs; id++) {
        const ConvPlan *p = &ops->convs[id];
        const DdpConvShape *sh = &p->slot.shape;
        if (!p->slot.planned)
            continue;
        if (sh->channels_last) {
            size_t floats = ddp_conv_input_floats(sh, sh->n) + ddp_conv_output_floats(sh, sh->n);
            z.nchw_floats = floats > z.nchw_floats ? floats : z.nchw_floats;
        }
        /* oneDNN's passes: the scratch the oneDNN convs share */
        if (p->onednn) {
            size_t bytes = ddp_onednn_conv_scratch_bytes(p->onednn);
            z.onednn_bytes = bytes > z.onednn_bytes ? bytes : z.onednn_bytes;
        }
        const int own_filter = !(p->onednn_passes & DDP_ONEDNN_FILTER);
        if (p->onednn_passes & DDP_ONEDNN_DATA && !own_filter)
            continue;
        if (p->winograd) {
            size_t bytes = ddp_winograd_scratch_bytes(&p->wino, sh, p->winograd_filter);
            z.winograd_bytes = bytes > z.winograd_bytes ? bytes : z.winograd_bytes;
            if (p->winograd_filter || !own_filter)
                continue;
        }
        /* im2col's scratch: every pass, or the weight gradient's alone */
        size_t col = p->direct ? 0
                               : (size_t)(sh->c / sh->groups) * sh->r * sh->s *
                                     (size_t)sh->out_h * sh->out_w;
        const int kg = sh->k / sh->groups, crs = sh->c / sh->groups * sh->r * sh->s;
        size_t wgrad = (size_t)kg * (size_t)p->wgrad_rows;
        /* The three products: W . col, W^T . dy, dy . col^T. */
        size_t packs[] = {ddp_sgemm_fixed_scratch(kg, crs), ddp_sgemm_fixed_scratch(crs, kg),
                          ddp_sgemm_fixed_scratch(kg, sh->out_h * sh->out_w)};
        for (int i = 0; i < 3; i++)
            pack_max = packs[i] > pack_max ? packs[i] : pack_max;
        col_max = col > col_max ? col : col_max;
        wgrad_max = wgrad > wgrad_max ? wgrad : wgrad_max;
    }
    /* Each part a cache line apart, so threads never share one. */
    z.wgrad_offset = (col_max + 15) / 16 * 16;
    z.pack_offset = z.wgrad_offset + (wgrad_max + 15) / 16 * 16;
    z.sums_offset = z.pack_offset + (pack_max + 15) / 16 * 16;
    z.per_thread = z.sums_offset + 4 * ((wgrad_max + 15) / 16 * 16); /* 2 doubles = 4 floats each */
    return z;
}

/* What each of the four buffers takes: whole cache lines. */
static size_t im2col_alloc_bytes(const ScratchSizes *z, int nthreads)
{
    return z->per_thread * sizeof(float) * (size_t)nthreads;
}
static size_t winograd_alloc_bytes(const ScratchSizes *z) { return (z->winograd_bytes + 63) / 64 * 64; }
static size_t nchw_alloc_bytes(const ScratchSizes *z) { return (z->nchw_floats * sizeof(float) + 63) / 64 * 64; }

static size_t scratch_bytes(const ScratchSizes *z, int nthreads)
{
    return im2col_alloc_bytes(z, nthreads) + winograd_alloc_bytes(z) + z->onednn_bytes + nchw_alloc_bytes(z);
}

size_t ddp_ops_planned_bytes(const DdpOps *ops)
{
    const ScratchSizes z = scratch_sizes(ops);
    return scratch_bytes(&z, ops->nthreads);
}

DdpStatus ddp_ops_finalize(DdpOps *ops)
{
    if (ops->finalized)
        return DDP_ERR(DDP_FAIL, "internal error: ddp_ops_finalize called twice");
    DDP_CHECK(ddp_conv_table_complete(ops->convs, ops->nconvs, sizeof *ops->convs));
    ops->sizes = scratch_sizes(ops);
    const ScratchSizes *z = &ops->sizes;
    if (z->per_thread) {
        ops->scratch = aligned_alloc(64, im2col_alloc_bytes(z, ops->nthreads));
        if (!ops->scratch)
            return scratch_failure(ops, "im2col", im2col_alloc_bytes(z, ops->nthreads));
    }
    if (z->winograd_bytes) {
        ops->winograd_scratch = aligned_alloc(64, winograd_alloc_bytes(z));
        if (!ops->winograd_scratch)
            return scratch_failure(ops, "Winograd", winograd_alloc_bytes(z));
    }
    if (z->onednn_bytes) {
        ops->onednn_scratch = aligned_alloc(64, z->onednn_bytes);
        if (!ops->onednn_scratch)
            return scratch_failure(ops, "oneDNN", z->onednn_bytes);
    }
    if (z->nchw_floats) {
        ops->nchw = aligned_alloc(64, nchw_alloc_bytes(z));
        if (!ops->nchw)
            return scratch_failure(ops, "NHWC convs' NCHW", nchw_alloc_bytes(z));
    }
    ops->finalized = 1;
    return DDP_OK;
}

DdpStatus ddp_ops_status(const DdpOps *ops)
{
    return ddp_ops_failure_status(&ops->failure);
}

void ddp_ops_forget_failure(DdpOps *ops)
{
    ddp_ops_failure_clear(&ops->failure);
}

size_t ddp_ops_workspace_bytes(const DdpOps *ops)
{
    return ops->finalized ? scratch_bytes(&ops->sizes, ops->nthreads) : 0;
}

void ddp_ops_describe_conv(const DdpOps *ops, int id, char *buf, size_t len)
{
    if (!len)
        return;
    const ConvPlan *p = ddp_conv_table_find(ops->convs, ops->nconvs, sizeof *ops->convs, id);
    if (!p) {
        snprintf(buf, len, "conv %d not planned", id);
        return;
    }
    char data[160], filter[96], why[160] = "";
    if (p->onednn_passes & DDP_ONEDNN_DATA)
        snprintf(data, sizeof data, "oneDNN %s, one sample per call",
                 ddp_onednn_conv_kernel(p->onednn, DDP_ONEDNN_DATA));
    else if (p->winograd)
        snprintf(data, sizeof data, "Winograd F(%dx%d,%dx%d): %d products per tile, %d tiles per sample",
                 p->wino.mh, p->wino.mw, p->slot.shape.r, p->slot.shape.s, p->wino.alpha * p->wino.alpha,
                 p->wino.tiles);
    else
        snprintf(data, sizeof data, "%s", p->direct ? "1x1: product on x, no im2col" : "im2col + product, col2im");
    if (p->onednn_passes & DDP_ONEDNN_FILTER)
        snprintf(filter, sizeof filter, "by oneDNN %s, one sample per call",
                 ddp_onednn_conv_kernel(p->onednn, DDP_ONEDNN_FILTER));
    else if (p->winograd)
        snprintf(filter, sizeof filter, "by %s, sample by sample", p->winograd_filter ? "Winograd" : "im2col");
    else
        snprintf(filter, sizeof filter, "in %d-row blocks", p->wgrad_rows);
    if (!p->onednn_passes)
        snprintf(why, sizeof why, " (not oneDNN: %s)", p->onednn_why);
    snprintf(buf, len, "%s%s; weight gradient %s%s",
             p->slot.shape.channels_last ? "NHWC, copied to and from NCHW around each call; " : "", data, filter,
             why);
}

void ddp_ops_describe_precision(const DdpOps *ops, char *buf, size_t len)
{
    if (!len)
        return;
    buf[0] = 0;
    if (ops->precision == DDP_PRECISION_FP32)
        return;
    const char *how = ops->precision != DDP_PRECISION_BF16 ? "by bit arithmetic"
                      : ddp_round_bf16_has_instruction()
                          ? "by AVX-512 BF16's instruction"
                          : "by bit arithmetic (this CPU lacks AVX-512 BF16; the same bits)";
    snprintf(buf, len, "the convs' and linear layers' operands rounded to %s %s, then multiplied and summed in FP32",
             ddp_precision_name(ops->precision), how);
}

/* cuDNN's alone: a CPU's convs take their kernels by rule, alike in every
 * process on the same kind of CPU (ddp_ops_describe_kernels). */
size_t ddp_ops_conv_choices(const DdpOps *ops, char *buf, size_t len)
{
    (void)ops;
    if (len)
        buf[0] = '\0';
    return 0;
}

void ddp_ops_time_algorithms(DdpOps *ops)
{
    (void)ops;
}

DdpStatus ddp_ops_take_conv_choices(DdpOps *ops, const char *text, int *taken, char *why, size_t why_len)
{
    (void)ops;
    (void)text;
    *taken = 0;
    snprintf(why, why_len, "a CPU build has no cuDNN algorithms to take");
    return DDP_OK;
}

void ddp_ops_describe_kernels(const DdpOps *ops, char *buf, size_t len)
{
    if (!len)
        return;
    size_t used = 0;
    buf[0] = 0;
    for (int id = 0; id < ops->nconvs; id++) { /* each kernel once, in the order met */
        const ConvPlan *p = &ops->convs[id];
        for (int pass = DDP_ONEDNN_DATA; pass <= DDP_ONEDNN_FILTER; pass <<= 1) {
            if (!(p->onednn_passes & pass))
                continue;
            const char *kernel = ddp_onednn_conv_kernel(p->onednn, pass);
            const char *at = strstr(buf, kernel);
            const size_t n = strlen(kernel);
            if (at && (at[n] == 0 || at[n] == ',') && (at == buf || at[-1] == ' '))
                continue;
            used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s", used ? ", " : "oneDNN ",
                                     kernel);
            if (used >= len)
                return;
        }
    }
}

static void *grow(DdpOps *ops, GrowingBuffer *buf, size_t bytes, const char *what);

/* The call's operands *A (NA floats) and *B (NB floats) rounded to the
 * run's precision: each pointer replaced by its rounded copy's. Nothing to
 * do in fp32. 0 (failure recorded) if the copies do not fit in memory. */
static int round_operands(DdpOps *ops, const float **a, size_t na, const float **b, size_t nb)
{
    if (ops->precision == DDP_PRECISION_FP32)
        return 1;
    const float **operand[2] = {a, b};
    const size_t floats[2] = {na, nb};
    for (int i = 0; i < 2; i++) {
        if (!floats[i])
            continue;
        float *copy = grow(ops, &ops->operands[i], floats[i] * sizeof *copy, "rounded operands");
        if (!copy)
            return 0;
        ddp_round_operands(ops->precision, *operand[i], copy, floats[i], ops->nthreads);
        *operand[i] = copy;
    }
    return 1;
}

/* The plan for a per-step call, or NULL (failure recorded) if the call is wrong:
 * only a bug in the generated program gets here, so it is reported, not fixed. */
static const ConvPlan *conv_for_call(DdpOps *ops, int id, int n, const char *what)
{
    return ddp_conv_table_call(ops->convs, ops->nconvs, sizeof *ops->convs, ops->finalized, &ops->failure, id, n,
                               what);
}

/* A failure inside oneDNN, recorded as the call's: an internal error. */
static void onednn_status(DdpOps *ops, const ConvPlan *p, int id)
{
    const char *what;
    int status;
    if (ddp_onednn_conv_failed(p->onednn, &what, &status))
        OPS_FAIL(ops, "internal error: oneDNN's %s failed (status %d) in conv %d", what, status, id);
}

/* This thread's im2col matrix, and its block of one sample's weight gradient. */
static float *thread_scratch(DdpOps *ops)
{
    return ops->scratch + (size_t)omp_get_thread_num() * ops->sizes.per_thread;
}

static float *thread_wgrad_block(DdpOps *ops)
{
    return thread_scratch(ops) + ops->sizes.wgrad_offset;
}

static float *thread_packs(DdpOps *ops)
{
    return thread_scratch(ops) + ops->sizes.pack_offset;
}

static double *thread_wgrad_sums(DdpOps *ops)
{
    return (double *)(thread_scratch(ops) + ops->sizes.sums_offset);
}

/* The output columns ow whose tap (ow*stride - pad + s) lands inside a row of
 * width W: [*lo, *hi). Outside it the tap reads padding. */
static void valid_ow(const DdpConvShape *sh, int s, int *lo, int *hi)
{
    int first = sh->pad - s; /* ow*stride >= first */
    int last = sh->w - 1 + sh->pad - s; /* ow*stride <= last */
    *lo = first <= 0 ? 0 : (first + sh->stride - 1) / sh->stride;
    *hi = last < 0 ? 0 : last / sh->stride + 1;
    if (*hi > sh->out_w)
        *hi = sh->out_w;
    if (*lo > *hi)
        *lo = *hi;
}

/* Where im2col row J (the tap c, r, s) reads its first pixel in a group's
 * input, when nothing is padded: channel c, row r, column s. */
static size_t tap_window(const DdpConvShape *sh, int j)
{
    const int rs = sh->r * sh->s;
    return ((size_t)(j / rs) * sh->h + j / sh->s % sh->r) * sh->w + j % sh->s;
}

/* Rows [j0, j1) of the im2col matrix of X (one sample, one group: C/groups
 * channels) into COL, row j0 first. Row j is the tap (c, r, s), c = j / (R*S). */
static void im2col_rows(const DdpConvShape *sh, const float *x, int j0, int j1, float *col)
{
    const int rs = sh->r * sh->s, oh_n = sh->out_h, ow_n = sh->out_w, st = sh->stride;
    if (st == 1 && sh->pad == 0) {
        /* Every tap inside the input (the examples' 5x5 convs): a row of the
         * matrix is OUT_H runs of OUT_W floats, a window of x. Without the
         * bounds and the padding an MNIST step took 13% less time. */
        for (int j = j0; j < j1; j++) {
            const float *in = x + tap_window(sh, j);
            float *row = col + (size_t)(j - j0) * oh_n * ow_n;
            for (int oh = 0; oh < oh_n; oh++)
                OMP(simd)
                for (int ow = 0; ow < ow_n; ow++)
                    row[(size_t)oh * ow_n + ow] = in[(size_t)oh * sh->w + ow];
        }
        return;
    }
    for (int j = j0; j < j1; j++) {
        int c = j / rs, r = j / sh->s % sh->r, s = j % sh->s, lo, hi;
        valid_ow(sh, s, &lo, &hi);
        const float *xc = x + (size_t)c * sh->h * sh->w;
        float *row = col + (size_t)(j - j0) * oh_n * ow_n;
        for (int oh = 0; oh < oh_n; oh++) {
            float *out = row + (size_t)oh * ow_n;
            int ih = oh * st - sh->pad + r;
            if (ih < 0 || ih >= sh->h) {
                memset(out, 0, (size_t)ow_n * sizeof *out);
                continue;
            }
            const float *in = xc + (size_t)ih * sh->w;
            const int off = s - sh->pad; /* ow*st + off >= 0 from lo on */
            for (int ow = 0; ow < lo; ow++)
                out[ow] = 0.0f;
            if (st == 1) /* a few floats (8 to 56 in the examples): a loop, not a memcpy call */
                OMP(simd)
                for (int ow = lo; ow < hi; ow++)
                    out[ow] = in[ow + off];
            else
                for (int ow = lo; ow < hi; ow++)
                    out[ow] = in[ow * st + off];
            for (int ow = hi; ow < ow_n; ow++)
                out[ow] = 0.0f;
        }
    }
}

/* DX = col2im(COL) for one sample and group: each tap adds its column back to
 * the input pixel it read, in a fixed order, so the sum is deterministic. */
/* dx = beta * dx + col2im(col); beta 0 ignores dx's old contents. */
static void col2im(const DdpConvShape *sh, const float *col, float *dx, float beta)
{
    const int cg = sh->c / sh->groups, rs = sh->r * sh->s, oh_n = sh->out_h, ow_n = sh->out_w;
    const int st = sh->stride;
    const size_t count = (size_t)cg * sh->h * sh->w;
    if (beta == 0.0f)
        memset(dx, 0, count * sizeof *dx);
    else if (beta != 1.0f)
        for (size_t i = 0; i < count; i++)
            dx[i] *= beta;
    if (st == 1 && sh->pad == 0) {
        /* As im2col_rows: every tap inside, runs of OUT_W pixels; the same
         * additions in the same order as below, OUT_W of them at a time. */
        for (int j = 0; j < cg * rs; j++) {
            float *out = dx + tap_window(sh, j);
            const float *row = col + (size_t)j * oh_n * ow_n;
            for (int oh = 0; oh < oh_n; oh++)
                OMP(simd)
                for (int ow = 0; ow < ow_n; ow++)
                    out[(size_t)oh * sh->w + ow] += row[(size_t)oh * ow_n + ow];
        }
        return;
    }
    for (int j = 0; j < cg * rs; j++) {
        int c = j / rs, r = j / sh->s % sh->r, s = j % sh->s, lo, hi;
        valid_ow(sh, s, &lo, &hi);
        float *dxc = dx + (size_t)c * sh->h * sh->w;
        const float *row = col + (size_t)j * oh_n * ow_n;
        for (int oh = 0; oh < oh_n; oh++) {
            int ih = oh * st - sh->pad + r;
            if (ih < 0 || ih >= sh->h)
                continue;
            float *out = dxc + (size_t)ih * sh->w;
            const float *in = row + (size_t)oh * ow_n;
            const int off = s - sh->pad;
            for (int ow = lo; ow < hi; ow++)
                out[ow * st + off] += in[ow];
        }
    }
}

/* One sample's CHANNELS planes of PIXELS outputs: the epilogue of
 * ddp_conv_forward_bias and ddp_linear_forward_bias (a linear layer's
 * sample is its row, of one pixel per channel). */
static void apply_epilogue(float *y, int channels, int64_t pixels, const float *bias, DdpEpilogue epilogue)
{
    for (int c = 0; c < channels; c++) {
        float *plane = y + c * pixels;
        for (int64_t j = 0; j < pixels; j++)
            plane[j] = ddp_epilogue_apply(epilogue, plane[j], bias[c]);
    }
}

/* The same over N samples of K channels, the threads taking samples. */
static void apply_epilogue_batch(const DdpOps *ops, float *y, int n, int k, int64_t pixels, const float *bias,
                                 DdpEpilogue epilogue)
{
    OMP(parallel for schedule(static) num_threads(ops->nthreads) if(n > 1))
    for (int b = 0; b < n; b++)
        apply_epilogue(y + (size_t)b * k * pixels, k, pixels, bias, epilogue);
}

/* OUT (N samples of CHANNELS planes of PIXELS: NCHW) = IN (N samples of
 * PIXELS pixels of CHANNELS: NHWC), and nhwc_from_nchw the other way:
 * copies, so no value changes. */
static void nchw_from_nhwc(const DdpOps *ops, const float *in, int n, int channels, int64_t pixels, float *out)
{
    OMP(parallel for collapse(2) schedule(static) num_threads(ops->nthreads) if(n > 1))
    for (int b = 0; b < n; b++)
        for (int c = 0; c < channels; c++) {
            const float *from = in + (size_t)b * channels * pixels + c;
            float *to = out + ((size_t)b * channels + c) * pixels;
            for (int64_t i = 0; i < pixels; i++)
                to[i] = from[i * channels];
        }
}

static void nhwc_from_nchw(const DdpOps *ops, const float *in, int n, int channels, int64_t pixels, float *out)
{
    OMP(parallel for collapse(2) schedule(static) num_threads(ops->nthreads) if(n > 1))
    for (int b = 0; b < n; b++)
        for (int64_t i = 0; i < pixels; i++) {
            const float *from = in + (size_t)b * channels * pixels + i;
            float *to = out + ((size_t)b * pixels + i) * channels;
            for (int c = 0; c < channels; c++)
                to[c] = from[c * pixels];
        }
}

/* An NHWC conv's NCHW copies at batch N (ops->nchw, sized by finalize for
 * the planned batch): its input's (x or dx), and its output's (y or dy)
 * right after it. */
typedef struct {
    float *input, *output;
} NchwCopies;

static NchwCopies nchw_copies(const DdpOps *ops, const DdpConvShape *sh, int n)
{
    return (NchwCopies){ops->nchw, ops->nchw + ddp_conv_input_floats(sh, n)};
}

static int64_t input_pixels(const DdpConvShape *sh) { return (int64_t)sh->h * sh->w; }
static int64_t output_pixels(const DdpConvShape *sh) { return (int64_t)sh->out_h * sh->out_w; }

/* ddp_conv_forward of conv ID (plan P), and with BIAS (or NULL)
 * ddp_conv_forward_bias, on NCHW operands: the epilogue applied to each
 * sample's planes right after its product where this file makes them, while
 * they are in cache, else after the library's call. */
static void conv_forward_nchw(DdpOps *ops, const ConvPlan *p, int id, int n, const float *x, const float *w,
                              const float *bias, DdpEpilogue epilogue, float *y)
{
    if (!round_operands(ops, &x, ddp_conv_input_floats(&p->slot.shape, n), &w, ddp_conv_weight_floats(&p->slot.shape)))
        return;
    const DdpConvShape *sh = &p->slot.shape;
    const int pix = sh->out_h * sh->out_w;
    if (p->onednn_passes & DDP_ONEDNN_DATA) {
        ddp_onednn_conv_forward(p->onednn, n, x, w, y);
        onednn_status(ops, p, id);
        if (bias)
            apply_epilogue_batch(ops, y, n, sh->k, pix, bias, epilogue);
        return;
    }
    if (p->winograd) {
        ddp_winograd_forward(&p->wino, &p->slot.shape, ops->nthreads, ops->winograd_scratch, n, x, w, y);
        if (bias)
            apply_epilogue_batch(ops, y, n, sh->k, pix, bias, epilogue);
        return;
    }
    const int groups = sh->groups, cg = sh->c / groups, kg = sh->k / groups;
    const int crs = cg * sh->r * sh->s, hw = sh->h * sh->w;
    OMP(parallel for schedule(static) num_threads(ops->nthreads) if(n > 1))
    for (int b = 0; b < n; b++) {
        float *col = thread_scratch(ops);
        for (int g = 0; g < groups; g++) {
            const float *xg = x + ((size_t)b * sh->c + (size_t)g * cg) * hw;
            float *yg = y + ((size_t)b * sh->k + (size_t)g * kg) * pix;
            const float *m = xg;
            if (!p->direct) {
                im2col_rows(sh, xg, 0, crs, col);
                m = col;
            }
            ddp_sgemm_fixed(0, 0, kg, pix, crs, 1.0f, w + (size_t)g * kg * crs, crs, m, pix, 0.0f, yg, pix,
                            thread_packs(ops));
        }
        if (bias)
            apply_epilogue(y + (size_t)b * sh->k * pix, sh->k, pix, bias, epilogue);
    }
}

/* ddp_conv_forward and ddp_conv_forward_bias (WHAT names the call): an
 * NHWC conv through its NCHW copies. */
static void conv_forward(DdpOps *ops, int id, int n, const float *x, const float *w, const float *bias,
                         DdpEpilogue epilogue, float *y, const char *what)
{
    const ConvPlan *p = conv_for_call(ops, id, n, what);
    if (!p)
        return;
    const DdpConvShape *sh = &p->slot.shape;
    if (!sh->channels_last) {
        conv_forward_nchw(ops, p, id, n, x, w, bias, epilogue, y);
        return;
    }
    const NchwCopies nchw = nchw_copies(ops, sh, n);
    nchw_from_nhwc(ops, x, n, sh->c, input_pixels(sh), nchw.input);
    conv_forward_nchw(ops, p, id, n, nchw.input, w, bias, epilogue, nchw.output);
    nhwc_from_nchw(ops, nchw.output, n, sh->k, output_pixels(sh), y);
}

void ddp_conv_forward(DdpOps *ops, int id, int n, const float *x, const float *w, float *y)
{
    conv_forward(ops, id, n, x, w, NULL, DDP_EPILOGUE_BIAS, y, "ddp_conv_forward");
}

void ddp_conv_forward_bias(DdpOps *ops, int id, int n, const float *x, const float *w, const float *bias,
                           DdpEpilogue epilogue, float *y)
{
    conv_forward(ops, id, n, x, w, bias, epilogue, y, "ddp_conv_forward_bias");
}

/* ddp_conv_backward_data of conv ID (plan P) on NCHW operands. */
static void conv_backward_data_nchw(DdpOps *ops, const ConvPlan *p, int id, int n, const float *dy, const float *w,
                                    float *dx, float beta)
{
    if (!round_operands(ops, &dy, ddp_conv_output_floats(&p->slot.shape, n), &w,
                        ddp_conv_weight_floats(&p->slot.shape)))
        return;
    if (p->onednn_passes & DDP_ONEDNN_DATA) {
        ddp_onednn_conv_backward_data(p->onednn, ops->onednn_scratch, n, dy, w, dx, beta);
        onednn_status(ops, p, id);
        return;
    }
    if (p->winograd) {
        ddp_winograd_backward_data(&p->wino, &p->slot.shape, ops->nthreads, ops->winograd_scratch, n, dy, w, dx,
                                   beta);
        return;
    }
    const DdpConvShape *sh = &p->slot.shape;
    const int groups = sh->groups, cg = sh->c / groups, kg = sh->k / groups;
    const int crs = cg * sh->r * sh->s, hw = sh->h * sh->w, pix = sh->out_h * sh->out_w;
    OMP(parallel for schedule(static) num_threads(ops->nthreads) if(n > 1))
    for (int b = 0; b < n; b++) {
        float *col = thread_scratch(ops);
        for (int g = 0; g < groups; g++) {
            const float *dyg = dy + ((size_t)b * sh->k + (size_t)g * kg) * pix;
            float *dxg = dx + ((size_t)b * sh->c + (size_t)g * cg) * hw;
            /* W^T . dy is the gradient of the im2col matrix; direct, that is dx. */
            ddp_sgemm_fixed(1, 0, crs, pix, kg, 1.0f, w + (size_t)g * kg * crs, crs, dyg, pix,
                            p->direct ? beta : 0.0f, p->direct ? dxg : col, pix, thread_packs(ops));
            if (!p->direct)
                col2im(sh, col, dxg, beta);
        }
    }
}

void ddp_conv_backward_data(DdpOps *ops, int id, int n, const float *dy, const float *w,
                            float *dx, float beta)
{
    const ConvPlan *p = conv_for_call(ops, id, n, "ddp_conv_backward_data");
    if (!p)
        return;
    const DdpConvShape *sh = &p->slot.shape;
    if (!sh->channels_last) {
        conv_backward_data_nchw(ops, p, id, n, dy, w, dx, beta);
        return;
    }
    const NchwCopies nchw = nchw_copies(ops, sh, n);
    nchw_from_nhwc(ops, dy, n, sh->k, output_pixels(sh), nchw.output);
    if (beta != 0.0f) /* the NCHW call adds to dx's copy, in its own order */
        nchw_from_nhwc(ops, dx, n, sh->c, input_pixels(sh), nchw.input);
    conv_backward_data_nchw(ops, p, id, n, nchw.output, w, nchw.input, beta);
    nhwc_from_nchw(ops, nchw.input, n, sh->c, input_pixels(sh), dx);
}

/* ddp_conv_backward_filter of conv ID (plan P) on NCHW operands. */
static void conv_backward_filter_nchw(DdpOps *ops, const ConvPlan *p, int id, int n, const float *x,
                                      const float *dy, DdpGrad *dw, float beta)
{
    if (!round_operands(ops, &x, ddp_conv_input_floats(&p->slot.shape, n), &dy,
                        ddp_conv_output_floats(&p->slot.shape, n)))
        return;
    if (p->onednn_passes & DDP_ONEDNN_FILTER) {
        ddp_onednn_conv_backward_filter(p->onednn, ops->onednn_scratch, n, x, dy, dw, beta);
        onednn_status(ops, p, id);
        return;
    }
    if (p->winograd_filter) {
        ddp_winograd_backward_filter(&p->wino, &p->slot.shape, ops->nthreads, ops->winograd_scratch, n, x, dy,
                                     dw, beta);
        return;
    }
    const DdpConvShape *sh = &p->slot.shape;
    const int groups = sh->groups, cg = sh->c / groups, kg = sh->k / groups;
    const int crs = cg * sh->r * sh->s, hw = sh->h * sh->w, pix = sh->out_h * sh->out_w;
    const int block = p->wgrad_rows, blocks = (crs + block - 1) / block;
    OMP(parallel for schedule(dynamic) num_threads(ops->nthreads) if(groups * blocks > 1))
    for (int task = 0; task < groups * blocks; task++) {
        int g = task / blocks, j0 = task % blocks * block;
        int rows = crs - j0 < block ? crs - j0 : block;
        float *col = thread_scratch(ops), *part = thread_wgrad_block(ops);
        /* The block's sums, kept apart (HI, LO) while the samples' parts
         * are added, then merged into dw's pairs. */
        double *sum_hi = thread_wgrad_sums(ops), *sum_lo = sum_hi + (size_t)kg * rows;
        for (int b = 0; b < n; b++) {
            const float *xg = x + ((size_t)b * sh->c + (size_t)g * cg) * hw;
            const float *dyg = dy + ((size_t)b * sh->k + (size_t)g * kg) * pix;
            const float *m = xg + (size_t)j0 * hw;
            if (!p->direct) {
                im2col_rows(sh, xg, j0, j0 + rows, col);
                m = col;
            }
            /* This sample's part in float, the same bits whichever batch it
             * is in, added to the order-free sums. */
            ddp_sgemm_fixed(0, 1, kg, rows, pix, 1.0f, dyg, pix, m, pix, 0.0f, part, rows, thread_packs(ops));
            ddp_exact_add_floats(sum_hi, sum_lo, part, kg * rows, b == 0, &ddp_grad_window);
        }
        /* Columns j0.. of this group's K/groups x CRS block of dw: the
         * batch's sums (empty with no samples), added to dw's with beta 1. */
        DdpGrad *dwt = dw + (size_t)g * kg * crs + j0;
        for (int i = 0; i < kg; i++)
            for (int j = 0; j < rows; j++) {
                const DdpExact sum = n ? (DdpExact){sum_hi[(size_t)i * rows + j], sum_lo[(size_t)i * rows + j]}
                                       : (DdpExact){0.0, 0.0};
                DdpGrad *out = dwt + (size_t)i * crs + j;
                if (beta == 0.0f)
                    *out = sum;
                else
                    ddp_exact_merge(out, sum);
            }
    }
}

void ddp_conv_backward_filter(DdpOps *ops, int id, int n, const float *x, const float *dy,
                              DdpGrad *dw, float beta)
{
    const ConvPlan *p = conv_for_call(ops, id, n, "ddp_conv_backward_filter");
    if (!p)
        return;
    const DdpConvShape *sh = &p->slot.shape;
    if (!sh->channels_last) {
        conv_backward_filter_nchw(ops, p, id, n, x, dy, dw, beta);
        return;
    }
    /* dw is k x c/groups x r x s in either layout: only x and dy are copied */
    const NchwCopies nchw = nchw_copies(ops, sh, n);
    nchw_from_nhwc(ops, x, n, sh->c, input_pixels(sh), nchw.input);
    nchw_from_nhwc(ops, dy, n, sh->k, output_pixels(sh), nchw.output);
    conv_backward_filter_nchw(ops, p, id, n, nchw.input, nchw.output, dw, beta);
}

/* BLAS's own argument rules, checked here as cuBLAS checks them on GPUs, so
 * that a bad call is reported the same way on both builds. */
static int gemm_args_ok(DdpOps *ops, int trans_a, int trans_b, int m, int n, int k, int lda,
                        int ldb, int ldc)
{
    int a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < (a_cols > 1 ? a_cols : 1) ||
        ldb < (b_cols > 1 ? b_cols : 1) || ldc < (n > 1 ? n : 1)) {
        OPS_FAIL(ops, "internal error: ddp_gemm(trans_a=%d, trans_b=%d, m=%d, n=%d, k=%d, "
                      "lda=%d, ldb=%d, ldc=%d): bad sizes",
                 trans_a, trans_b, m, n, k, lda, ldb, ldc);
        return 0;
    }
    return 1;
}

/* BUF, grown to BYTES if smaller (on the first step: the sizes are the same
 * every step after); NULL, failure recorded, if memory runs out. */
static void *grow(DdpOps *ops, GrowingBuffer *buf, size_t bytes, const char *what)
{
    if (bytes > buf->bytes) {
        ddp_device_call_note(DDP_CALL_ALLOC);
        void *grown = realloc(buf->data, bytes);
        if (!grown) {
            OPS_FAIL(ops, "out of memory: %.1f MiB of scratch for %s", bytes / 1048576.0, what);
            return NULL;
        }
        buf->data = grown;
        buf->bytes = bytes;
    }
    return buf->data;
}

/* How ddp_gemm and ddp_gemm_grad split an M x N result into tasks: blocks
 * of rows times blocks of COLS columns, row-major. Small products are one
 * task (waking the team costs more than it saves); larger ones take at most
 * TASK_ROWS rows a block, in whole tiles of gemm_cpu.c, and, where that
 * makes fewer blocks than threads, columns split so that every thread has a
 * task. More row blocks than threads come in a multiple of the threads and
 * split the tiles as evenly as they go: blocks of 96 rows gave mlp.net's
 * first layer (512 rows) 5 x 96 + 32, so one of 2 threads had 288 rows and
 * the other waited with 224. No element's bits depend on the split
 * (gemm_cpu.h). ROWS is the most rows of any block (for scratch). */
typedef struct {
    int rows, row_blocks, cols, col_blocks, tasks;
} TaskGrid;

static TaskGrid task_grid(const DdpOps *ops, int m, int n, int k)
{
    TaskGrid g = {m, 1, n, 1, 1};
    if ((long)m * n * k < GEMM_SPLIT_MIN_MACS || ops->nthreads < 2)
        return g;
    const int tiles = (m + DDP_GEMM_TILE_ROWS - 1) / DDP_GEMM_TILE_ROWS;
    int row_blocks = (m + TASK_ROWS - 1) / TASK_ROWS;
    if (row_blocks > ops->nthreads)
        row_blocks = (row_blocks + ops->nthreads - 1) / ops->nthreads * ops->nthreads;
    g.row_blocks = row_blocks < tiles ? row_blocks : tiles;
    g.rows = (tiles + g.row_blocks - 1) / g.row_blocks * DDP_GEMM_TILE_ROWS;
    g.rows = g.rows < m ? g.rows : m;
    const int want = g.row_blocks >= ops->nthreads ? 1 : (ops->nthreads + g.row_blocks - 1) / g.row_blocks;
    g.cols = ((n + want - 1) / want + TASK_COLS_MULTIPLE - 1) / TASK_COLS_MULTIPLE * TASK_COLS_MULTIPLE;
    g.col_blocks = (n + g.cols - 1) / g.cols;
    g.tasks = g.row_blocks * g.col_blocks;
    return g;
}

/* Task T's block: rows [*i0, *i0 + *m_t), columns [*j0, *j0 + *n_t). Row
 * block b holds tiles [b * tiles / row_blocks, (b + 1) * tiles / row_blocks). */
static void task_block(const TaskGrid *g, int t, int m, int n, int *i0, int *j0, int *m_t, int *n_t)
{
    const int b = t / g->col_blocks, tiles = (m + DDP_GEMM_TILE_ROWS - 1) / DDP_GEMM_TILE_ROWS;
    const int first = (int)((long)b * tiles / g->row_blocks) * DDP_GEMM_TILE_ROWS;
    const int end = (int)((long)(b + 1) * tiles / g->row_blocks) * DDP_GEMM_TILE_ROWS;
    *i0 = first;
    *m_t = (end < m ? end : m) - first;
    *j0 = t % g->col_blocks * g->cols;
    *n_t = n - *j0 < g->cols ? n - *j0 : g->cols;
}

void ddp_gemm(DdpOps *ops, int trans_a, int trans_b, int m, int n, int k, float alpha,
              const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    if (!gemm_args_ok(ops, trans_a, trans_b, m, n, k, lda, ldb, ldc) || m == 0 || n == 0 ||
        !round_operands(ops, &a, trans_a ? ddp_matrix_span(k, m, lda) : ddp_matrix_span(m, k, lda), &b,
                        trans_b ? ddp_matrix_span(n, k, ldb) : ddp_matrix_span(k, n, ldb)))
        return;
    const TaskGrid g = task_grid(ops, m, n, k);
    const size_t each = ddp_sgemm_fixed_scratch(g.rows, k);
    float *packs = grow(ops, &ops->gemm_packs, each * (size_t)ops->nthreads * sizeof *packs,
                        "a product's packed copies");
    if (!packs)
        return;
    OMP(parallel for schedule(dynamic) num_threads(ops->nthreads) if(g.tasks > 1))
    for (int t = 0; t < g.tasks; t++) {
        int i0, j0, m_t, n_t;
        task_block(&g, t, m, n, &i0, &j0, &m_t, &n_t);
        ddp_sgemm_fixed(trans_a, trans_b, m_t, n_t, k, alpha, a + (trans_a ? (size_t)i0 : (size_t)i0 * lda), lda,
                        b + (trans_b ? (size_t)j0 * ldb : (size_t)j0), ldb, beta, c + (size_t)i0 * ldc + j0, ldc,
                        packs + (size_t)omp_get_thread_num() * each);
    }
}

void ddp_ops_describe_fusion(const DdpOps *ops, char *buf, size_t len)
{
    (void)ops;
    if (len)
        buf[0] = '\0';
}

void ddp_linear_forward_bias(DdpOps *ops, int n, int in, int out, const float *x, const float *w, const float *bias,
                             DdpEpilogue epilogue, float *y)
{
    ddp_gemm(ops, 0, 1, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    if (n > 0 && in > 0 && out > 0) /* else nothing to add to, or bad sizes, which ddp_gemm recorded */
        apply_epilogue_batch(ops, y, n, out, 1, bias, epilogue);
}

/* The largest |a| * |b| of any product of row P of A (M values, stride-1) with
 * row P of B (N values): a sample's largest part of a linear layer's weight
 * gradient; NaN where either row has a NaN. */
static double largest_product(const float *a, int m, const float *b, int n)
{
    return (double)ddp_largest_magnitude(a, m) * ddp_largest_magnitude(b, n);
}

/* DW's sums, one part at a time with ddp_exact_add's checks: for a batch with
 * a part at or above the window's limit (or a NaN), which the fast tiles do
 * not check. The same bits as theirs for every other element. */
static void gemm_grad_checked(int m, int n, int k, const float *dy, int ldy, const float *x, int ldx, int accumulate,
                              DdpGrad *dw, int ldw)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            DdpGrad *out = dw + (size_t)i * ldw + j;
            if (!accumulate)
                *out = (DdpGrad){0.0, 0.0};
            for (int p = 0; p < k; p++)
                ddp_exact_add(out, (double)dy[(size_t)p * ldy + i] * x[(size_t)p * ldx + j], &ddp_grad_window);
        }
}

void ddp_gemm_grad(DdpOps *ops, int m, int n, int k, const float *dy, int ldy, const float *x, int ldx,
                   float beta, DdpGrad *dw, int ldw)
{
    if (!gemm_args_ok(ops, 1, 0, m, n, k, ldy, ldx, ldw) || m == 0 || n == 0 ||
        !round_operands(ops, &dy, ddp_matrix_span(k, m, ldy), &x, ddp_matrix_span(k, n, ldx)))
        return;
    const int accumulate = beta != 0.0f;
    /* NaN compares false: a sample with a NaN goes the checked way too,
     * where it makes its sums NaN. */
    for (int p = 0; p < k; p++)
        if (!(largest_product(dy + (size_t)p * ldy, m, x + (size_t)p * ldx, n) < ddp_grad_window.limit)) {
            gemm_grad_checked(m, n, k, dy, ldy, x, ldx, accumulate, dw, ldw);
            return;
        }
    const TaskGrid g = task_grid(ops, m, n, k);
    const size_t each = ddp_gradsum_exact_scratch(g.rows, k);
    double *packs = grow(ops, &ops->gemm_grad_packs, each * (size_t)ops->nthreads * sizeof *packs,
                         "a linear layer's weight gradient");
    if (!packs)
        return;
    OMP(parallel for schedule(dynamic) num_threads(ops->nthreads) if(g.tasks > 1))
    for (int t = 0; t < g.tasks; t++) {
        int i0, j0, m_t, n_t;
        task_block(&g, t, m, n, &i0, &j0, &m_t, &n_t);
        ddp_gradsum_exact(m_t, n_t, k, dy + i0, ldy, x + j0, ldx, accumulate, dw + (size_t)i0 * ldw + j0, ldw,
                          &ddp_grad_window, packs + (size_t)omp_get_thread_num() * each);
    }
}
