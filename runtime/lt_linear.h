/*
 * lt_linear.h: a linear layer's forward as one cuBLASLt matmul with its bias
 * (and relu) in the epilogue, for ops_cuda.cu's ddp_linear_forward_bias.
 *
 * cublasSgemm writes the product and a kernel then reads it back to add the
 * bias and apply the relu; cuBLASLt's BIAS and RELU_BIAS epilogues do both
 * while the tile is still in registers: one launch and one pass over y fewer.
 *
 * A plan (the descriptors and the heuristics' first algorithm) is made per
 * shape, epilogue, math and the operands' and bias's alignment (the
 * heuristics judge the bias's from its pointer) on the first call that
 * needs it: a step's first, which runs outside any CUDA graph capture
 * (step_graphs.h), and the epoch's short last batch's. Making one allocates
 * host memory only. Where cuBLASLt has no algorithm for a plan, or the bias
 * is not on 16 bytes (cuBLASLt's kernels may assume it is, and no
 * preference says otherwise; ddpc's layout puts it there), the call says so
 * and the caller computes the same thing its own way; a plan that cuBLASLt
 * refuses at the call is not tried again (the same key is refused the same
 * way: the path depends on the call alone).
 *
 * Only ops_cuda.cu includes this.
 */
#ifndef DDPRT_LT_LINEAR_H
#define DDPRT_LT_LINEAR_H

#include <cublasLt.h>  // cublasStatus_t
#include <cuda_runtime.h>
#include <stddef.h>

#include "ops_epilogue.h"  // DdpEpilogue

typedef struct DdpLtLinear DdpLtLinear;

/* Queues on STREAM, sharing cuBLAS's WORKSPACE of BYTES (the calls on one
 * stream never overlap). CUBLAS_STATUS_SUCCESS, or cublasLtCreate's
 * failure (ALLOC_FAILED: no memory for the context). */
cublasStatus_t ddp_lt_linear_create(DdpLtLinear **out, cudaStream_t stream, void *workspace, size_t bytes);
void ddp_lt_linear_destroy(DdpLtLinear *lt);

/* y = EPILOGUE(x . w^T + bias) as ops.h's ddp_linear_forward_bias, on TF32
 * tensor cores if TF32. 1: queued; 0: cuBLASLt has no algorithm for it, or
 * refused it (nothing queued: compute it otherwise); -1: a failure, named in
 * WHY. */
int ddp_lt_linear_forward(DdpLtLinear *lt, int tf32, int n, int in, int out, const float *x, const float *w,
                          const float *bias, DdpEpilogue epilogue, float *y, char *why, size_t why_len);

/* The plans made so far: *FUSED with an algorithm cuBLASLt ran, *REFUSED
 * without (none found, the bias not on 16 bytes, refused at the call). */
void ddp_lt_linear_counts(const DdpLtLinear *lt, int *fused, int *refused);

#endif
