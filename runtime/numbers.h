/*
 * numbers.h: how a number written on a command line or in a .net file is read.
 *
 * One rule for ddpc's flags, the generated program's flags and the .net
 * file's whole numbers that must match a flag's (the seed): decimal digits
 * and nothing else. strtoll and strtod alone would take " 12", "+12", "12abc"
 * (with the end unchecked) and, strtod, hexadecimal ("0x10" read as 16),
 * "inf" and "nan"; one flag taking what another refuses is a surprise a user
 * meets only by accident. Pure and dependency-free beyond the C library:
 * ddpc links this file as it links suggest.c, the runtime carries it in
 * libddprt.
 */
#ifndef DDPRT_NUMBERS_H
#define DDPRT_NUMBERS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest seed, in .net's `seed` and the program's --seed alike: a seed
 * is any uint64 (the hashes that draw masks, crops and orders take 64 bits). */
#define DDP_SEED_MAX UINT64_MAX

/* The largest seed a run of EPOCHS shuffled epochs may have: DistributedSampler
 * shuffles epoch E by seed + E, which PyTorch's manual_seed refuses past
 * 2^64 - 1 (and the sampler here would wrap to seed 0's order). ddpc holds
 * a .net's seed to it for the net's epochs; the program, for the epochs it
 * will reach. */
static inline uint64_t ddp_seed_most(int64_t epochs)
{
    return DDP_SEED_MAX - (uint64_t)(epochs > 1 ? epochs - 1 : 0);
}

/* S as a decimal int64: an optional '-', digits, nothing else; false when
 * not, or beyond int64. */
bool ddp_parse_int(const char *s, int64_t *out);

/* S as a decimal uint64: digits and nothing else (no sign); false when not,
 * or beyond uint64. */
bool ddp_parse_u64(const char *s, uint64_t *out);

/* S as a finite decimal real: an optional '-', digits with an optional '.'
 * and exponent, nothing else (no hexadecimal, inf or nan); false when not,
 * or beyond a double's normal range, where strtod says ERANGE (1e400; 1e-310
 * and below, which no flag means: its floats could not hold them). */
bool ddp_parse_real(const char *s, double *out);

#ifdef __cplusplus
}
#endif

#endif
