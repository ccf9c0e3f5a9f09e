/*
 * buckets.h: which gradients are all-reduced together.
 *
 * PyTorch DDP's rule (compute_bucket_assignment_by_size, as used when it
 * rebuilds its buckets in the order gradients become ready): walk the
 * trainable parameters in reverse order, add each to the open bucket, and
 * close the bucket as soon as its size reaches its cap; the first bucket's
 * cap is FIRST_CAP_BYTES (1 MB by default, small so that the first all-reduce
 * starts early in the backward pass), every later one's CAP_BYTES (25 MB).
 *
 * Pure and dependency-free, so that the compiler (plan.c, --emit plan) and
 * the runtime (reducer.c) link the same code and can never disagree. The
 * parameters are laid out one after the other in the flat gradient buffer
 * in the order given (reverse parameter order), each starting on
 * DDP_PARAM_ALIGN floats, so every bucket is one contiguous slice
 * [offset, offset + count) of it, the few floats between its parameters
 * included (zeros: nothing writes them).
 */
#ifndef DDPRT_BUCKETS_H
#define DDPRT_BUCKETS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A bucket's size is counted in float32 parameters, 4 * count bytes, as DDP
 * counts them: the caps mean the same on every target. The CPU build's
 * gradients are two doubles each (ops.h: DdpGrad), so its buckets carry four
 * times that. */
enum { DDP_BUCKET_ELEM_BYTES = 4 };

/* Where each parameter starts in the flat buffers (parameters, gradients,
 * optimizer state, and the untrained buffers alike): on 16 bytes. cuBLASLt
 * is given a bias only so aligned (runtime/lt_linear.h), and its and cuDNN's
 * fastest kernels load operands 16 bytes at a time; packed back to back, a
 * parameter after one of odd length would not be. */
enum { DDP_PARAM_ALIGN = 4 };

/* The first float at or after OFFSET where a parameter may start. */
static inline int64_t ddp_param_start(int64_t offset)
{
    return (offset + DDP_PARAM_ALIGN - 1) / DDP_PARAM_ALIGN * DDP_PARAM_ALIGN;
}

typedef struct {
    int64_t offset;  /* first float of the bucket in the flat gradient buffer */
    int64_t count;   /* floats in the bucket */
    int first;       /* its parameters: positions FIRST .. FIRST + N_PARAMS - 1 of SIZES */
    int n_params;
} DdpBucket;

/* The bucket caps a run may have, in bytes: the .net's `bucket` line and
 * --bucket-cap-mb alike (a cap below a float's 4 bytes would bucket
 * nothing; one of 64 GiB, every net of the largest in one bucket). */
#define DDP_BUCKET_LEAST_BYTES 4
#define DDP_BUCKET_MOST_BYTES ((int64_t)64 << 30)

/* The first bucket's cap for a bucket cap of CAP bytes: DDP's 1 MB (small,
 * so that the first all-reduce starts early in backward), or CAP if smaller.
 * PyTorch's own rules differ in two corners, where only the buckets' bounds
 * (and so the overlap) differ, never a result: 1.13 keeps the first bucket
 * at 1 MB under a smaller cap; 2.x, given bucket_cap_mb=X, caps every
 * bucket, the first too, at X, also above 1 MB (its default, 25 MB, keeps
 * the first at 1 MB, as here). */
static inline int64_t ddp_first_bucket_bytes(int64_t cap)
{
    return cap < 1024 * 1024 ? cap : 1024 * 1024;
}

/* SIZES holds the N trainable parameters' element counts in the order
 * buckets fill them (reverse parameter order), laid out from offset 0, each
 * at ddp_param_start of where the one before ended. Writes the buckets to
 * OUT (room for N; N buckets at most) in launch order and returns how many.
 * A bucket's size against its cap is its parameters' elements, as DDP
 * counts them, without the floats between them. A cap of 0 or less closes
 * every bucket after one parameter. N of 0 gives no bucket. */
int ddp_buckets_plan(const int64_t *sizes, int n, int64_t cap_bytes, int64_t first_cap_bytes, DdpBucket *out);

#ifdef __cplusplus
}
#endif

#endif
