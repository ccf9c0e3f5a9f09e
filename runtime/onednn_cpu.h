/*
 * onednn_cpu.h: CPU convolutions by oneDNN's direct kernels (Debian's
 * libdnnl, version 2), for ops_cpu.c, one sample per call.
 *
 * Why: oneDNN's just-in-time direct convolutions run resnet.net's 3x3s'
 * forward and backward data several times as fast as the runtime's own
 * Winograd and im2col (their weight gradients are Winograd's: ops_cpu.c)
 * (bench/conv_cpu.sh times each pass as planned, on the runtime's own and
 * on oneDNN), and the nets where users would pick PyTorch are those whose
 * time goes to convolutions.
 *
 * How the promises hold (ops.h, exact_sum.h): every call takes one sample
 * (a batch of 1), on one thread, with primitives made for one thread. A
 * sample's output, its input's gradient and its part of the weight gradient
 * are then the same bits in any batch, on any rank, whatever thread runs
 * it; the weight gradient adds each sample's part to the order-free sums.
 * What oneDNN does not promise, that one call gives the same bits every
 * time, is checked for each conv when it is planned, on random data; a conv
 * that fails the check (or that oneDNN would run with a reference or GEMM
 * kernel instead of a direct one) stays with the runtime's own code.
 *
 * What it costs: oneDNN's kernels depend on the CPU's instruction set
 * (AVX-512, AVX2), and so does whether oneDNN takes a conv. One kind of
 * machine gives one set of bits; ranks on different kinds still agree on
 * every step (they sum the same parts), but a run no longer takes bit for
 * bit the steps it would take on the other kind. DDP_CPU_CONV=own in the
 * environment keeps every conv on the runtime's own kernels, whose bits
 * are the same on both.
 *
 * Activations are NCHW (ops_cpu.c hands an NHWC conv's over in NCHW
 * copies); each call reorders its sample into the layout oneDNN chose
 * (channels in blocks of 8 or 16) and back.
 */
#ifndef DDPRT_ONEDNN_CPU_H
#define DDPRT_ONEDNN_CPU_H

#include "ops.h"  // DdpConvShape, DdpGrad

typedef struct OnednnConv OnednnConv;

/* The passes a conv may give oneDNN: forward with backward data (they
 * share the weights' layout question), and the weight gradient. */
enum { DDP_ONEDNN_DATA = 1, DDP_ONEDNN_FILTER = 2 };

/* What DDP_CPU_CONV in the environment asks for: unset (or empty), the
 * passes ops_cpu.c's plan gives oneDNN; "own", none (the runtime's own
 * kernels, whose bits are the same on every kind of CPU); "onednn", every
 * pass oneDNN has a direct kernel for (bench/conv_cpu.sh compares the
 * three). Tests choose with ddp_onednn_choose (-1: the environment's
 * again); a choice applies to the convs planned after it. */
typedef enum { DDP_CONV_PLANNED, DDP_CONV_OWN, DDP_CONV_ONEDNN } DdpConvChoice;
DdpConvChoice ddp_onednn_choice(void);
void ddp_onednn_choose(int choice);
/* DDP_BAD_INPUT naming DDP_CPU_CONV when it holds anything else. */
DdpStatus ddp_onednn_check_environment(void);
/* Whether this build has oneDNN (libdnnl-dev 2.x was found). */
int ddp_onednn_built_in(void);
/* Whether oneDNN runs AVX-512 kernels here (avx512_core or above): its AVX2
 * kernels win fewer passes, and the plan (ops_cpu.c) takes that into
 * account. 0 without oneDNN. */
int ddp_onednn_avx512(void);

/* oneDNN's primitives for the PASSES of SHAPE (groups 1), run by up to
 * NTHREADS threads, or NULL where oneDNN is not allowed, has no direct
 * kernel for one of the passes, or fails the bits check; WHY (LEN bytes)
 * then says which, for ddp_ops_describe_conv. Out of memory is the only
 * failure. */
DdpStatus ddp_onednn_conv_create(OnednnConv **conv, const DdpConvShape *shape, int passes, int nthreads,
                                 char *why, size_t len);
void ddp_onednn_conv_destroy(OnednnConv *conv);

/* The implementation oneDNN chose for PASS ("jit:avx512_core"): forward's
 * for DDP_ONEDNN_DATA, the weight gradient's for DDP_ONEDNN_FILTER. */
const char *ddp_onednn_conv_kernel(const OnednnConv *conv, int pass);

/* The scratch the calls need, for all the threads: one sample's input
 * gradient, weight gradient part and the order-free sums of the weight
 * gradient, per thread. The convs run one at a time, so they may share it. */
size_t ddp_onednn_conv_scratch_bytes(const OnednnConv *conv);

/* ops.h's three calls, for N samples (any N: each call takes one), in
 * SCRATCH (64-byte aligned, the bytes above). A failure inside oneDNN is
 * kept (the first one) for ddp_onednn_conv_failed; the results are then
 * not to be used. */
void ddp_onednn_conv_forward(OnednnConv *conv, int n, const float *x, const float *w, float *y);
void ddp_onednn_conv_backward_data(OnednnConv *conv, void *scratch, int n, const float *dy, const float *w,
                                   float *dx, float beta);
void ddp_onednn_conv_backward_filter(OnednnConv *conv, void *scratch, int n, const float *x, const float *dy,
                                     DdpGrad *dw, float beta);
/* Nonzero once a call has failed; WHAT and STATUS of the first failure. */
int ddp_onednn_conv_failed(const OnednnConv *conv, const char **what, int *status);

#endif
