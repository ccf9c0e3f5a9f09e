/*
 * sampler.c: PyTorch's DistributedSampler, bit for bit.
 *
 * A user who moves a training script from PyTorch to ddpc expects the same
 * samples in the same order on the same rank, so that a run can be compared
 * step by step with the script it replaces. That pins three things down:
 *
 *   - the generator: torch.Generator() on the CPU is a 32-bit Mersenne Twister
 *     (aten/src/ATen/core/MT19937RNGEngine.h) seeded with the low 32 bits of
 *     the seed, the standard mt19937 init, and each draw the standard temper;
 *   - the shuffle: torch 1.13's randperm_cpu (aten/src/ATen/native/
 *     TensorFactories.cpp) is a forward Fisher-Yates, swapping position i with
 *     i + random() % (n - i) for i < n - 1, one 32-bit draw per step, with the
 *     modulo bias that implies. Later releases switch to 64-bit draws for huge
 *     n, far beyond any data set here; tests/unit/sampler_tables.h pins 1.13;
 *   - the split: torch/utils/data/distributed.py pads by repeating the
 *     permutation from its start (or truncates with drop_last) and deals the
 *     result round-robin, rank r taking positions r, r + R, r + 2R, ...
 *
 * The generator state is a plain struct so a checkpoint could save it, and
 * nothing here keeps state between epochs: epoch E's order depends only on
 * (seed + E), which is what makes --resume land on the same samples.
 */
#include "sampler.h"

#include <stdlib.h>

enum { MT_N = 624, MT_M = 397 };

void ddp_mt19937_seed(DdpMt19937 *mt, uint64_t seed)
{
    mt->state[0] = (uint32_t)seed;
    for (uint32_t j = 1; j < MT_N; j++) {
        uint32_t prev = mt->state[j - 1];
        mt->state[j] = 1812433253u * (prev ^ (prev >> 30)) + j;
    }
    /* PyTorch regenerates the state lazily on the first draw. */
    mt->left = 1;
    mt->next = 0;
}

static uint32_t mt_twist(uint32_t u, uint32_t v)
{
    uint32_t mixed = (u & 0x80000000u) | (v & 0x7fffffffu);
    return (mixed >> 1) ^ (v & 1u ? 0x9908b0dfu : 0u);
}

static void mt_regenerate(DdpMt19937 *mt)
{
    uint32_t *s = mt->state;
    for (int k = 0; k < MT_N; k++)
        s[k] = s[(k + MT_M) % MT_N] ^ mt_twist(s[k], s[(k + 1) % MT_N]);
    mt->left = MT_N;
    mt->next = 0;
}

uint32_t ddp_mt19937_next(DdpMt19937 *mt)
{
    if (--mt->left == 0)
        mt_regenerate(mt);
    uint32_t y = mt->state[mt->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

DdpStatus ddp_randperm(int64_t n, uint64_t seed, int64_t *perm)
{
    if (n < 0)
        return DDP_ERR(DDP_BAD_INPUT, "randperm: n must be >= 0, got %lld", (long long)n);
    DdpMt19937 mt;
    ddp_mt19937_seed(&mt, seed);
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = 0; i < n - 1; i++) {
        int64_t z = (int64_t)ddp_mt19937_next(&mt) % (n - i);
        int64_t saved = perm[i];
        perm[i] = perm[i + z];
        perm[i + z] = saved;
    }
    return DDP_OK;
}

DdpStatus ddp_sampler_init(DdpSampler *sampler, int64_t n, int replicas, int rank,
                           int shuffle, int64_t seed, int drop_last)
{
    if (n < 1)
        return DDP_ERR(DDP_BAD_INPUT, "sampler: the data set holds %lld samples; it needs at least 1",
                       (long long)n);
    if (replicas < 1)
        return DDP_ERR(DDP_BAD_INPUT, "sampler: world size must be at least 1, got %d", replicas);
    if (rank < 0 || rank >= replicas)
        return DDP_ERR(DDP_BAD_INPUT, "sampler: rank %d is out of range for world size %d (ranks are 0..%d)",
                       rank, replicas, replicas - 1);
    /* distributed.py: ceil((n - R) / R) when dropping a ragged tail, which is
     * floor(n / R) and 0 when n < R; otherwise ceil(n / R). */
    int64_t r = replicas;
    int64_t num = drop_last && n % r != 0 ? n / r : n / r + (n % r != 0);
    *sampler = (DdpSampler){
        .n = n,
        .replicas = replicas,
        .rank = rank,
        .shuffle = shuffle != 0,
        .seed = seed,
        .drop_last = drop_last != 0,
        .num_samples = num,
        .total = num * r,
    };
    return DDP_OK;
}

DdpStatus ddp_sampler_epoch(const DdpSampler *s, int64_t epoch, int64_t *indices)
{
    if (!s->shuffle) {
        /* arange, padded by wrapping around: position p holds p % n. */
        for (int64_t k = 0; k < s->num_samples; k++)
            indices[k] = (s->rank + k * s->replicas) % s->n;
        return DDP_OK;
    }
    int64_t *perm = malloc((size_t)s->n * sizeof *perm);
    if (!perm)
        return DDP_ERR(DDP_FAIL, "sampler: out of memory for a permutation of %lld samples",
                       (long long)s->n);
    /* Python adds seed + epoch exactly, and manual_seed keeps the sum's
     * two's complement up to 2^64 - 1 (a negative seed too), so unsigned
     * arithmetic gives the same bits; past 2^64 - 1 PyTorch refuses, as the
     * trainer does before it starts (check_seed). */
    ddp_randperm(s->n, (uint64_t)s->seed + (uint64_t)epoch, perm);
    /* Padding repeats the permutation from its start, as often as needed, so
     * padded position p holds perm[p % n]; truncation never reaches p >= n. */
    for (int64_t k = 0; k < s->num_samples; k++)
        indices[k] = perm[(s->rank + k * s->replicas) % s->n];
    free(perm);
    return DDP_OK;
}
