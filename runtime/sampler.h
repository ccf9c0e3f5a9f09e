/*
 * sampler.h: which samples each rank trains on, epoch by epoch, exactly as
 * PyTorch's DistributedSampler (with a CPU torch.Generator) would choose them.
 */
#ifndef DDPRT_SAMPLER_H
#define DDPRT_SAMPLER_H

#include <stdint.h>

#include "status.h"  // DdpStatus

/* PyTorch's CPU generator: a 32-bit Mersenne Twister (at::mt19937). */
typedef struct {
    uint32_t state[624];
    int left;      /* draws left before the state is regenerated */
    int next;      /* index of the next state word to temper */
} DdpMt19937;

/* Seeds as torch.Generator().manual_seed(SEED) does: the seed's two's
 * complement, of which the generator keeps the low 32 bits. */
void ddp_mt19937_seed(DdpMt19937 *mt, uint64_t seed);
/* The next 32-bit draw: at::CPUGeneratorImpl::random(). */
uint32_t ddp_mt19937_next(DdpMt19937 *mt);

/* torch.randperm(N, generator=g) after g.manual_seed(SEED), torch 1.13 CPU,
 * into PERM[0..N). */
DdpStatus ddp_randperm(int64_t n, uint64_t seed, int64_t *perm);

typedef struct {
    int64_t n;           /* samples in the data set */
    int replicas;        /* ranks sharing it */
    int rank;            /* this rank, 0 <= rank < replicas */
    int shuffle;         /* reshuffle every epoch with seed + epoch */
    int64_t seed;
    int drop_last;       /* drop the tail rather than pad by repeating */
    int64_t num_samples; /* per rank per epoch: len(sampler); may be 0 */
    int64_t total;       /* num_samples * replicas */
} DdpSampler;

/* Checks the arguments (n >= 1, replicas >= 1, 0 <= rank < replicas) and fills
 * SAMPLER; DDP_BAD_INPUT with a message naming the bad value otherwise. */
DdpStatus ddp_sampler_init(DdpSampler *sampler, int64_t n, int replicas, int rank,
                           int shuffle, int64_t seed, int drop_last);

/* The indices this rank visits in EPOCH, in order, into
 * INDICES[0..num_samples): list(iter(sampler)) after sampler.set_epoch(EPOCH). */
DdpStatus ddp_sampler_epoch(const DdpSampler *sampler, int64_t epoch, int64_t *indices);

#endif
