/*
 * data_load.c: which reader a --data directory needs (data_load.h).
 */
#include "data_load.h"

#include <stdlib.h>
#include <string.h>

#include "cifar.h"  // ddp_cifar_find, ddp_cifar_load
#include "idx.h"    // ddp_idx_load
#include "npy.h"    // ddp_npy_find, ddp_npy_load

DdpStatus ddp_data_load(const char *dir, int train, const DdpDataOptions *options, DdpDataSet *out)
{
    memset(out, 0, sizeof *out);
    if (!dir)
        dir = DDP_DATA_DEFAULT_DIR;
    if (options->channels_first && options->channels_last)
        return DDP_ERR(DDP_BAD_INPUT, "--channels-first and --channels-last: give one");
    DdpCifarFiles cifar;
    int cifar_found = ddp_cifar_find(dir, &cifar), npy_found = !cifar_found && ddp_npy_find(dir);
    if ((options->channels_first || options->channels_last) && !npy_found) {
        free(cifar.dir);
        return DDP_ERR(DDP_BAD_INPUT, "--channels-%s says how x_train.npy holds its images, but %s holds no NumPy "
                       "files (x_train.npy)", options->channels_first ? "first" : "last", dir);
    }
    if (cifar_found)
        return ddp_cifar_load(&cifar, train, options->coarse_labels, out);
    if (options->coarse_labels)
        return DDP_ERR(DDP_BAD_INPUT, "--coarse-labels picks CIFAR-100's 20 superclasses, but %s holds no CIFAR-100 "
                       "files (train.bin and test.bin)", dir);
    if (npy_found)
        return ddp_npy_load(dir, train, options, out);
    return ddp_idx_load(dir, train, out);
}
