/*
 * idx.h: MNIST-format (IDX) data sets, as torchvision's MNIST and
 * FashionMNIST read them.
 */
#ifndef DDPRT_IDX_H
#define DDPRT_IDX_H

#include <stdint.h>

#include "status.h"  // DdpStatus

/* Where the data comes from when the user gives no --data. */
#define DDP_IDX_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

typedef struct {
    int64_t n;            /* samples */
    int rows, cols;       /* pixels per image: rows x cols, one channel */
    int num_classes;      /* largest label + 1 */
    uint8_t *pixels;      /* n * rows * cols, row-major, as in the file */
    uint8_t *labels;      /* n */
    char *images_path;    /* the files read, for messages */
    char *labels_path;
} DdpIdxSet;

/* Loads the training set (TRAIN != 0: train-images-idx3-ubyte, train-labels-
 * idx1-ubyte) or the test set (t10k-...), each raw or gzipped, from DIR, DIR/raw,
 * DIR/MNIST/raw or DIR/FashionMNIST/raw; DIR NULL means DDP_IDX_DEFAULT_DIR.
 * DDP_BAD_INPUT, naming the file and the fault, for missing or malformed
 * files; OUT is then empty (safe to ddp_idx_free). */
DdpStatus ddp_idx_load(const char *dir, int train, DdpIdxSet *out);

/* DDP_BAD_INPUT, naming the labels file and the first offending sample, when a
 * label does not fit a net with NUM_CLASSES outputs. */
DdpStatus ddp_idx_check_classes(const DdpIdxSet *set, int num_classes);

/* Copies samples INDICES[0..n) into IMAGES (n x rows x cols floats in [0,1],
 * pixel / 255 as torchvision's ToTensor computes it) and LABELS (n).
 * An index out of range is an internal error (DDP_FAIL). */
DdpStatus ddp_idx_gather(const DdpIdxSet *set, const int64_t *indices, int n,
                         float *images, int32_t *labels);

/* A digest of SET for comparing ranks' data: its sizes and up to 1024
 * samples (pixels and label) spread evenly over it, the first and the last
 * among them. Cheap (under a megabyte read from memory), and enough to tell
 * another data set, a shorter cut of the same one or another order apart;
 * two sets differing only in samples it skips are not told apart. */
uint64_t ddp_idx_digest(const DdpIdxSet *set);

void ddp_idx_free(DdpIdxSet *set);

#endif
