/*
 * resident.c: whether the training set is held on the device (resident.h),
 * the same rule for both builds.
 */
#include "resident.h"

#include <stdio.h>
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
