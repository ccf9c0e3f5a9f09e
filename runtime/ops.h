/*
 * ops.h: the library ops of libddprt, the convolutions and matrix products a
 * generated program hands to a vendor library instead of emitting a kernel.
 *
 * One interface, two implementations, and a program links exactly one:
 *   ops_cpu.c    OpenMP and products of its own (gemm_cpu.c; im2col/col2im
 *                around them, or Winograd: winograd_cpu.c), runs anywhere;
 *                most convs' passes on oneDNN, one sample per call
 *                (onednn_cpu.c), where it is built in;
 *   ops_cuda.cu  cuDNN + cuBLAS (and cuBLASLt: lt_linear.h) on one stream.
 * Both define the same set of symbols, so the build picks one by which object it
 * links; the generated code is the same either way. Everything else a step does
 * (activations, pooling, losses, the optimizer) is generated code, but for a
 * product's bias followed by a relu or by nothing, which the calls
 * ddp_conv_forward_bias and ddp_linear_forward_bias add (on GPUs in the
 * libraries' epilogues); a bias before another activation, and every bias
 * gradient, stay generated kernels.
 *
 * Shaped for the training loop:
 *  - All choosing and allocating of device memory happens once at start-up:
 *    ddp_ops_plan_conv for each conv, ddp_ops_plan_linear for each linear
 *    layer, then ddp_ops_finalize. After that no call allocates (but for the
 *    CPU products' scratch and rounded copies, grown on the first step, and
 *    the GPU's cuBLASLt plans, host memory made on a shape's first call:
 *    lt_linear.h), synchronises or talks to the host, so a whole step can be
 *    captured in a CUDA graph (step_graphs.h).
 *  - The per-step calls return nothing. The first failure is recorded in the
 *    context (with the runtime file:line that saw it) and ddp_ops_status reports
 *    it; the program polls once per step, as it polls NCCL.
 *  - Tensors are float32, row-major, in device memory on CUDA and host memory
 *    on CPU. A conv's activations (x, y, dx, dy) are NCHW, or NHWC for a conv
 *    planned channels_last (DdpConvShape); its weights, and their gradients,
 *    are K x C/groups x R x S either way, as PyTorch stores them, because
 *    checkpoints, exports and the all-reduce's buckets read them in that order.
 *  - Results are deterministic: the same inputs give bit-identical outputs run to
 *    run (and on CPU whatever the thread count), because --resume promises to
 *    continue bit-for-bit and the distributed tests compare runs.
 *  - Math is plain FP32 by default, so the GPU build stays close to the CPU build.
 *    ddp_ops_set_precision chooses tf32 or bf16 (precision.h): every call then
 *    rounds copies of its two operands to that precision by precision.h's
 *    rule, on either build, and multiplies them exactly (on GPUs with TF32
 *    tensor cores) and sums in FP32. NVIDIA_TF32_OVERRIDE=0 turns TF32 tensor
 *    cores off inside NVIDIA's libraries: FP32 math then, on the same
 *    rounded operands, with the same products.
 *
 * Plain C, usable from C and from .cu files.
 */
#ifndef DDPRT_OPS_H
#define DDPRT_OPS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* status.h has no C++ guard of its own; this keeps ddp_error_at's C linkage when
 * ops.h is the first to bring it into a .cu file. */
#include "status.h"  // DdpStatus, ddp_error_at
#include "precision.h"  // DdpPrecision
#include "ops_epilogue.h"  // DdpEpilogue: a product's bias, and a relu or not

/* The type of parameter gradients (DdpCtx.grads): what sums over the batch
 * write, what the all-reduce sums over ranks, what the optimizer reads.
 *
 * On CPUs an order-free sum (exact_sum.h: two doubles). Each sample's part of
 * a gradient is computed the same bits however the batch is dealt out; summed
 * so that no grouping of the parts into threads, batches or ranks can change
 * a bit, 2 ranks x B take the same steps as 1 rank x 2B by construction
 * (tests/distributed/), and the optimizer rounds each gradient to float once.
 * Plain float sums of 2 x 16 and of 1 x 32 samples differ in the last bit,
 * and training amplifies that (relu kinks, batchnorm, Adam's division by
 * sqrt(v)) to about 1e-2 of the update in 20 steps; double sums differ in
 * their last bit too, and now and then so does the float they round to.
 * The cost: 16 bytes a gradient, four times the all-reduce bytes of floats,
 * and a few operations per sample and gradient element.
 *
 * On GPUs a float, as cuDNN and cuBLAS write them: there the all-reduce
 * bytes matter more, and cuDNN's own sums are not split-invariant anyway. */
#ifdef __CUDACC__
typedef float DdpGrad;
#else
#include "exact_sum.h"  // DdpExact
typedef DdpExact DdpGrad;
#endif

/* One 2-D convolution. The caller sets the inputs (n is the largest batch the
 * program will pass) and ddp_conv_shape_init checks them and fills out_h/out_w.
 * channels_last comes last so that an initializer without it means NCHW. */
typedef struct {
    int n, c, h, w;          /* input: batch, channels, height, width */
    int k, r, s;             /* output channels, kernel height, kernel width */
    int stride, pad, groups; /* the same stride and padding on both axes */
    int out_h, out_w;        /* filled by ddp_conv_shape_init */
    int channels_last;       /* 0: x, y, dx, dy are n x c x h x w; 1: n x h x w x c (NHWC).
                                Weights and their gradients are k x c/groups x r x s either way */
} DdpConvShape;

/* Checks SHAPE (positive sizes, channels divisible by groups, a kernel that fits
 * the padded input, a layout of 0 or 1) and fills out_h, out_w. Inline so that
 * both implementations and the generated code share one definition and the two
 * ops objects keep exactly the same symbols. A bad shape is the compiler's bug,
 * not the user's. */
static inline DdpStatus ddp_conv_shape_init(DdpConvShape *shape)
{
    DdpConvShape *s = shape;
    if (s->n < 1 || s->c < 1 || s->h < 1 || s->w < 1 || s->k < 1 || s->r < 1 || s->s < 1 ||
        s->stride < 1 || s->pad < 0 || s->groups < 1 || s->c % s->groups || s->k % s->groups)
        return DDP_ERR(DDP_FAIL,
                       "internal error: bad conv shape n=%d c=%d h=%d w=%d k=%d r=%d s=%d "
                       "stride=%d pad=%d groups=%d",
                       s->n, s->c, s->h, s->w, s->k, s->r, s->s, s->stride, s->pad, s->groups);
    if (s->channels_last != 0 && s->channels_last != 1)
        return DDP_ERR(DDP_FAIL, "internal error: conv channels_last=%d, not 0 (NCHW) or 1 (NHWC)",
                       s->channels_last);
    if (s->h + 2 * s->pad < s->r || s->w + 2 * s->pad < s->s)
        return DDP_ERR(DDP_FAIL, "internal error: conv kernel %dx%d larger than padded input %dx%d",
                       s->r, s->s, s->h + 2 * s->pad, s->w + 2 * s->pad);
    s->out_h = (s->h + 2 * s->pad - s->r) / s->stride + 1;
    s->out_w = (s->w + 2 * s->pad - s->s) / s->stride + 1;
    return DDP_OK;
}

typedef struct DdpOps DdpOps;

/* Creates the context: on CUDA, the cuDNN and cuBLAS handles bound to STREAM (a
 * cudaStream_t; NULL is the legacy default stream, which cannot be captured) on
 * the current device; on CPU, STREAM is ignored. */
DdpStatus ddp_ops_create(DdpOps **ops, void *stream);
/* Frees everything; NULL is fine. On CUDA, wait for the stream first. */
void ddp_ops_destroy(DdpOps *ops);

/* The precision of every call's products from now on (precision.h): fp32
 * unless set. Only before ddp_ops_finalize, which sizes what it needs. */
DdpStatus ddp_ops_set_precision(DdpOps *ops, DdpPrecision precision);

/* Registers conv number ID (ids run 0..count-1, each once, any order) with a
 * shape from ddp_conv_shape_init. Only before ddp_ops_finalize. */
DdpStatus ddp_ops_plan_conv(DdpOps *ops, int id, const DdpConvShape *shape);
/* Registers a linear layer's products at batches up to N: x (N x IN), its
 * weights (OUT x IN) and the output's gradient (N x OUT), so that finalize
 * sizes the GPU build's rounded copies for them (the CPU build's grow).
 * Only before ddp_ops_finalize. */
DdpStatus ddp_ops_plan_linear(DdpOps *ops, int n, int in, int out);

/* The bytes ddp_ops_finalize will allocate for the calls planned so far,
 * for the start-up memory check: on CUDA the rounded copies (tf32, bf16) and
 * the NHWC convs' weights' copy, but not cuDNN's workspace, which is chosen
 * there and which ddp_device_library_bytes counts at its limit; on CPU the
 * im2col, Winograd, oneDNN and NCHW scratch, but not the products' packed
 * and rounded copies, which grow in the first step (per thread, at most a
 * product's operands). */
size_t ddp_ops_planned_bytes(const DdpOps *ops);

/* Builds the cuDNN descriptors (CUDA), chooses the algorithms and
 * allocates the one shared workspace (CUDA) or
 * the im2col, Winograd and oneDNN scratch (CPU), and what the NHWC convs
 * need: on CUDA their weights' copy in cuDNN's NHWC filter order, on CPU
 * their operands' NCHW copies. On CUDA the algorithms come from
 * cuDNN's heuristics in their fixed order, not from timing, so that every
 * process (a resumed run too) chooses the same ones (device_rules.h); only
 * DDP_CUDNN_BENCHMARK=1 orders them by cuDNN's timings instead, which other
 * processes then take (ddp_ops_conv_choices, ddp_ops_take_conv_choices). */
DdpStatus ddp_ops_finalize(DdpOps *ops);

/* Before finalize: order cuDNN's algorithms by their timings, as
 * DDP_CUDNN_BENCHMARK=1 does, for a run that writes them for later runs to
 * take (conv_choices_file.h). Nothing on CPUs. */
void ddp_ops_time_algorithms(DdpOps *ops);

/* The convs' algorithms as conv_choices.h's text, where cuDNN's timings
 * chose them (DDP_CUDNN_BENCHMARK=1, ddp_ops_time_algorithms) or they were taken from another
 * process (ddp_ops_take_conv_choices): what a checkpoint keeps and rank 0
 * gives the other ranks. "" where the heuristics chose them (every process
 * on the same GPU model and cuDNN chooses alike), and on CPUs. Returns the
 * length the text needs, as snprintf (BUF "" if it does not fit). */
size_t ddp_ops_conv_choices(const DdpOps *ops, char *buf, size_t len);

/* After finalize and before any step: the algorithms of TEXT (another
 * process's ddp_ops_conv_choices), their fallbacks and their workspace's
 * size exactly, instead of this process's own. *TAKEN 1 when taken; 0, with
 * WHY, when they do not apply here (another GPU model or cuDNN version,
 * convs it does not name, an algorithm that does not run here or breaks
 * choose()'s rules for this run: its precision, the workspace limit,
 * determinism), when the GPU has no memory for their workspace, and always
 * on CPUs: the process keeps its own. DDP_BAD_INPUT for unreadable text. */
DdpStatus ddp_ops_take_conv_choices(DdpOps *ops, const char *text, int *taken, char *why, size_t why_len);

/* The first failure of any call since create (DDP_OK if none). On failure the
 * message ("cudnnConvolutionForward: CUDNN_STATUS_BAD_PARAM") and the runtime
 * file:line are recorded again with ddp_error_at, so the caller can print it as
 * any other runtime error. The failure stays: later polls report it too. */
DdpStatus ddp_ops_status(const DdpOps *ops);
/* Forgets the failure kept: the calls of a CUDA graph capture the device
 * refused (step_graphs.h) fail once it is refused, but none of them ran,
 * and the step is made again without a graph. The trainer has polled
 * ddp_ops_status after every step before it, so no earlier failure is lost. */
void ddp_ops_forget_failure(DdpOps *ops);

/* Bytes of workspace (CUDA) or scratch (CPU) finalize allocated. */
size_t ddp_ops_workspace_bytes(const DdpOps *ops);
/* Writes one line naming the algorithms chosen for conv ID into BUF (for
 * --verbose), e.g. "fwd IMPLICIT_PRECOMP_GEMM, bwd-data ALGO_1, bwd-filter ALGO_1". */
void ddp_ops_describe_conv(const DdpOps *ops, int id, char *buf, size_t len);
/* One line for the run's start: how the calls meet the precision set, on
 * this machine ("" in fp32). */
void ddp_ops_describe_precision(const DdpOps *ops, char *buf, size_t len);
/* What besides the program decides the bits of this process's steps, for
 * the ranks to compare at start-up (ddp_dist_check_same): on CPUs the
 * kernels oneDNN chose for the convs ("oneDNN jit:avx512_core"), "" where
 * it runs none (the runtime's own kernels give the same bits on every
 * CPU); on GPUs "" (their steps are not bit-invariant anyway). */
void ddp_ops_describe_kernels(const DdpOps *ops, char *buf, size_t len);

/* After steps have run: where the products' bias and relu went, for the
 * end of a GPU run (README.md shows the line): how many convs cuDNN fused
 * and how many linear shapes (a layer at each batch size) cuBLASLt did,
 * and how many each refused, whose epilogue came after the call (a conv
 * fused at one batch size and refused at another counts as refused). "" where
 * no product has a bias, and on CPUs (always the same loop). */
void ddp_ops_describe_fusion(const DdpOps *ops, char *buf, size_t len);

/* The per-step calls. N is this call's batch (1..the planned n): the last batch
 * of an epoch may be smaller. Activations other than a forward relu after a
 * bias are not here; generated kernels fuse them around these calls. The
 * layouts below are NCHW's; for a conv planned channels_last, x and dx are
 * n x h x w x c and y and dy n x out_h x out_w x k, while w and dw keep
 * k x c/groups x r x s. */

/* y = conv(x, w). x: n x c x h x w, w: k x c/groups x r x s, y: n x k x out_h x out_w. */
void ddp_conv_forward(DdpOps *ops, int id, int n, const float *x, const float *w, float *y);
/* y = EPILOGUE(conv(x, w) + bias[k]), bias[k] added to output channel k in
 * either layout, as ddp_epilogue_apply (ops_epilogue.h)
 * computes each element: on GPUs one cudnnConvolutionBiasActivationForward
 * (conv, bias and relu in one pass over y) where cuDNN takes the shape and
 * algorithm, else the conv and a kernel of this library; on CPUs each
 * sample's planes while they are still in cache. The same bits as
 * ddp_conv_forward and then the epilogue, on CPUs. */
void ddp_conv_forward_bias(DdpOps *ops, int id, int n, const float *x, const float *w, const float *bias,
                           DdpEpilogue epilogue, float *y);
/* dx = beta * dx + the gradient of the loss with respect to x, given dy. beta 0
 * overwrites; beta 1 adds, where x also feeds another layer (a residual's input). */
void ddp_conv_backward_data(DdpOps *ops, int id, int n, const float *dy, const float *w,
                            float *dx, float beta);
/* dw = beta * dw + the gradient with respect to w, summed over the batch, in
 * w's order (k x c/groups x r x s) whatever the conv's layout. beta 0
 * overwrites (dw may hold garbage, even NaN); beta 1 accumulates across
 * micro-batches (no other beta). On CPUs each sample's part, computed alone
 * in float, is added to the order-free sums of DdpGrad. */
void ddp_conv_backward_filter(DdpOps *ops, int id, int n, const float *x, const float *dy,
                              DdpGrad *dw, float beta);

/* C = alpha * op(A) * op(B) + beta * C, row-major, as BLAS's sgemm (CblasRowMajor):
 * op(A) is m x k, op(B) is k x n, C is m x n; trans_a/trans_b nonzero transposes;
 * lda, ldb, ldc are row strides in elements. beta 0 ignores C's old contents.
 * In fp32 it needs no plan: it may be called right after ddp_ops_create; in
 * tf32 and bf16 the GPU build rounds A and B into copies that
 * ddp_ops_plan_linear sized (a larger operand fails the call). On CPUs every
 * element of C is the same bits whatever m and n are (gemm_cpu.h). Like every call here,
 * from one thread at a time per context: the CPU build keeps scratch in it. */
void ddp_gemm(DdpOps *ops, int trans_a, int trans_b, int m, int n, int k, float alpha,
              const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* A linear layer's forward: y = EPILOGUE(x . w^T + bias), row-major: x is
 * n x in, w out x in (as PyTorch stores it), bias out, y n x out. On GPUs
 * one cuBLASLt matmul with its BIAS or RELU_BIAS epilogue where cuBLASLt has
 * an algorithm for the shape, else ddp_gemm's product and a kernel of this
 * library; on CPUs ddp_gemm's product and then the epilogue, the same bits
 * as the two apart. Planned as ddp_gemm is. */
void ddp_linear_forward_bias(DdpOps *ops, int n, int in, int out, const float *x, const float *w, const float *bias,
                             DdpEpilogue epilogue, float *y);

/* A linear layer's weight gradient: DW = beta * DW + DY^T . X, summed over the
 * K (0 or more) samples of the batch: DY is k x m (row stride ldy), X is k x n (ldx), DW
 * is m x n (ldw), beta 0 or 1 as above. On CPUs every product of two floats
 * (exact in double) is a sample's part, added to the order-free sums of
 * DdpGrad; on GPUs cublasSgemm. Planned as ddp_gemm is. */
void ddp_gemm_grad(DdpOps *ops, int m, int n, int k, const float *dy, int ldy, const float *x, int ldx,
                   float beta, DdpGrad *dw, int ldw);

#ifdef __cplusplus
}
#endif

#endif
