/*
 * dropout_mask.h: which elements a dropout layer keeps, as a pure function.
 *
 * A mask drawn from a stream of random numbers depends on how samples are
 * spread over ranks and threads. This one is a hash of (seed, layer, epoch,
 * sample index in the data set, element index in the sample), so every rank
 * count, batch split and thread count drops the same elements, the backward
 * pass recomputes the mask instead of storing it, and the PyTorch module of
 * `ddpc --emit torch` reproduces it exactly with integer tensor ops.
 *
 * The hash is Chris Wellons' "lowbias32" integer mixer. Every product fits in
 * 63 bits (a 32-bit value times a 32-bit odd constant), so int64 arithmetic
 * masked to 32 bits, as in PyTorch, gives the same numbers.
 *
 *   key  = hash(hash(hash(hash(seed_lo ^ seed_hi ^ hash(layer)) ^ epoch) ^ sample) ^ element)
 *   keep = key >= threshold, threshold = floor(p * 2^32); kept values scale by 1 / (1 - p)
 *
 * layer is the dropout's ordinal in the net (1 for dropout1); epoch, sample
 * and element are taken modulo 2^32.
 */
#ifndef DDPRT_DROPOUT_MASK_H
#define DDPRT_DROPOUT_MASK_H

#include <stdint.h>

#include "host_device.h"  // DDP_HOST_DEVICE

static inline DDP_HOST_DEVICE uint32_t ddp_hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

/* The part of the key shared by a whole layer and epoch. */
static inline DDP_HOST_DEVICE uint32_t ddp_dropout_layer_key(uint64_t seed, uint32_t layer, int64_t epoch)
{
    uint32_t k = ddp_hash32((uint32_t)seed ^ (uint32_t)(seed >> 32) ^ ddp_hash32(layer));
    return ddp_hash32(k ^ (uint32_t)epoch);
}

static inline DDP_HOST_DEVICE int ddp_dropout_keep(uint32_t layer_key, int64_t sample, int64_t element,
                                                   uint32_t threshold)
{
    return ddp_hash32(ddp_hash32(layer_key ^ (uint32_t)sample) ^ (uint32_t)element) >= threshold;
}

/* floor(p * 2^32), for 0 <= p < 1 */
static inline uint32_t ddp_dropout_threshold(double p)
{
    return (uint32_t)(p * 4294967296.0);
}

#endif
