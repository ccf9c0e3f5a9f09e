/*
 * ops_epilogue.h: what a product's fused epilogue does to one element (ops.h's
 * ddp_conv_forward_bias, ddp_linear_forward_bias), written once for the CPU
 * build's loops and the GPU build's fallback kernel.
 *
 * The bias is added in float and a relu keeps the sum or 0: the generated
 * kernels' relu (emit_cu.c), so a CPU run is the same bits fused or not. A
 * NaN passes, as PyTorch's relu passes it. cuDNN's epilogue computes the
 * same expression (CUDNN_PROPAGATE_NAN); cuBLASLt's documents no NaN rule;
 * on GPUs the sums before it are theirs anyway.
 */
#ifndef DDPRT_OPS_EPILOGUE_H
#define DDPRT_OPS_EPILOGUE_H

#include "host_device.h"  // DDP_HOST_DEVICE

#ifdef __cplusplus
extern "C" {
#endif

/* The bias alone, or the bias then a relu. */
typedef enum { DDP_EPILOGUE_BIAS, DDP_EPILOGUE_BIAS_RELU } DdpEpilogue;

static inline DDP_HOST_DEVICE float ddp_epilogue_apply(DdpEpilogue epilogue, float product, float bias)
{
    float v = product + bias;
    return epilogue == DDP_EPILOGUE_BIAS_RELU ? (v < 0.0f ? 0.0f : v) : v;
}

#ifdef __cplusplus
}
#endif

#endif
