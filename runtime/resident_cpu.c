/*
 * resident_cpu.c: resident_gather.h's gather on a CPU build, whose device
 * memory is the host's: the items on the step's threads.
 */
#include "resident_gather.h"

DdpStatus ddp_resident_gather_units(const DdpResidentSet *r, const int64_t *ids, int n, void *raw,
                                    int64_t *batch_ids, int32_t *labels, void *stream)
{
    (void)stream;
    size_t unit = ddp_resident_unit(r->sample_bytes);
    int64_t units = (int64_t)(r->sample_bytes / unit), total = (int64_t)n * units;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < total; e++) {
        int64_t i;
        int first;
        int64_t from = ddp_resident_source(ids, units, e, &i, &first);
        if (unit == 4)
            ((uint32_t *)raw)[e] = ((const uint32_t *)r->samples)[from];
        else
            ((unsigned char *)raw)[e] = r->samples[from];
        if (first) {
            batch_ids[i] = ids[i];
            labels[i] = r->labels[ids[i]];
        }
    }
    return DDP_OK;
}
