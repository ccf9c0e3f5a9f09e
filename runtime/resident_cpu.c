/*
 * resident_cpu.c: resident.h on a CPU build, whose device memory is the
 * host's: the set copied once, each batch gathered on the step's threads.
 */
#include "resident.h"
#include "resident_gather.h"  // ddp_resident_unit, ddp_resident_source: the GPU's items

#include <stdlib.h>
#include <string.h>

struct DdpResidentSet {
    unsigned char *samples; /* n samples of sample_bytes each */
    int32_t *labels;
    size_t sample_bytes;
};

DdpStatus ddp_resident_create(DdpResidentSet **out, const DdpDataSet *set, void *stream)
{
    (void)stream;
    *out = NULL;
    size_t sample_bytes = ddp_data_raw_bytes(set), n = (size_t)set->n;
    if (!ddp_resident_bytes(set))
        return DDP_ERR(DDP_FAIL, "internal error: a data set of image files made resident");
    DdpResidentSet *r = calloc(1, sizeof *r);
    if (r) { /* malloc's alignment holds the 4-byte units */
        r->samples = malloc(n * sample_bytes + 1);
        r->labels = malloc(n * sizeof *r->labels + 1);
    }
    if (!r || !r->samples || !r->labels) {
        ddp_resident_destroy(r);
        return DDP_ERR(DDP_FAIL, "out of memory: the training set held resident");
    }
    memcpy(r->samples, set->values ? (const void *)set->values : (const void *)set->pixels, n * sample_bytes);
    memcpy(r->labels, set->labels, n * sizeof *r->labels);
    r->sample_bytes = sample_bytes;
    *out = r;
    return DDP_OK;
}

void ddp_resident_destroy(DdpResidentSet *r)
{
    if (!r)
        return;
    free(r->samples);
    free(r->labels);
    free(r);
}

DdpStatus ddp_resident_gather(const DdpResidentSet *r, const int64_t *ids, int n, const DdpBatchLayout *layout,
                              void *batch, void *stream)
{
    (void)stream;
    if (layout->raw_sample != r->sample_bytes)
        return DDP_ERR(DDP_FAIL, "internal error: a batch laid out for raw samples of %zu bytes, of a resident set "
                       "whose samples are %zu", layout->raw_sample, r->sample_bytes);
    char *b = batch;
    int64_t *batch_ids = (int64_t *)(b + layout->ids);
    int32_t *labels = (int32_t *)(b + layout->labels);
    size_t unit = ddp_resident_unit(r->sample_bytes);
    int64_t units = (int64_t)(r->sample_bytes / unit), total = (int64_t)n * units;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < total; e++) {
        int64_t i;
        int first;
        int64_t from = ddp_resident_source(ids, units, e, &i, &first);
        if (unit == 4)
            ((uint32_t *)(b + layout->raw))[e] = ((const uint32_t *)r->samples)[from];
        else
            ((unsigned char *)(b + layout->raw))[e] = r->samples[from];
        if (first) {
            batch_ids[i] = ids[i];
            labels[i] = r->labels[ids[i]];
        }
    }
    return DDP_OK;
}
