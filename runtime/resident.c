/*
 * resident.c: whether the training set is held on the device, and the set
 * made there and gathered from (resident.h), through device.h and
 * resident_gather.h: the same for both builds.
 */
#include "resident.h"
#include "device.h"           // ddp_device_alloc, ddp_copy_to_device, ddp_device_sync
#include "resident_gather.h"  // struct DdpResidentSet, ddp_resident_gather_units

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t ddp_resident_bytes(const DdpDataSet *set)
{
    if (set->files || set->n <= 0)
        return 0;
    return (size_t)set->n * (ddp_data_raw_bytes(set) + sizeof *set->labels + sizeof(int64_t));
}

DdpStatus ddp_resident_choose(const char *asked, int on_gpu, int input_on_device, const DdpDataSet *set,
                              size_t available, int *resident, char *why, size_t why_len)
{
    const double mib = 1024.0 * 1024.0;
    size_t bytes = ddp_resident_bytes(set);
    *resident = 0;
    snprintf(why, why_len, "%s", "");
    if (asked && asked[0] && strcmp(asked, "0") != 0 && strcmp(asked, "1") != 0)
        return DDP_ERR(DDP_BAD_INPUT, "%s=%s: say 1 (hold the training set on the device) or 0 (copy each batch "
                       "from the host)", DDP_DATA_RESIDENT_ENV, asked);
    int forced = asked && strcmp(asked, "1") == 0;
    const char *cannot = !bytes             ? "its samples are image files, decoded as each batch is made"
                         : !input_on_device ? "the net's input is made on the host (DDP_AUGMENT_ON=device "
                                              "makes it on the device)"
                         : available && bytes > available ? "it is larger than the device's free memory (less "
                                                            "what its libraries may take)"
                                                          : NULL;
    if (forced && cannot)
        return DDP_ERR(DDP_BAD_INPUT, "%s=1: the training set cannot be held on the device: %s",
                       DDP_DATA_RESIDENT_ENV, cannot);
    if (asked && asked[0]) {
        *resident = forced;
        snprintf(why, why_len, "%s=%s", DDP_DATA_RESIDENT_ENV, asked);
        return DDP_OK;
    }
    /* unset: a GPU's, when a quarter of its free memory holds it */
    if (!on_gpu || cannot)
        return DDP_OK;
    if (!available) {
        snprintf(why, why_len, "the device's free memory unknown");
        return DDP_OK;
    }
    *resident = bytes <= available / 4;
    snprintf(why, why_len, "%.1f MiB %s a quarter of the %.1f MiB free", (double)bytes / mib,
             *resident ? "within" : "more than", (double)available / mib);
    return DDP_OK;
}

DdpStatus ddp_resident_create(DdpResidentSet **out, const DdpDataSet *set, void *stream)
{
    *out = NULL;
    size_t sample_bytes = ddp_data_raw_bytes(set), n = (size_t)set->n;
    if (!ddp_resident_bytes(set))
        return DDP_ERR(DDP_FAIL, "internal error: a data set of image files made resident");
    DdpResidentSet *r = calloc(1, sizeof *r);
    if (!r)
        return DDP_ERR(DDP_FAIL, "out of memory");
    *out = r; /* freed by the caller's ddp_resident_destroy on failure too */
    r->sample_bytes = sample_bytes;
    /* ddp_device_alloc's alignment holds the 4-byte units */
    DDP_CHECK(ddp_device_alloc((void **)&r->samples, n * sample_bytes));
    DDP_CHECK(ddp_device_alloc((void **)&r->labels, n * sizeof *r->labels));
    const void *from = set->values ? (const void *)set->values : (const void *)set->pixels;
    DDP_CHECK(ddp_copy_to_device(r->samples, from, n * sample_bytes, stream));
    DDP_CHECK(ddp_copy_to_device(r->labels, set->labels, n * sizeof *r->labels, stream));
    return ddp_device_sync(stream); /* the set's memory may change after this returns */
}

void ddp_resident_destroy(DdpResidentSet *r)
{
    if (!r)
        return;
    ddp_device_free(r->samples);
    ddp_device_free(r->labels);
    free(r);
}

DdpStatus ddp_resident_gather(const DdpResidentSet *r, const int64_t *ids, int n, const DdpBatchLayout *layout,
                              void *batch, void *stream)
{
    if (layout->raw_sample != r->sample_bytes)
        return DDP_ERR(DDP_FAIL, "internal error: a batch laid out for raw samples of %zu bytes, of a resident set "
                       "whose samples are %zu", layout->raw_sample, r->sample_bytes);
    if (n <= 0)
        return DDP_OK;
    char *b = batch;
    return ddp_resident_gather_units(r, ids, n, b + layout->raw, (int64_t *)(b + layout->ids),
                                     (int32_t *)(b + layout->labels), stream);
}
