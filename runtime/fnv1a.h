/*
 * fnv1a.h: the 64-bit FNV-1a hash, for the digests ranks compare (the data
 * sets', dataset.c; the data { } tables', augment.c). Not a checksum against
 * tampering: two ranks that read different files or run different tables
 * get different digests with overwhelming odds, which is all they ask.
 */
#ifndef DDPRT_FNV1A_H
#define DDPRT_FNV1A_H

#include <stddef.h>
#include <stdint.h>

#define DDP_FNV1A_START 1469598103934665603ull

/* H (DDP_FNV1A_START to begin) carried over BYTES bytes of DATA. */
static inline uint64_t ddp_fnv1a(uint64_t h, const void *data, size_t bytes)
{
    const unsigned char *b = (const unsigned char *)data;
    for (size_t i = 0; i < bytes; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

#endif
