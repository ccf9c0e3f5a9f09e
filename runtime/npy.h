/*
 * npy.h: NumPy arrays (.npy, format versions 1 to 3) as a data set, into a
 * DdpDataSet: DIR/x_train.npy with DIR/y_train.npy, and DIR/x_test.npy with
 * DIR/y_test.npy (the names of Keras's data sets, as np.save writes them).
 *
 * Images are uint8 (scaled to [0,1] as ToTensor does) or float32 (used as
 * they are), N x H x W (one channel), N x C x H x W or N x H x W x C; labels
 * any integer type, N of them, each 0 to DDP_DATA_MOST_LABEL.
 */
#ifndef DDPRT_NPY_H
#define DDPRT_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"  // DdpDataSet, DdpDataOptions
#include "status.h"   // DdpStatus

/* The most one file may hold: far above any data set's arrays in memory. */
#define DDP_NPY_MAX_BYTES ((uint64_t)16 << 30)

/* Nonzero when DIR holds x_train.npy. Else NOTE (LEN bytes) gets
 * ddp_data_not_a_file's note on DIR/x_train.npy, for the message that no
 * data set is found: "" unless something else has that name. */
int ddp_npy_find(const char *dir, char *note, size_t len);

/* Loads the training set (TRAIN != 0: x_train.npy, y_train.npy) or the
 * test set (x_test.npy, y_test.npy) of DIR; a 4-dimensional images array's
 * layout as OPTIONS say, or as its shape tells (see ddp_npy_images).
 * DDP_BAD_INPUT, naming the file and the fault; OUT is then empty. */
DdpStatus ddp_npy_load(const char *dir, int train, const DdpDataOptions *options, DdpDataSet *out);

/* What a .npy file's header says. */
enum { DDP_NPY_MAX_DIMS = 8 };
typedef struct {
    char kind;       /* 'u' unsigned, 'i' signed, 'f' floating point, 'b' bool... as its descr says */
    int item_bytes;
    int dims;
    uint64_t shape[DDP_NPY_MAX_DIMS];
    uint64_t count;  /* the product of the shape */
    size_t data_at;  /* where the data start */
} DdpNpyHeader;

/* Reads the header of BYTES[0..len), the file PATH, and checks that the
 * data it announces are all the file holds: little-endian (or one-byte)
 * items in C order. */
DdpStatus ddp_npy_header(const uint8_t *bytes, size_t len, const char *path, DdpNpyHeader *h);

/* The images of the file PATH (BYTES[0..len)) into SET's pixels (uint8) or
 * values (float32), channels first. A 4-dimensional array is N x C x H x W
 * when LAYOUT says 'f' (first), N x H x W x C when it says 'l' (last), and
 * when it is 0 whichever the shape allows: channels are 1, 3 or 4, so a
 * shape with such a count in second place and not in last is channels first,
 * and the reverse channels last; a shape that allows both (or neither) is
 * refused, asking for --channels-first or --channels-last. */
DdpStatus ddp_npy_images(const uint8_t *bytes, size_t len, const char *path, char layout, DdpDataSet *set);

/* The labels of the file PATH into SET, which holds its images: one
 * integer (0..255) per image. */
DdpStatus ddp_npy_labels(const uint8_t *bytes, size_t len, const char *path, DdpDataSet *set);

#endif
