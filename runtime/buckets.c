/*
 * buckets.c: PyTorch DDP's bucket assignment (see buckets.h).
 *
 * One pass, no allocation, no dependency beyond <stdint.h>: ddpc links this
 * file for --emit plan and the bucket table it writes, the runtime for the
 * reducer, so both always agree on where a bucket starts and ends.
 */
#include "buckets.h"

int ddp_buckets_plan(const int64_t *sizes, int n, int64_t cap_bytes, int64_t first_cap_bytes, DdpBucket *out)
{
    int n_buckets = 0;
    int open = 0;                    /* out[n_buckets - 1] still takes parameters */
    int64_t end = 0;                 /* of the parameters laid out so far */
    int64_t elements = 0;            /* the open bucket's parameters' */
    int64_t limit = first_cap_bytes; /* the cap of the open bucket */
    for (int i = 0; i < n; i++) {
        int64_t start = ddp_param_start(end);
        if (!open) {
            out[n_buckets++] = (DdpBucket){.offset = start, .count = 0, .first = i, .n_params = 0};
            open = 1;
            elements = 0;
        }
        DdpBucket *b = &out[n_buckets - 1];
        end = start + sizes[i];
        b->count = end - b->offset;
        b->n_params++;
        elements += sizes[i];
        /* DDP: `if (bucket.size >= bucket_size_limit)` closes the bucket and
         * moves on to the next limit, which stays at the last one. */
        if (elements * DDP_BUCKET_ELEM_BYTES >= limit) {
            open = 0;
            limit = cap_bytes;
        }
    }
    return n_buckets;
}
