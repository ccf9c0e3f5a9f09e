/*
 * ops_cuda.cu: the library ops on an NVIDIA GPU (interface in ops.h): cuDNN for
 * the convolutions, cuBLAS for the products, both on the one stream the program
 * gives ddp_ops_create.
 *
 * Shaped for a training step that may be captured in a CUDA graph:
 *  - Everything that allocates or synchronises happens in ddp_ops_create and
 *    ddp_ops_finalize: the handles, cuBLAS's workspace (handed to it with
 *    cublasSetWorkspace, else cuBLAS would allocate its own during capture), and
 *    one cuDNN workspace shared by every conv, sized for the hungriest algorithm
 *    chosen; in tf32 and bf16, the two copies operands are rounded into. The
 *    per-step calls only enqueue work on the stream.
 *  - ddp_ops_plan_conv only records the shape; ddp_ops_finalize builds the
 *    descriptors and chooses each conv's algorithms from cuDNN's heuristics
 *    (cudnnGetConvolution*Algorithm_v7), never by timing them (cudnnFind*):
 *    timings of near-equal algorithms differ from one process to the next, so
 *    a resumed run could choose otherwise than the run it resumes and sum in
 *    another order. The heuristics' list is fixed for a GPU model, a cuDNN
 *    version and a shape; the first entry that passes ddp_conv_choose
 *    (device_rules.h: runs, fits DDP_CONV_WORKSPACE_LIMIT by the larger of
 *    the list's figure and cuDNN's own query, keeps to the math,
 *    deterministic) is taken. DDP_CUDNN_BENCHMARK=1 (PyTorch's
 *    cudnn.benchmark) times them instead (cudnnFind*Ex, once, at the planned
 *    batch) and takes the fastest that passes: faster steps where the
 *    heuristics' first is slow. The promise then rests on a record
 *    (conv_choices.h): ddp_ops_conv_choices says what was timed, and
 *    ddp_ops_take_conv_choices makes another process (another rank, a
 *    resumed run) take it instead of its own timing.
 *  - Each conv keeps its descriptors for the planned (largest) batch. A smaller
 *    batch (the last of an epoch) re-sets n in the two tensor descriptors, a
 *    host-side change that allocates nothing, and checks the chosen algorithm
 *    still fits the workspace; if not, it uses its fallback: the first
 *    algorithm of the list that needs none (or a taken record's).
 *  - The per-step calls return nothing; the first cuDNN or cuBLAS failure is
 *    recorded with its file:line (nccl-tests' CHECK habit) for ddp_ops_status.
 *  - A conv planned channels_last has NHWC tensor descriptors for x and y,
 *    and an NHWC filter descriptor too, whose memory is K x R x S x C/groups
 *    ("KRSC"): cuDNN's NHWC kernels (its tensor-core ones above all) want the
 *    filter in the activations' layout, as PyTorch gives them by making a
 *    channels_last model's weights channels_last. The parameters stay
 *    K x C/groups x R x S (ops.h), so forward and backward data read the
 *    weights' KRSC copy that weight_krsc_kernel makes (rounding it too in
 *    tf32 and bf16), and backward filter writes the gradient in KRSC and
 *    weight_grad_kcrs_kernel adds it to dw in dw's order. Both go through one
 *    buffer, ops->krsc, that finalize sizes for the largest NHWC conv's
 *    weights; like the rounded copies it is not in ddp_ops_workspace_bytes
 *    (cuDNN's workspace alone), but in ddp_ops_planned_bytes, which
 *    trainer.c's start-up memory check counts.
 *
 * Numerics, to keep the GPU build next to the CPU one and runs repeatable:
 *  - FP32 math by default: cuDNN descriptors ask for CUDNN_FMA_MATH (cuDNN's
 *    default math would allow TF32 on Ampere and later) and cuBLAS keeps
 *    CUBLAS_DEFAULT_MATH. Precisions tf32 and bf16 (ddp_ops_set_precision)
 *    switch both to TF32 tensor cores: CUDNN_TENSOR_OP_MATH (never
 *    ..._ALLOW_CONVERSION, which may compute in fp16) and
 *    CUBLAS_TF32_TENSOR_OP_MATH; NVIDIA_TF32_OVERRIDE=0 overrides that inside
 *    the libraries, and the run then says FP32 (ddp_math_settings).
 *  - Precision tf32 and bf16: every call's two operands are rounded by this
 *    file's kernel (precision.h's rule: the CPU build's bits) into two
 *    buffers finalize sizes for the planned convs and linear layers, then
 *    multiplied on TF32 tensor cores, exactly, since a rounded value is a
 *    TF32 one: the libraries' own conversion (cuBLAS's keeps subnormals,
 *    TF32's may truncate) never changes it. cuDNN's FFT and Winograd
 *    algorithms transform the operands first, and the transformed values are
 *    not TF32 ones: those are taken on FP32 math only (DdpConvCandidate.transforms).
 *  - Only deterministic cuDNN algorithms are chosen (backward ALGO_0 and
 *    filter ALGO_3 sum with atomics), since --resume promises bit-for-bit
 *    continuation; if a shape has none, the first nondeterministic one, and
 *    ddp_ops_describe_conv says so. DDP_ALLOW_NONDETERMINISTIC=1 lifts that
 *    for speed.
 *  - alpha and beta are host values read when a call is made: a captured graph
 *    replays the beta it was captured with.
 *
 * The legacy cuDNN convolution API (deprecated in cuDNN 9, still shipped) is
 * used on purpose: one call per op, graph-capturable, and readable next to the
 * generated code. Its one fusion, cudnnConvolutionBiasActivationForward, adds
 * a conv's bias and applies its relu in the conv's own pass over y
 * (ddp_conv_forward_bias); a linear layer's go into cuBLASLt's epilogue
 * (lt_linear.h). Where either library refuses a shape, this file's
 * epilogue_kernel does the same after the plain call. The cuDNN frontend
 * graph API is the path if more fusion is wanted.
 */
#include "ops.h"
#include "ops_conv_table.h"  // DdpConvSlot, ddp_conv_table_*: the planned convs
#include "ops_failure.h"  // DdpOpsFailure: the first failure of a per-step call
#include "cuda_check.h"  // CUDA_TRY, call_name_len
#include "device_calls.h"  // ddp_device_call_note: the allocations and waits counted as the trainer's steps see them
#include "device_rules.h"  // ddp_conv_choose, ddp_math_settings, ddp_cublas_workspace_bytes, ddp_cudnn_conv_check
#include "precision.h"     // ddp_round_significand: tf32 and bf16 operands
#include "ops_sizes.h"     // ddp_conv_*_floats, ddp_matrix_span: what a call's operands span
#include "lt_linear.h"     // DdpLtLinear: a linear layer's bias and relu in cuBLASLt's epilogue
#include "conv_choices.h"  // DdpConvChoices: the algorithms as a record

#include <cublas_v2.h>     // cublasSgemm, cublasSetWorkspace
#include <cuda_runtime.h>
#include <cudnn.h>         // cudnnConvolution*, cudnnGetConvolution*Algorithm_v7
#include <stdarg.h>
#include <stdint.h>        // SIZE_MAX
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FWD, DATA, FILTER, NDIRS };
static const char *const DIR_NAMES[NDIRS] = {"fwd", "bwd-data", "bwd-filter"};
/* the record of the algorithms (conv_choices.h) holds these directions and numbers */
static_assert((int)NDIRS == (int)DDP_CONV_DIRECTIONS, "a record's directions are these");
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_COUNT <= DDP_CONV_ALGO_MOST + 1 &&
                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT <= DDP_CONV_ALGO_MOST + 1 &&
                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT <= DDP_CONV_ALGO_MOST + 1,
              "a record's algorithm numbers cover cuDNN's");

/* The algorithm chosen for one direction. */
typedef struct {
    int algo;             /* a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    cudnnMathType_t math;
    size_t bytes;         /* workspace at the planned batch */
    int deterministic;
} Choice;

typedef struct {
    DdpConvSlot slot; /* the shape, planned: ops_conv_table.h */
    int n; /* the batch the tensor descriptors hold now */
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    /* One convolution descriptor per direction: each carries the math type of
     * the algorithm chosen for it. */
    cudnnConvolutionDescriptor_t conv[NDIRS];
    cudnnTensorDescriptor_t bias; /* 1 x k x 1 x 1: ddp_conv_forward_bias's */
    int fused;                    /* a fused call ran */
    int refused;                  /* one went conv, then epilogue_kernel: cuDNN refused it, or (a bias alone
                                   * with another algorithm than IMPLICIT_PRECOMP_GEMM) it was not offered */
    Choice best[NDIRS];     /* first allowed at the planned batch (or taken: ddp_ops_take_conv_choices) */
    Choice fallback[NDIRS]; /* first allowed needing no workspace, else best (or taken) */
    int use_fallback[NDIRS];/* at the current n, best does not fit */
} ConvPlan;

struct DdpOps {
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    cudaStream_t stream;
    void *workspace;        /* cuDNN's, shared by every conv */
    size_t workspace_bytes;
    void *cublas_workspace;
    DdpLtLinear *lt;        /* cuBLASLt, for the linear layers' fused epilogue */
    cudnnActivationDescriptor_t activation[2]; /* by DdpEpilogue: identity, relu */
    DdpMathSettings math;
    DdpPrecision precision;
    float *rounded[2];      /* tf32, bf16: a call's two operands, rounded; finalize sizes them */
    size_t rounded_floats;  /* each */
    float *krsc;            /* an NHWC conv's weights, or their gradient, K x R x S x C/groups; finalize sizes it */
    size_t linear_floats;   /* the largest operand of a planned linear layer */
    int allow_nondeterministic;
    int benchmark; /* DDP_CUDNN_BENCHMARK or ddp_ops_time_algorithms: choose by cudnnFind*Ex's timings */
    int choices_kept; /* the convs' algorithms were timed or taken: ddp_ops_conv_choices says them */

    ConvPlan *convs;
    int nconvs;
    int finalized;

    /* The first failure of a per-step call, reported by ddp_ops_status. */
    DdpOpsFailure failure;
};

/* ---- errors ------------------------------------------------------------------- */

#define OPS_FAIL(ops, ...) ddp_ops_failure_record(&(ops)->failure, __FILE__, __LINE__, __VA_ARGS__)

/* Set-up code returns the failure to its caller (CUDA_TRY, from cuda_check.h,
 * for the CUDA runtime's calls)... */
#define CUDNN_TRY(call)                                                                    \
    do {                                                                                   \
        cudnnStatus_t s_ = (call);                                                         \
        if (s_ != CUDNN_STATUS_SUCCESS)                                                    \
            return DDP_ERR(DDP_FAIL, "%.*s: %s", call_name_len(#call), #call,              \
                           cudnnGetErrorString(s_));                                       \
    } while (0)
#define CUBLAS_TRY(call)                                                                   \
    do {                                                                                   \
        cublasStatus_t s_ = (call);                                                        \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                   \
            return DDP_ERR(DDP_FAIL, "%.*s: %s", call_name_len(#call), #call,              \
                           cublasGetStatusName(s_));                                       \
    } while (0)

/* ...the per-step calls record it in OPS and evaluate to whether it succeeded. */
#define CUDNN_RECORD(ops, call) cudnn_record((ops), (call), #call, __FILE__, __LINE__)
#define CUBLAS_RECORD(ops, call) cublas_record((ops), (call), #call, __FILE__, __LINE__)

static int cudnn_record(DdpOps *ops, cudnnStatus_t s, const char *call, const char *file,
                        int line)
{
    if (s == CUDNN_STATUS_SUCCESS)
        return 1;
    ddp_ops_failure_record(&ops->failure, file, line, "%.*s: %s", call_name_len(call), call, cudnnGetErrorString(s));
    return 0;
}

static int cublas_record(DdpOps *ops, cublasStatus_t s, const char *call, const char *file,
                         int line)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 1;
    ddp_ops_failure_record(&ops->failure, file, line, "%.*s: %s", call_name_len(call), call, cublasGetStatusName(s));
    return 0;
}

/* ---- the context ---------------------------------------------------------------- */

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static DdpStatus create_handles(DdpOps *o)
{
    int device = 0, major = 0;
    CUDA_TRY(cudaGetDevice(&device));
    CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    size_t cublas_bytes = ddp_cublas_workspace_bytes(major);

    CUDNN_TRY(cudnnCreate(&o->cudnn));
    CUDNN_TRY(cudnnSetStream(o->cudnn, o->stream));
    CUBLAS_TRY(cublasCreate(&o->cublas));
    /* SetStream resets cuBLAS to its own workspace pool, so it goes first. */
    CUBLAS_TRY(cublasSetStream(o->cublas, o->stream));
    ddp_device_call_note(DDP_CALL_ALLOC);
    CUDA_TRY(cudaMalloc(&o->cublas_workspace, cublas_bytes));
    CUBLAS_TRY(cublasSetWorkspace(o->cublas, o->cublas_workspace, cublas_bytes));
    CUBLAS_TRY(cublasSetMathMode(o->cublas, CUBLAS_DEFAULT_MATH));
    CUBLAS_TRY(ddp_lt_linear_create(&o->lt, o->stream, o->cublas_workspace, cublas_bytes));
    const cudnnActivationMode_t modes[2] = {CUDNN_ACTIVATION_IDENTITY, CUDNN_ACTIVATION_RELU};
    for (int i = 0; i < 2; i++) {
        CUDNN_TRY(cudnnCreateActivationDescriptor(&o->activation[i]));
        CUDNN_TRY(cudnnSetActivationDescriptor(o->activation[i], modes[i], CUDNN_PROPAGATE_NAN, 0.0)); /* as PyTorch's relu */
    }
    return DDP_OK;
}

DdpStatus ddp_ops_create(DdpOps **ops, void *stream)
{
    *ops = NULL;
    DdpOps *o = (DdpOps *)calloc(1, sizeof *o);
    if (!o)
        return DDP_ERR(DDP_FAIL, "out of memory creating the ops context");
    o->stream = (cudaStream_t)stream;
    o->math = ddp_math_settings(DDP_PRECISION_FP32, getenv("NVIDIA_TF32_OVERRIDE"));
    o->allow_nondeterministic = env_flag("DDP_ALLOW_NONDETERMINISTIC");
    o->benchmark = env_flag("DDP_CUDNN_BENCHMARK");
    DdpStatus st = create_handles(o);
    if (st != DDP_OK) {
        ddp_ops_destroy(o);
        return st;
    }
    *ops = o;
    return DDP_OK;
}

static void destroy_descriptors(ConvPlan *p)
{
    if (p->x)
        cudnnDestroyTensorDescriptor(p->x);
    if (p->y)
        cudnnDestroyTensorDescriptor(p->y);
    if (p->w)
        cudnnDestroyFilterDescriptor(p->w);
    if (p->bias)
        cudnnDestroyTensorDescriptor(p->bias);
    for (int d = 0; d < NDIRS; d++)
        if (p->conv[d])
            cudnnDestroyConvolutionDescriptor(p->conv[d]);
}

void ddp_ops_destroy(DdpOps *ops)
{
    if (!ops)
        return;
    for (int i = 0; i < ops->nconvs; i++)
        destroy_descriptors(&ops->convs[i]);
    free(ops->convs);
    /* Teardown: failures here change nothing the caller could act on. */
    cudaFree(ops->workspace);
    cudaFree(ops->cublas_workspace);
    cudaFree(ops->rounded[0]);
    cudaFree(ops->rounded[1]);
    cudaFree(ops->krsc);
    ddp_lt_linear_destroy(ops->lt);
    for (int i = 0; i < 2; i++)
        if (ops->activation[i])
            cudnnDestroyActivationDescriptor(ops->activation[i]);
    if (ops->cublas)
        cublasDestroy(ops->cublas);
    if (ops->cudnn)
        cudnnDestroy(ops->cudnn);
    free(ops);
}

/* ---- planning -------------------------------------------------------------------- */

DdpStatus ddp_ops_plan_linear(DdpOps *ops, int n, int in, int out)
{
    DDP_CHECK(ddp_linear_plan_check(ops->finalized, n, in, out));
    const size_t floats = ddp_linear_operand_floats(n, in, out);
    ops->linear_floats = floats > ops->linear_floats ? floats : ops->linear_floats;
    return DDP_OK;
}

DdpStatus ddp_ops_set_precision(DdpOps *ops, DdpPrecision precision)
{
    DDP_CHECK(ddp_precision_set_check(ops->finalized, precision));
    ops->precision = precision;
    ops->math = ddp_math_settings(precision, getenv("NVIDIA_TF32_OVERRIDE"));
    /* cublasSgemm on rounded operands: TF32 tensor cores multiply them exactly */
    CUBLAS_TRY(cublasSetMathMode(ops->cublas, ops->math.cublas_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                    : CUBLAS_DEFAULT_MATH));
    return DDP_OK;
}

static cudnnMathType_t cudnn_math(DdpConvMath m)
{
    switch (m) {
    case DDP_CONV_MATH_DEFAULT: return CUDNN_DEFAULT_MATH;
    case DDP_CONV_MATH_TENSOR_OP: return CUDNN_TENSOR_OP_MATH;
    case DDP_CONV_MATH_TENSOR_OP_CONV: return CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    case DDP_CONV_MATH_FMA: return CUDNN_FMA_MATH;
    }
    return CUDNN_FMA_MATH;
}

static DdpConvMath conv_math(cudnnMathType_t m)
{
    switch (m) {
    case CUDNN_DEFAULT_MATH: return DDP_CONV_MATH_DEFAULT;
    case CUDNN_TENSOR_OP_MATH: return DDP_CONV_MATH_TENSOR_OP;
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return DDP_CONV_MATH_TENSOR_OP_CONV;
    case CUDNN_FMA_MATH: return DDP_CONV_MATH_FMA;
    }
    return DDP_CONV_MATH_TENSOR_OP_CONV; /* unknown to this build: never chosen */
}

/* The memory order of S's activations, and of the filter cuDNN reads with
 * them (KRSC for NHWC: see the top of the file). */
static cudnnTensorFormat_t layout(const DdpConvShape *s)
{
    return s->channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

/* The descriptors of P for batch N. Host-side only: no allocation, no sync. */
static cudnnStatus_t set_batch_descriptors(ConvPlan *p, int n)
{
    const DdpConvShape *s = &p->slot.shape;
    cudnnStatus_t st = cudnnSetTensor4dDescriptor(p->x, layout(s), CUDNN_DATA_FLOAT, n,
                                                  s->c, s->h, s->w);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnSetTensor4dDescriptor(p->y, layout(s), CUDNN_DATA_FLOAT, n, s->k,
                                        s->out_h, s->out_w);
    if (st == CUDNN_STATUS_SUCCESS)
        p->n = n;
    return st;
}

static DdpStatus build_descriptors(DdpOps *ops, ConvPlan *p)
{
    const DdpConvShape *s = &p->slot.shape;
    cudnnMathType_t math = cudnn_math(ops->math.conv);
    CUDNN_TRY(cudnnCreateTensorDescriptor(&p->x));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&p->y));
    CUDNN_TRY(cudnnCreateFilterDescriptor(&p->w));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&p->bias));
    /* 1 x k x 1 x 1 is k floats in a row in either layout: NCHW for both */
    CUDNN_TRY(cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, s->k, 1, 1));
    CUDNN_TRY(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, layout(s), s->k,
                                         s->c / s->groups, s->r, s->s));
    for (int d = 0; d < NDIRS; d++) {
        CUDNN_TRY(cudnnCreateConvolutionDescriptor(&p->conv[d]));
        CUDNN_TRY(cudnnSetConvolution2dDescriptor(p->conv[d], s->pad, s->pad, s->stride,
                                                  s->stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                  CUDNN_DATA_FLOAT));
        CUDNN_TRY(cudnnSetConvolutionGroupCount(p->conv[d], s->groups));
        CUDNN_TRY(cudnnSetConvolutionMathType(p->conv[d], math));
    }
    CUDNN_TRY(set_batch_descriptors(p, s->n));
    int n, c, h, w;
    CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(p->conv[FWD], p->x, p->w, &n, &c, &h, &w));
    if (n != s->n || c != s->k || h != s->out_h || w != s->out_w)
        return DDP_ERR(DDP_FAIL, "internal error: cuDNN makes conv output %dx%dx%dx%d, not %dx%dx%dx%d",
                       n, c, h, w, s->n, s->k, s->out_h, s->out_w);
    return DDP_OK;
}

DdpStatus ddp_ops_plan_conv(DdpOps *ops, int id, const DdpConvShape *shape)
{
    const DdpConvShape *s = shape;
    DDP_CHECK(ddp_cudnn_conv_check(id, s->n, (int64_t)s->c * s->h * s->w, (int64_t)s->k * s->out_h * s->out_w));
    void *plans = ops->convs, *plan = NULL;
    DdpStatus st = ddp_conv_table_add(&plans, &ops->nconvs, sizeof *ops->convs, ops->finalized, id, shape, &plan);
    ops->convs = (ConvPlan *)plans; /* grown or not */
    /* the descriptors come in finalize: the trainer's memory check, which
     * comes between, refuses a batch too large for the GPU before cuDNN
     * sees it */
    return st;
}

/* Whether direction DIR's ALGO transforms its operands before multiplying
 * them (FFT, Winograd): on tensor cores the transformed values would be
 * rounded to TF32 again. */
static int transforms_operands(int dir, int algo)
{
    switch (dir) {
    case FWD:
        return algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT || algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    case DATA:
        return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    default:
        return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
    }
}

/* cuDNN's list for one direction, in its order, as ddp_conv_choose reads it. */
template <typename Perf>
static void candidates(const Perf *perf, int count, int dir, DdpConvCandidate *out)
{
    for (int i = 0; i < count; i++)
        out[i] = DdpConvCandidate{(int)perf[i].algo, perf[i].status == CUDNN_STATUS_SUCCESS, perf[i].memory,
                                  perf[i].determinism == CUDNN_DETERMINISTIC, conv_math(perf[i].mathType),
                                  transforms_operands(dir, (int)perf[i].algo)};
}

static int choose_one(const DdpConvCandidate *c, int count, DdpConvRule rule, Choice *out)
{
    int i = ddp_conv_choose(c, count, &rule);
    if (i < 0)
        return 0;
    *out = Choice{c[i].algo, cudnn_math(c[i].math), c[i].workspace, c[i].deterministic};
    return 1;
}

static size_t workspace_at(const DdpOps *ops, const ConvPlan *p, int dir, int algo, cudnnMathType_t math);

/* Each runnable candidate's workspace made the larger of the heuristics'
 * figure and cuDNN's own query for its algorithm and math (they can differ),
 * so that the limit ddp_conv_choose keeps to, which the start-up memory
 * check counts (device_rules.h), holds for what the calls will need. A
 * query that fails leaves the heuristics' figure. */
static DdpStatus query_workspaces(DdpOps *ops, ConvPlan *p, int dir, DdpConvCandidate *c, int count)
{
    for (int i = 0; i < count; i++) {
        if (!c[i].ok)
            continue;
        size_t need = workspace_at(ops, p, dir, c[i].algo, cudnn_math(c[i].math));
        if (need != SIZE_MAX && need > c[i].workspace)
            c[i].workspace = need;
    }
    return DDP_OK;
}

static DdpStatus choose(DdpOps *ops, ConvPlan *p, int id, int dir, DdpConvCandidate *c, int count,
                        const char *first_status)
{
    DDP_CHECK(query_workspaces(ops, p, dir, c, count));
    DdpConvRule rule = {DDP_CONV_WORKSPACE_LIMIT, 0, ops->math.tf32, ops->allow_nondeterministic};
    /* Deterministic if any is; else the first that runs rather than none. */
    int found = choose_one(c, count, rule, &p->best[dir]);
    if (!found) {
        rule.allow_nondeterministic = 1;
        found = choose_one(c, count, rule, &p->best[dir]);
    }
    if (!found)
        return DDP_ERR(DDP_FAIL, "no cuDNN %s algorithm works for conv %d (%s)", DIR_NAMES[dir], id,
                       count ? first_status : "none returned");
    /* A smaller batch should not cost determinism the planned one has. */
    rule.zero_workspace = 1;
    rule.allow_nondeterministic = ops->allow_nondeterministic || !p->best[dir].deterministic;
    if (!choose_one(c, count, rule, &p->fallback[dir]))
        p->fallback[dir] = p->best[dir];
    CUDNN_TRY(cudnnSetConvolutionMathType(p->conv[dir], p->best[dir].math));
    return DDP_OK;
}

/* Device buffers for timing one conv's algorithms (DDP_CUDNN_BENCHMARK):
 * its input, output and filter at the planned batch, filled with a small
 * value rather than left as whatever memory held (NaNs can time otherwise),
 * and a workspace of up to DDP_CONV_WORKSPACE_LIMIT. */
typedef struct {
    float *x, *y, *w;
    void *workspace;
    size_t workspace_bytes;
} TimingBuffers;

static void timing_buffers_free(TimingBuffers *b)
{
    cudaFree(b->x);
    cudaFree(b->y);
    cudaFree(b->w);
    cudaFree(b->workspace);
    memset(b, 0, sizeof *b);
}

static DdpStatus timing_buffers_alloc(const DdpConvShape *s, cudaStream_t stream, TimingBuffers *b)
{
    const size_t xs = ddp_conv_input_floats(s, s->n), ys = ddp_conv_output_floats(s, s->n),
                 ws = ddp_conv_weight_floats(s);
    size_t free_bytes = 0, total = 0;
    CUDA_TRY(cudaMemGetInfo(&free_bytes, &total));
    b->workspace_bytes = free_bytes / 4 < (size_t)DDP_CONV_WORKSPACE_LIMIT ? free_bytes / 4
                                                                            : (size_t)DDP_CONV_WORKSPACE_LIMIT;
    ddp_device_call_note(DDP_CALL_ALLOC); /* the four below, one set of timing buffers, at start-up: noted once */
    CUDA_TRY(cudaMalloc(&b->x, xs * sizeof(float)));
    CUDA_TRY(cudaMalloc(&b->y, ys * sizeof(float)));
    CUDA_TRY(cudaMalloc(&b->w, ws * sizeof(float)));
    CUDA_TRY(cudaMalloc(&b->workspace, b->workspace_bytes));
    /* on cuDNN's stream, which does not wait for the default one */
    CUDA_TRY(cudaMemsetAsync(b->x, 0x3c, xs * sizeof(float), stream)); /* 0x3c3c3c3c: about 0.0115 */
    CUDA_TRY(cudaMemsetAsync(b->y, 0x3c, ys * sizeof(float), stream));
    CUDA_TRY(cudaMemsetAsync(b->w, 0x3c, ws * sizeof(float), stream));
    return DDP_OK;
}

/* cuDNN's candidates for each direction, in the order ddp_conv_choose reads
 * them: the heuristics' (cudnnGet*_v7), or with DDP_CUDNN_BENCHMARK the
 * measured ones, fastest first (cudnnFind*Ex on buffers B). */
static DdpStatus choose_algorithms_with(DdpOps *ops, ConvPlan *p, int id, const TimingBuffers *b)
{
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    DdpConvCandidate c[CUDNN_CONVOLUTION_FWD_ALGO_COUNT + CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT +
                       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int count = 0;
    if (b)
        CUDNN_TRY(cudnnFindConvolutionForwardAlgorithmEx(ops->cudnn, p->x, b->x, p->w, b->w, p->conv[FWD], p->y,
                                                         b->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, fwd,
                                                         b->workspace, b->workspace_bytes));
    else
        CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(ops->cudnn, p->x, p->w, p->conv[FWD], p->y,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, fwd));
    candidates(fwd, count, FWD, c);
    DDP_CHECK(choose(ops, p, id, FWD, c, count, count ? cudnnGetErrorString(fwd[0].status) : ""));
    if (b)
        CUDNN_TRY(cudnnFindConvolutionBackwardDataAlgorithmEx(ops->cudnn, p->w, b->w, p->y, b->y, p->conv[DATA],
                                                              p->x, b->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                              &count, data, b->workspace, b->workspace_bytes));
    else
        CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(ops->cudnn, p->w, p->y, p->conv[DATA], p->x,
                                                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, data));
    candidates(data, count, DATA, c);
    DDP_CHECK(choose(ops, p, id, DATA, c, count, count ? cudnnGetErrorString(data[0].status) : ""));
    if (b)
        CUDNN_TRY(cudnnFindConvolutionBackwardFilterAlgorithmEx(
            ops->cudnn, p->x, b->x, p->y, b->y, p->conv[FILTER], p->w, b->w,
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, filter, b->workspace, b->workspace_bytes));
    else
        CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ops->cudnn, p->x, p->y, p->conv[FILTER], p->w,
                                                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count,
                                                                filter));
    candidates(filter, count, FILTER, c);
    DDP_CHECK(choose(ops, p, id, FILTER, c, count, count ? cudnnGetErrorString(filter[0].status) : ""));
    return DDP_OK;
}

static DdpStatus choose_algorithms(DdpOps *ops, ConvPlan *p, int id)
{
    if (!ops->benchmark)
        return choose_algorithms_with(ops, p, id, NULL);
    TimingBuffers b;
    memset(&b, 0, sizeof b);
    if (timing_buffers_alloc(&p->slot.shape, ops->stream, &b) != DDP_OK) {
        /* the buffers are extra memory the start-up check did not count: no
         * room for them costs the timing, not the run */
        timing_buffers_free(&b);
        (void)cudaGetLastError();
        fprintf(stderr, "warning: no GPU memory to time conv %d's cuDNN algorithms: cuDNN's heuristics choose "
                        "them\n", id);
        return choose_algorithms_with(ops, p, id, NULL);
    }
    DdpStatus st = choose_algorithms_with(ops, p, id, &b);
    if (st == DDP_OK)
        ddp_device_call_note(DDP_CALL_SYNC);
    cudaError_t e = st == DDP_OK ? cudaStreamSynchronize(ops->stream) : cudaSuccess;
    if (e != cudaSuccess)
        st = DDP_ERR(DDP_FAIL, "timing conv %d's algorithms failed: %s", id, cudaGetErrorString(e));
    timing_buffers_free(&b);
    return st;
}

/* The floats of each of the two rounded copies (tf32, bf16; none in fp32):
 * any planned conv's input, output or weights at its planned batch, any
 * linear layer's operand. */
static size_t planned_rounded_floats(const DdpOps *ops)
{
    if (ops->precision == DDP_PRECISION_FP32)
        return 0;
    size_t floats = ops->linear_floats;
    for (int i = 0; i < ops->nconvs; i++) {
        const DdpConvShape *s = &ops->convs[i].slot.shape;
        if (!ops->convs[i].slot.planned)
            continue;
        const size_t sizes[] = {ddp_conv_input_floats(s, s->n), ddp_conv_output_floats(s, s->n),
                                ddp_conv_weight_floats(s)};
        for (int j = 0; j < 3; j++)
            floats = sizes[j] > floats ? sizes[j] : floats;
    }
    return floats;
}

/* The floats of the NHWC convs' weight copy: the largest one's weights. */
static size_t planned_krsc_floats(const DdpOps *ops)
{
    size_t floats = 0;
    for (int i = 0; i < ops->nconvs; i++) {
        const DdpConvShape *s = &ops->convs[i].slot.shape;
        if (ops->convs[i].slot.planned && s->channels_last && ddp_conv_weight_floats(s) > floats)
            floats = ddp_conv_weight_floats(s);
    }
    return floats;
}

size_t ddp_ops_planned_bytes(const DdpOps *ops)
{
    return (2 * planned_rounded_floats(ops) + planned_krsc_floats(ops)) * sizeof(float);
}

DdpStatus ddp_ops_finalize(DdpOps *ops)
{
    if (ops->finalized)
        return DDP_ERR(DDP_FAIL, "internal error: ddp_ops_finalize called twice");
    DDP_CHECK(ddp_conv_table_complete(ops->convs, ops->nconvs, sizeof *ops->convs));
    for (int i = 0; i < ops->nconvs; i++)
        DDP_CHECK(build_descriptors(ops, &ops->convs[i]));
    for (int i = 0; i < ops->nconvs; i++)
        DDP_CHECK(choose_algorithms(ops, &ops->convs[i], i));
    size_t bytes = 0;
    for (int i = 0; i < ops->nconvs; i++)
        for (int d = 0; d < NDIRS; d++)
            if (ops->convs[i].best[d].bytes > bytes)
                bytes = ops->convs[i].best[d].bytes;
    if (bytes) {
        ddp_device_call_note(DDP_CALL_ALLOC);
        CUDA_TRY(cudaMalloc(&ops->workspace, bytes));
    }
    ops->workspace_bytes = bytes;
    ops->rounded_floats = planned_rounded_floats(ops);
    if (ops->rounded_floats) {
        ddp_device_call_note(DDP_CALL_ALLOC);
        for (int i = 0; i < 2; i++)
            CUDA_TRY(cudaMalloc(&ops->rounded[i], ops->rounded_floats * sizeof(float)));
    }
    const size_t krsc = planned_krsc_floats(ops);
    if (krsc) {
        ddp_device_call_note(DDP_CALL_ALLOC);
        CUDA_TRY(cudaMalloc(&ops->krsc, krsc * sizeof(float)));
    }
    ops->finalized = 1;
    ops->choices_kept = ops->benchmark;
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

size_t ddp_ops_workspace_bytes(const DdpOps *ops) { return ops->workspace_bytes; }

static const char *algo_name(int dir, int algo)
{
    static const char *const fwd[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                      "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    static const char *const data[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD",
                                       "WINOGRAD_NONFUSED"};
    static const char *const filter[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD",
                                         "WINOGRAD_NONFUSED", "FFT_TILING"};
    const char *const *names[NDIRS] = {fwd, data, filter};
    const int counts[NDIRS] = {(int)(sizeof fwd / sizeof *fwd), (int)(sizeof data / sizeof *data),
                               (int)(sizeof filter / sizeof *filter)};
    return algo >= 0 && algo < counts[dir] ? names[dir][algo] : "?";
}

void ddp_ops_describe_precision(const DdpOps *ops, char *buf, size_t len)
{
    if (!len)
        return;
    buf[0] = 0;
    if (ops->precision == DDP_PRECISION_FP32)
        return;
    snprintf(buf, len, "the convs' and linear layers' operands rounded to %s on the GPU, then multiplied %s and "
                       "summed in FP32%s%s%s", ddp_precision_name(ops->precision),
             ops->math.tf32 ? "on TF32 tensor cores where the GPU has them (exactly; cuDNN's FFT and Winograd "
                              "algorithms only on FP32 math)"
                            : "in FP32 math",
             ops->math.note ? " (" : "", ops->math.note ? ops->math.note : "", ops->math.note ? ")" : "");
}

void ddp_ops_describe_kernels(const DdpOps *ops, char *buf, size_t len)
{
    (void)ops;
    if (len)
        buf[0] = 0; /* GPU steps are not bit-invariant anyway (ddp_device_not_bit_invariant) */
}

void ddp_ops_describe_fusion(const DdpOps *ops, char *buf, size_t len)
{
    int convs = 0, convs_refused = 0, linears = 0, linears_refused = 0;
    /* a conv refused at any batch (a short one's fallback algorithm, say)
     * counts as refused, not as both */
    for (int i = 0; i < ops->nconvs; i++) {
        convs += ops->convs[i].fused && !ops->convs[i].refused;
        convs_refused += ops->convs[i].refused;
    }
    ddp_lt_linear_counts(ops->lt, &linears, &linears_refused);
    if (!len)
        return;
    buf[0] = '\0';
    if (convs + convs_refused + linears + linears_refused == 0) /* no product with a bias */
        return;
    int used = snprintf(buf, len, "bias (and relu) in cuDNN's epilogue for %d conv%s, cuBLASLt's for %d linear "
                        "shape%s; ", convs, convs == 1 ? "" : "s", linears, linears == 1 ? "" : "s");
    if (used < 0 || (size_t)used >= len)
        return;
    if (convs_refused + linears_refused == 0)
        snprintf(buf + used, len - (size_t)used, "refused: none");
    else
        snprintf(buf + used, len - (size_t)used, "refused: %d conv%s, %d linear shape%s (added after the call)",
                 convs_refused, convs_refused == 1 ? "" : "s", linears_refused, linears_refused == 1 ? "" : "s");
}

void ddp_ops_describe_conv(const DdpOps *ops, int id, char *buf, size_t len)
{
    if (!len)
        return;
    const ConvPlan *p = (const ConvPlan *)ddp_conv_table_find(ops->convs, ops->nconvs, sizeof *ops->convs, id);
    if (!p) {
        snprintf(buf, len, "conv %d not planned", id);
        return;
    }
    if (!ops->finalized) {
        snprintf(buf, len, "conv %d: algorithms chosen by ddp_ops_finalize", id);
        return;
    }
    size_t used = 0;
    buf[0] = '\0';
    if (p->slot.shape.channels_last)
        used = (size_t)snprintf(buf, len, "NHWC, filter KRSC: ");
    for (int d = 0; d < NDIRS && used < len; d++) {
        const Choice *c = &p->best[d];
        int wrote = snprintf(buf + used, len - used, "%s%s %s%s%s (%.1f MiB)", d ? ", " : "",
                             DIR_NAMES[d], algo_name(d, c->algo),
                             c->math == CUDNN_FMA_MATH ? "" : " tf32",
                             c->deterministic ? "" : " nondeterministic", c->bytes / 1048576.0);
        if (wrote < 0)
            break;
        used += (size_t)wrote;
    }
}

/* ---- the per-step calls -------------------------------------------------------------- */

/* The workspace ALGO needs in direction DIR under MATH at the batch P's
 * descriptors hold, or SIZE_MAX if cuDNN cannot run it there. A host-side
 * query. cuDNN's figure depends on the descriptor's math, so this sets it:
 * callers set the math of the choice in use again afterwards. */
static size_t workspace_at(const DdpOps *ops, const ConvPlan *p, int dir, int algo, cudnnMathType_t math)
{
    size_t bytes = 0;
    cudnnStatus_t st = cudnnSetConvolutionMathType(p->conv[dir], math);
    if (st != CUDNN_STATUS_SUCCESS)
        return SIZE_MAX;
    if (dir == FWD)
        st = cudnnGetConvolutionForwardWorkspaceSize(ops->cudnn, p->x, p->w, p->conv[dir], p->y,
                                                     (cudnnConvolutionFwdAlgo_t)algo, &bytes);
    else if (dir == DATA)
        st = cudnnGetConvolutionBackwardDataWorkspaceSize(
            ops->cudnn, p->w, p->y, p->conv[dir], p->x, (cudnnConvolutionBwdDataAlgo_t)algo, &bytes);
    else
        st = cudnnGetConvolutionBackwardFilterWorkspaceSize(
            ops->cudnn, p->x, p->y, p->conv[dir], p->w, (cudnnConvolutionBwdFilterAlgo_t)algo,
            &bytes);
    return st == CUDNN_STATUS_SUCCESS ? bytes : SIZE_MAX;
}

static const Choice *choice(const ConvPlan *p, int dir)
{
    return p->use_fallback[dir] ? &p->fallback[dir] : &p->best[dir];
}

/* The plan for a call with batch N, its descriptors set for N; NULL (failure
 * recorded) if the call is wrong. Only when N differs from the last call does
 * this do anything: re-set n and re-check that each algorithm fits the
 * workspace, switching to the no-workspace fallback where it does not. */
static ConvPlan *conv_for_call(DdpOps *ops, int id, int n, const char *what)
{
    ConvPlan *p = (ConvPlan *)ddp_conv_table_call(ops->convs, ops->nconvs, sizeof *ops->convs, ops->finalized,
                                                  &ops->failure, id, n, what);
    if (!p || n == p->n)
        return p;
    if (!CUDNN_RECORD(ops, set_batch_descriptors(p, n)))
        return NULL;
    for (int d = 0; d < NDIRS; d++) {
        const Choice *best = &p->best[d], *fallback = &p->fallback[d];
        int use_fallback = workspace_at(ops, p, d, best->algo, best->math) > ops->workspace_bytes;
        if (use_fallback && workspace_at(ops, p, d, fallback->algo, fallback->math) > ops->workspace_bytes) {
            OPS_FAIL(ops, "conv %d: no cuDNN %s algorithm fits the %zu-byte workspace at batch %d",
                     id, DIR_NAMES[d], ops->workspace_bytes, n);
            p->n = 0; /* descriptors half-switched: re-check on the next call */
            return NULL;
        }
        p->use_fallback[d] = use_fallback;
        /* the queries above left the descriptor at the last one's math */
        if (!CUDNN_RECORD(ops, cudnnSetConvolutionMathType(p->conv[d], choice(p, d)->math))) {
            p->n = 0;
            return NULL;
        }
    }
    return p;
}

/* The blocks of a grid-stride kernel's launch over N elements (N > 0: a
 * launch of no blocks fails), KERNEL_THREADS each: enough to cover them, at
 * most 4096 (then each thread loops). */
enum { KERNEL_THREADS = 256 };

static unsigned kernel_blocks(size_t n)
{
    const size_t blocks = (n + KERNEL_THREADS - 1) / KERNEL_THREADS, most = 4096;
    return (unsigned)(blocks < most ? blocks : most);
}

/* Whether the launch of KERNEL just queued started; the failure recorded if not. */
static int launched(DdpOps *ops, const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return 1;
    OPS_FAIL(ops, "%s: %s", kernel, cudaGetErrorString(e));
    return 0;
}

/* DST[i] = SRC[i] rounded by precision.h's rule, DROP bits dropped. */
__global__ void round_operand_kernel(const float *src, float *dst, size_t n, int drop)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __uint_as_float(ddp_round_significand(__float_as_uint(src[i]), drop));
}

/* In tf32 and bf16, *A (NA floats) and *B (NB floats; B NULL: no second
 * operand) replaced by their copies rounded into ops->rounded; nothing to
 * do in fp32. 0 (failure recorded) if an operand is larger than planned or
 * a launch fails. */
static int round_operands(DdpOps *ops, const float **a, size_t na, const float **b, size_t nb)
{
    if (ops->precision == DDP_PRECISION_FP32)
        return 1;
    const float **operand[2] = {a, b};
    const size_t floats[2] = {na, nb};
    for (int i = 0; i < 2; i++) {
        if (!operand[i])
            continue;
        if (floats[i] > ops->rounded_floats) {
            OPS_FAIL(ops, "an operand of %zu floats to round to %s, past the %zu planned: the program's plan_ops "
                          "registers fewer or smaller products than its steps make (a .cu from an older ddpc, "
                          "without ddp_ops_plan_linear, or edited): generate it again with this ddpc",
                     floats[i], ddp_precision_name(ops->precision), ops->rounded_floats);
            return 0;
        }
        if (floats[i])
            round_operand_kernel<<<kernel_blocks(floats[i]), KERNEL_THREADS, 0, ops->stream>>>(
                *operand[i], ops->rounded[i], floats[i], ddp_precision_dropped_bits(ops->precision));
        if (!launched(ops, "round_operand_kernel"))
            return 0;
        *operand[i] = ops->rounded[i];
    }
    return 1;
}

/* DST (K x RS x CG: an NHWC conv's filter, KRSC) = SRC (K x CG x RS: the
 * parameters' order), each value rounded by precision.h's rule with DROP
 * bits dropped, or with DROP 0 (fp32) copied as it is. */
__global__ void weight_krsc_kernel(const float *src, float *dst, int k, int cg, int rs, int drop)
{
    const size_t total = (size_t)k * rs * cg;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t c = i % cg, tap = i / cg % rs, out = i / cg / rs;
        const float v = src[(out * cg + c) * rs + tap];
        dst[i] = drop ? __uint_as_float(ddp_round_significand(__float_as_uint(v), drop)) : v;
    }
}

/* DW (K x CG x RS: the parameters' order) = BETA * DW + G (K x RS x CG: the
 * gradient cuDNN writes for an NHWC filter). BETA 0 writes without reading
 * DW, which may hold garbage, even NaN (ops.h). */
__global__ void weight_grad_kcrs_kernel(const float *g, float *dw, int k, int cg, int rs, float beta)
{
    const size_t total = (size_t)k * cg * rs;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t tap = i % rs, c = i / rs % cg, out = i / rs / cg;
        const float v = g[(out * rs + tap) * cg + c];
        dw[i] = beta == 0.0f ? v : beta * dw[i] + v;
    }
}

/* The operands of P's forward or backward-data call: DATA (x or dy, ND
 * floats) rounded by round_operands, and *W replaced by what P's filter
 * descriptor reads: for an NHWC conv the weights' KRSC copy in ops->krsc,
 * rounded in the same pass in tf32 and bf16; else W rounded as DATA is.
 * 0 (failure recorded) if a launch fails. */
static int conv_operands(DdpOps *ops, const ConvPlan *p, const float **data, size_t nd, const float **w)
{
    const DdpConvShape *s = &p->slot.shape;
    const size_t nw = ddp_conv_weight_floats(s);
    if (!s->channels_last)
        return round_operands(ops, data, nd, w, nw);
    if (!round_operands(ops, data, nd, NULL, 0))
        return 0;
    weight_krsc_kernel<<<kernel_blocks(nw), KERNEL_THREADS, 0, ops->stream>>>(
        *w, ops->krsc, s->k, s->c / s->groups, s->r * s->s, ddp_precision_dropped_bits(ops->precision));
    if (!launched(ops, "weight_krsc_kernel"))
        return 0;
    *w = ops->krsc;
    return 1;
}

/* P's forward on the operands conv_operands made. */
static void conv_forward_rounded(DdpOps *ops, const ConvPlan *p, const float *x, const float *w, float *y)
{
    const Choice *c = choice(p, FWD);
    const float one = 1.0f, zero = 0.0f;
    CUDNN_RECORD(ops, cudnnConvolutionForward(ops->cudnn, &one, p->x, x, p->w, w, p->conv[FWD],
                                              (cudnnConvolutionFwdAlgo_t)c->algo, ops->workspace,
                                              ops->workspace_bytes, &zero, p->y, y));
}

void ddp_conv_forward(DdpOps *ops, int id, int n, const float *x, const float *w, float *y)
{
    ConvPlan *p = conv_for_call(ops, id, n, "ddp_conv_forward");
    if (!p || !conv_operands(ops, p, &x, ddp_conv_input_floats(&p->slot.shape, n), &w))
        return;
    conv_forward_rounded(ops, p, x, w, y);
}

/* Y's PLANES x PIXELS elements through the epilogue, where a library
 * refused to fuse it: PLANES planes of PIXELS, plane i of channel
 * i % CHANNELS; with CHANNELS_LAST (NHWC) pixels of CHANNELS, element i of
 * channel i % CHANNELS. */
__global__ void epilogue_kernel(float *y, int64_t planes, int channels, int64_t pixels, int channels_last,
                                const float *bias, DdpEpilogue epilogue)
{
    const int64_t total = planes * pixels;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = ddp_epilogue_apply(epilogue, y[i], bias[(channels_last ? i : i / pixels) % channels]);
}

static void epilogue_after(DdpOps *ops, float *y, int64_t planes, int channels, int64_t pixels, int channels_last,
                           const float *bias, DdpEpilogue epilogue)
{
    if (planes * pixels <= 0)
        return;
    epilogue_kernel<<<kernel_blocks((size_t)(planes * pixels)), KERNEL_THREADS, 0, ops->stream>>>(
        y, planes, channels, pixels, channels_last, bias, epilogue);
    launched(ops, "epilogue_kernel");
}

void ddp_conv_forward_bias(DdpOps *ops, int id, int n, const float *x, const float *w, const float *bias,
                           DdpEpilogue epilogue, float *y)
{
    ConvPlan *p = conv_for_call(ops, id, n, "ddp_conv_forward_bias");
    if (!p)
        return;
    const DdpConvShape *sh = &p->slot.shape;
    const float *xr = x, *wr = w;
    if (!conv_operands(ops, p, &xr, ddp_conv_input_floats(sh, n), &wr))
        return;
    const Choice *c = choice(p, FWD);
    const float one = 1.0f, zero = 0.0f;
    /* cuDNN's API reference allows the identity activation (a bias alone)
     * only with IMPLICIT_PRECOMP_GEMM: with another algorithm the plain way,
     * without asking. Else alpha2 0: z (here y itself) is not read. */
    cudnnStatus_t st =
        epilogue == DDP_EPILOGUE_BIAS && c->algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM
            ? CUDNN_STATUS_NOT_SUPPORTED
            : cudnnConvolutionBiasActivationForward(ops->cudnn, &one, p->x, xr, p->w, wr, p->conv[FWD],
                                                    (cudnnConvolutionFwdAlgo_t)c->algo, ops->workspace,
                                                    ops->workspace_bytes, &zero, p->y, y, p->bias, bias,
                                                    ops->activation[epilogue], p->y, y);
    /* cuDNN checks the combination before it queues anything (a workspace
     * the fused kernel wants more of, say): a refusal is a NOT_SUPPORTED or
     * BAD_PARAM code, and this call goes the plain way. It is asked again on
     * every call, not remembered: whether it refuses depends on the batch's
     * algorithm (conv_for_call's fallback at a short batch), so a resumed
     * run takes the same path at each batch as the run it resumes. With a
     * CUDA graph the question is asked once per capture. */
#ifdef CUDNN_STATUS_CATEGORY /* cuDNN 9: codes with a category */
    const cudnnStatus_t category = (cudnnStatus_t)CUDNN_STATUS_CATEGORY(st);
#else
    const cudnnStatus_t category = st;
#endif
    if (category != CUDNN_STATUS_NOT_SUPPORTED && category != CUDNN_STATUS_BAD_PARAM) {
        p->fused |= CUDNN_RECORD(ops, st);
        return;
    }
    p->refused = 1;
    conv_forward_rounded(ops, p, xr, wr, y);
    epilogue_after(ops, y, (int64_t)n * sh->k, sh->k, (int64_t)sh->out_h * sh->out_w, sh->channels_last, bias,
                   epilogue);
}

void ddp_conv_backward_data(DdpOps *ops, int id, int n, const float *dy, const float *w,
                            float *dx, float beta)
{
    ConvPlan *p = conv_for_call(ops, id, n, "ddp_conv_backward_data");
    if (!p || !conv_operands(ops, p, &dy, ddp_conv_output_floats(&p->slot.shape, n), &w))
        return;
    const Choice *c = choice(p, DATA);
    const float one = 1.0f;
    CUDNN_RECORD(ops, cudnnConvolutionBackwardData(
                          ops->cudnn, &one, p->w, w, p->y, dy, p->conv[DATA],
                          (cudnnConvolutionBwdDataAlgo_t)c->algo, ops->workspace,
                          ops->workspace_bytes, &beta, p->x, dx));
}

void ddp_conv_backward_filter(DdpOps *ops, int id, int n, const float *x, const float *dy,
                              DdpGrad *dw, float beta)
{
    ConvPlan *p = conv_for_call(ops, id, n, "ddp_conv_backward_filter");
    if (!p || !round_operands(ops, &x, ddp_conv_input_floats(&p->slot.shape, n), &dy,
                              ddp_conv_output_floats(&p->slot.shape, n)))
        return;
    const DdpConvShape *s = &p->slot.shape;
    const Choice *c = choice(p, FILTER);
    const float one = 1.0f, zero = 0.0f;
    if (!s->channels_last) {
        CUDNN_RECORD(ops, cudnnConvolutionBackwardFilter(ops->cudnn, &one, p->x, x, p->y, dy, p->conv[FILTER],
                                                         (cudnnConvolutionBwdFilterAlgo_t)c->algo, ops->workspace,
                                                         ops->workspace_bytes, &beta, p->w, dw));
        return;
    }
    /* An NHWC filter's gradient is KRSC: written into ops->krsc, then added
     * to dw in dw's order. */
    if (!CUDNN_RECORD(ops, cudnnConvolutionBackwardFilter(ops->cudnn, &one, p->x, x, p->y, dy, p->conv[FILTER],
                                                          (cudnnConvolutionBwdFilterAlgo_t)c->algo, ops->workspace,
                                                          ops->workspace_bytes, &zero, p->w, ops->krsc)))
        return;
    weight_grad_kcrs_kernel<<<kernel_blocks(ddp_conv_weight_floats(s)), KERNEL_THREADS, 0, ops->stream>>>(
        ops->krsc, dw, s->k, s->c / s->groups, s->r * s->s, beta);
    launched(ops, "weight_grad_kcrs_kernel");
}

/* ddp_gemm's product, its sizes checked and A and B already rounded. */
static void gemm_rounded(DdpOps *ops, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                         int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
     * row-major matrix read column-major is its transpose: so swap the operands
     * and keep each one's transpose flag. */
    CUBLAS_RECORD(ops, cublasSgemm(ops->cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb,
                                   a, lda, &beta, c, ldc));
}

void ddp_gemm(DdpOps *ops, int trans_a, int trans_b, int m, int n, int k, float alpha,
              const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    /* BLAS's argument rules, checked as ops_cpu.c does, so a bad call reads the
     * same on both builds. */
    int a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < (a_cols > 1 ? a_cols : 1) ||
        ldb < (b_cols > 1 ? b_cols : 1) || ldc < (n > 1 ? n : 1)) {
        OPS_FAIL(ops, "internal error: ddp_gemm(trans_a=%d, trans_b=%d, m=%d, n=%d, k=%d, "
                      "lda=%d, ldb=%d, ldc=%d): bad sizes",
                 trans_a, trans_b, m, n, k, lda, ldb, ldc);
        return;
    }
    if (m == 0 || n == 0 ||
        !round_operands(ops, &a, trans_a ? ddp_matrix_span(k, m, lda) : ddp_matrix_span(m, k, lda), &b,
                        trans_b ? ddp_matrix_span(n, k, ldb) : ddp_matrix_span(k, n, ldb)))
        return;
    gemm_rounded(ops, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void ddp_linear_forward_bias(DdpOps *ops, int n, int in, int out, const float *x, const float *w, const float *bias,
                             DdpEpilogue epilogue, float *y)
{
    if (n <= 0 || in <= 0 || out <= 0) { /* nothing to compute, or bad sizes: ddp_gemm's check says which */
        ddp_gemm(ops, 0, 1, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
        return;
    }
    const float *xr = x, *wr = w;
    if (!round_operands(ops, &xr, ddp_matrix_span(n, in, in), &wr, ddp_matrix_span(out, in, in)))
        return;
    char why[256];
    int queued = ddp_lt_linear_forward(ops->lt, ops->math.cublas_tf32, n, in, out, xr, wr, bias, epilogue, y, why,
                                       sizeof why);
    if (queued < 0)
        OPS_FAIL(ops, "%s", why);
    if (queued)
        return;
    /* cuBLASLt has no algorithm for it, or refused it: cuBLAS, then the epilogue */
    gemm_rounded(ops, 0, 1, n, out, in, 1.0f, xr, in, wr, in, 0.0f, y, out);
    epilogue_after(ops, y, (int64_t)n * out, out, 1, 0 /* one pixel: either layout */, bias, epilogue);
}

/* DdpGrad is float here: cuBLAS's own sum over the batch (ops.h). */
void ddp_gemm_grad(DdpOps *ops, int m, int n, int k, const float *dy, int ldy, const float *x, int ldx,
                   float beta, DdpGrad *dw, int ldw)
{
    ddp_gemm(ops, 1, 0, m, n, k, 1.0f, dy, ldy, x, ldx, beta, dw, ldw);
}

/* ---- the algorithms as a record (conv_choices.h) ----------------------------------- */

/* The GPU and cuDNN a record is made for. */
static void choices_origin(DdpConvChoices *c)
{
    c->library = (long)cudnnGetVersion();
    int dev = 0;
    cudaDeviceProp prop;
    const int named = cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess;
    ddp_conv_choices_set_device(c, named ? prop.name : "?");
}

static DdpConvAlgo record_of(const Choice *c)
{
    return DdpConvAlgo{c->algo, (int)conv_math(c->math), c->deterministic};
}

void ddp_ops_time_algorithms(DdpOps *ops)
{
    ops->benchmark = 1;
}

size_t ddp_ops_conv_choices(const DdpOps *ops, char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
    if (!ops->finalized || !ops->choices_kept || !ops->nconvs)
        return 0;
    DdpConvChoices c;
    memset(&c, 0, sizeof c);
    choices_origin(&c);
    c.workspace = (long long)ops->workspace_bytes;
    c.convs = (DdpConvChoice *)calloc((size_t)ops->nconvs, sizeof *c.convs);
    if (!c.convs)
        return 0;
    c.n = ops->nconvs;
    for (int i = 0; i < ops->nconvs; i++) { /* the table is indexed by id, every id planned */
        c.convs[i].id = i;
        for (int d = 0; d < NDIRS; d++) {
            c.convs[i].algo[d] = record_of(&ops->convs[i].best[d]);
            c.convs[i].algo[NDIRS + d] = record_of(&ops->convs[i].fallback[d]);
        }
    }
    size_t need = ddp_conv_choices_text(&c, buf, len);
    ddp_conv_choices_free(&c);
    return need;
}

/* Whether direction DIR of plan P may take A at the planned batch, as
 * choose() would judge it among cuDNN's candidates (its rule for the
 * direction's algorithm, or with FALLBACK for the one needing no workspace;
 * nondeterministic ones where ALLOW_NONDETERMINISTIC); the Choice into
 * *OUT. Leaves the descriptor's math at A's (workspace_at). */
static int may_take(const DdpOps *ops, const ConvPlan *p, int dir, int fallback, int allow_nondeterministic,
                    const DdpConvAlgo *a, Choice *out, char *why, size_t why_len)
{
    static const int counts[NDIRS] = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};
    const int id = (int)(p - ops->convs);
    if (a->algo >= counts[dir]) {
        snprintf(why, why_len, "conv %d's %s algorithm %d is not one of this cuDNN's", id, DIR_NAMES[dir], a->algo);
        return 0;
    }
    const cudnnMathType_t math = cudnn_math((DdpConvMath)a->math);
    const size_t bytes = workspace_at(ops, p, dir, a->algo, math);
    const DdpConvRule rule = {DDP_CONV_WORKSPACE_LIMIT, fallback, ops->math.tf32, allow_nondeterministic};
    const DdpConvCandidate c = {a->algo, bytes != SIZE_MAX, bytes, a->deterministic, (DdpConvMath)a->math,
                                transforms_operands(dir, a->algo)};
    *out = Choice{a->algo, math, bytes, a->deterministic};
    if (ddp_conv_choose(&c, 1, &rule) == 0)
        return 1;
    snprintf(why, why_len, "conv %d's %s algorithm%s %s %s", id, DIR_NAMES[dir], fallback ? " without workspace" : "",
             algo_name(dir, a->algo), bytes == SIZE_MAX ? "does not run here" : "breaks this run's rules");
    return 0;
}

/* Whether the record C applies to this process: its GPU, cuDNN and convs. */
static int record_applies(const DdpOps *ops, const DdpConvChoices *c, char *why, size_t why_len)
{
    DdpConvChoices here;
    memset(&here, 0, sizeof here);
    choices_origin(&here);
    if (c->library != here.library || strcmp(c->device, here.device) != 0) {
        snprintf(why, why_len, "they were timed on %s with cuDNN %ld, this is %s with cuDNN %ld", c->device,
                 c->library, here.device, here.library);
        return 0;
    }
    if (c->n != ops->nconvs) {
        snprintf(why, why_len, "they name %d convs, this program has %d", c->n, ops->nconvs);
        return 0;
    }
    if (c->workspace < 0 || c->workspace > (long long)DDP_CONV_WORKSPACE_LIMIT) {
        snprintf(why, why_len, "their workspace of %lld bytes is past the limit", c->workspace);
        return 0;
    }
    for (int i = 0; i < c->n; i++)
        if (c->convs[i].id < 0 || c->convs[i].id >= ops->nconvs) {
            snprintf(why, why_len, "they name conv %d, this program has %d", c->convs[i].id, ops->nconvs);
            return 0;
        }
    return 1;
}

DdpStatus ddp_ops_take_conv_choices(DdpOps *ops, const char *text, int *taken, char *why, size_t why_len)
{
    *taken = 0;
    if (why_len)
        why[0] = '\0';
    if (!ops->finalized)
        return DDP_ERR(DDP_FAIL, "internal error: ddp_ops_take_conv_choices before ddp_ops_finalize");
    for (int i = 0; i < ops->nconvs; i++) /* the descriptors must be the planned batch's: no step yet */
        if (ops->convs[i].n != ops->convs[i].slot.shape.n)
            return DDP_ERR(DDP_FAIL, "internal error: ddp_ops_take_conv_choices after a step");
    DdpConvChoices c;
    DDP_CHECK(ddp_conv_choices_parse(text, &c));
    Choice *taking = (Choice *)calloc((size_t)ops->nconvs * 2 * NDIRS + 1, sizeof *taking);
    int ok = taking != NULL;
    if (!ok)
        snprintf(why, why_len, "out of memory");
    ok = ok && record_applies(ops, &c, why, why_len);
    /* the record's workspace, exactly: a short batch falls back where its
     * algorithm needs more than that, as in the run that made it */
    const size_t workspace = ok ? (size_t)c.workspace : 0;
    for (int i = 0; ok && i < c.n; i++) {
        const DdpConvChoice *v = &c.convs[i];
        ConvPlan *p = &ops->convs[v->id];
        for (int k = 0; ok && k < 2 * NDIRS; k++) {
            Choice *to = &taking[v->id * 2 * NDIRS + k];
            const int d = k % NDIRS;
            /* choose()'s rules: nondeterministic only where allowed, or
             * where no deterministic algorithm was found (this process's
             * list for the direction's own; the record's for its fallback,
             * which is the direction's own where none needs no workspace) */
            const int fallback = k >= NDIRS && memcmp(&v->algo[k], &v->algo[d], sizeof v->algo[d]) != 0;
            const int allow = ops->allow_nondeterministic ||
                              !(k < NDIRS ? p->best[d].deterministic : v->algo[d].deterministic);
            ok = may_take(ops, p, d, fallback, allow, &v->algo[k], to, why, why_len);
            if (ok && k < NDIRS && to->bytes > workspace)
                ok = 0, snprintf(why, why_len, "conv %d's %s algorithm needs more than their workspace", v->id,
                                 DIR_NAMES[k]);
        }
    }
    ddp_conv_choices_free(&c);
    /* the new workspace before the old goes: without it, nothing changes */
    void *grown = NULL;
    if (ok && workspace != ops->workspace_bytes && workspace) {
        ddp_device_call_note(DDP_CALL_ALLOC);
        if (cudaMalloc(&grown, workspace) != cudaSuccess) {
            (void)cudaGetLastError();
            ok = 0, snprintf(why, why_len, "no GPU memory for their workspace of %zu bytes", workspace);
        }
    }
    if (ok && workspace != ops->workspace_bytes) {
        (void)cudaFree(ops->workspace); /* before any step: nothing queued uses it */
        ops->workspace = grown;
        ops->workspace_bytes = workspace;
    }
    DdpStatus st = DDP_OK;
    for (int i = 0; i < ops->nconvs; i++)
        for (int d = 0; d < NDIRS; d++) {
            ConvPlan *p = &ops->convs[i];
            if (ok) {
                p->best[d] = taking[i * 2 * NDIRS + d];
                p->fallback[d] = taking[i * 2 * NDIRS + NDIRS + d];
                p->use_fallback[d] = 0;
            }
            /* may_take's queries left other math on the descriptors */
            if (cudnnSetConvolutionMathType(p->conv[d], choice(p, d)->math) != CUDNN_STATUS_SUCCESS && st == DDP_OK)
                st = DDP_ERR(DDP_FAIL, "internal error: cudnnSetConvolutionMathType failed for conv %d", i);
        }
    free(taking);
    if (ok && st == DDP_OK) {
        ops->choices_kept = 1;
        *taken = 1;
    }
    return st;
}
