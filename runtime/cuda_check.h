/*
 * cuda_check.h: the one way the CUDA sources (device_cuda.cu, ops_cuda.cu,
 * pg_nccl.cu) turn a failed CUDA runtime call into a DdpStatus, so every
 * such failure reads the same: DDP_FAIL naming the function called and
 * CUDA's error name and text.
 *
 * Only for .cu files: it needs cuda_runtime.h, and status.h's DDP_ERR.
 */
#ifndef DDP_CUDA_CHECK_H
#define DDP_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <string.h>

#include "status.h"

/* "cudaMalloc(p, bytes)" -> the length of "cudaMalloc": messages name the
 * function, not its arguments. */
static inline int call_name_len(const char *call) { return (int)strcspn(call, "( "); }

/* Set-up code returns the failure of CALL to its caller. */
#define CUDA_TRY(call)                                                             \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess)                                                     \
            return DDP_ERR(DDP_FAIL, "%.*s: %s (%s)", call_name_len(#call), #call, \
                           cudaGetErrorName(e_), cudaGetErrorString(e_));          \
    } while (0)

#endif
