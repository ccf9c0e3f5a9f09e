/*
 * augment_device_cpu.c: augment_device.h on a CPU build, whose device is the
 * host: ddp_augment_element over the batch on the step's threads.
 */
#include "augment_device.h"

#include <stdlib.h>

struct DdpAugmentDevice {
    const DdpDataConfig *d;
    float *mean, *std; /* the block's, rounded to float: one allocation, std after mean */
    int c, h, w, raw_floats;
};

DdpStatus ddp_augment_device_create(DdpAugmentDevice **out, const DdpDataConfig *d, int c, int h, int w,
                                    int raw_floats, void *stream)
{
    (void)stream;
    DdpAugmentDevice *a = calloc(1, sizeof *a);
    if (a)
        a->mean = calloc(2 * (size_t)d->channels + 1, sizeof *a->mean);
    if (!a || !a->mean) {
        ddp_augment_device_destroy(a);
        *out = NULL;
        return DDP_ERR(DDP_FAIL, "out of memory: the data { } block's table");
    }
    ddp_augment_float_table(d, a->mean);
    a->std = a->mean + d->channels;
    a->d = d;
    a->c = c, a->h = h, a->w = w, a->raw_floats = raw_floats;
    *out = a;
    return DDP_OK;
}

void ddp_augment_device_destroy(DdpAugmentDevice *a)
{
    if (!a)
        return;
    free(a->mean);
    free(a);
}

DdpStatus ddp_augment_on_device(const DdpAugmentDevice *a, uint64_t seed, int64_t epoch, const int64_t *ids, int n,
                                const void *raw, float *x, void *stream)
{
    (void)stream;
    int64_t total = (int64_t)n * a->c * a->h * a->w;
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < total; e++)
        x[e] = ddp_augment_element(a->d, a->mean, a->std, seed, epoch, ids, raw, a->raw_floats, a->c, a->h, a->w,
                                   (size_t)e);
    return DDP_OK;
}
