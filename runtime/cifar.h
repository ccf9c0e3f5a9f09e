/*
 * cifar.h: CIFAR-10 and CIFAR-100 in their binary form (the "binary version"
 * of https://www.cs.toronto.edu/~kriz/cifar.html), into a DdpDataSet.
 *
 * Each file is a run of records: CIFAR-10's a label byte (0..9) then 3072
 * pixel bytes, CIFAR-100's a coarse label (0..19), a fine one (0..99), then
 * 3072 pixel bytes; the pixels are 32x32 red, then green, then blue, as
 * torchvision's CIFAR10 holds them before its transpose to HWC, which is the
 * C x H x W a net's `input 3x32x32` reads.
 */
#ifndef DDPRT_CIFAR_H
#define DDPRT_CIFAR_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"  // DdpDataSet
#include "status.h"   // DdpStatus

enum { DDP_CIFAR_SIDE = 32, DDP_CIFAR_CHANNELS = 3, DDP_CIFAR_PIXELS = 3 * 32 * 32 };

/* Where a directory's CIFAR files are. */
typedef struct {
    char *dir;   /* the directory holding them */
    int hundred; /* CIFAR-100 (train.bin, test.bin); else CIFAR-10 (data_batch_K.bin, test_batch.bin) */
} DdpCifarFiles;

/* Nonzero when DIR, or DIR/cifar-10-batches-bin or DIR/cifar-100-binary
 * (the archives' own folders), holds CIFAR-10's data_batch_1.bin or
 * CIFAR-100's train.bin; FILES then says where and which (free its dir).
 * NOTE (LEN bytes) gets ddp_data_not_a_file's note on the first of those
 * names, looked at before the one found, that something other than a file
 * takes, for the message that no CIFAR set is found; "" where none does. */
int ddp_cifar_find(const char *dir, DdpCifarFiles *files, char *note, size_t len);

/* Loads the training set (TRAIN != 0: data_batch_1.bin, data_batch_2.bin...
 * as far as they go, or train.bin) or the test set (test_batch.bin or
 * test.bin) of FILES, whose dir it frees; CIFAR-100 with its fine labels,
 * or its coarse ones when COARSE. DDP_BAD_INPUT, naming the file and the
 * fault, for a missing file, one that is not whole records, or a label
 * outside the classes; OUT is then empty. */
DdpStatus ddp_cifar_load(DdpCifarFiles *files, int train, int coarse, DdpDataSet *out);

/* Appends the records of BYTES[0..len), the contents of the file PATH, to
 * SET (whose channels, rows and cols it sets): CIFAR-100's when HUNDRED,
 * keeping the coarse labels when COARSE. DDP_BAD_INPUT as above; SET keeps
 * what it held before (safe to ddp_data_free). */
DdpStatus ddp_cifar_parse(const uint8_t *bytes, size_t len, int hundred, int coarse, const char *path,
                          DdpDataSet *set);

#endif
