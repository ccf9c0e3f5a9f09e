/*
 * dataset.h: a labelled image data set held in memory, whatever files it came
 * from (data_load.h reads them), and what the trainer does with one.
 */
#ifndef DDPRT_DATASET_H
#define DDPRT_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "image_decode.h"  // DdpImageFit
#include "status.h"        // DdpStatus

/* The largest label a data set may hold (so that its classes, one more,
 * are an int). */
#define DDP_DATA_MOST_LABEL (INT32_MAX - 1)

/* Where the data comes from when the user gives no --data. */
#define DDP_DATA_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

typedef struct {
    int64_t n;                 /* samples */
    int channels, rows, cols;  /* a sample's bytes: channels x rows x cols */
    int num_classes;           /* largest label + 1 */
    uint8_t *pixels;           /* n samples, each channel-major (C x H x W) */
    float *values;             /* or, for float data (NumPy float32), the samples' floats, used as they are */
    char **files;              /* or, for an image folder, the n files, decoded when gathered (fit says how) */
    DdpImageFit fit;
    int32_t *labels;           /* n, each 0 or more: as the batch holds them */
    char *images_path;         /* the files read, for messages */
    char *labels_path;
    const char *format;        /* "IDX", "CIFAR-10", "CIFAR-100, fine labels": for the first line and the log */
    /* An image folder's classes by name, class k train's k-th folder (val's
     * set has train's too), for --eval-only's table; NULL where the files
     * name none (n_class_names 0). */
    char **class_names;
    int64_t n_class_names;
} DdpDataSet;

/* How to read the files (the flags that choose). */
typedef struct {
    int coarse_labels;  /* CIFAR-100: the 20 superclasses instead of the 100 classes */
    int channels_first; /* NumPy: images N x C x H x W, */
    int channels_last;  /* or N x H x W x C (neither: as the shape tells) */
    DdpImageFit fit;    /* image files: how one becomes a sample (the net's input and data { }) */
} DdpDataOptions;

/* Values of one sample: channels x rows x cols (bytes, or floats for float data). */
static inline int64_t ddp_data_sample_values(const DdpDataSet *set)
{
    return (int64_t)set->channels * set->rows * set->cols;
}

/* DDP_BAD_INPUT, naming the labels file and the first offending sample, when a
 * label does not fit a net with NUM_CLASSES outputs. */
DdpStatus ddp_data_check_classes(const DdpDataSet *set, int num_classes);

/* Bytes of one sample as SET holds it: a byte per value, or a float for
 * float data. */
static inline size_t ddp_data_raw_bytes(const DdpDataSet *set)
{
    return (size_t)ddp_data_sample_values(set) * (set->values ? sizeof(float) : 1);
}

/* Copies samples INDICES[0..n) into SAMPLES as the set holds them (bytes,
 * or floats; ddp_data_raw_bytes each), image files decoded, and their
 * labels into LABELS: what is copied to the device where the device makes
 * the net's input of them (augment_device.h: a GPU build's default). */
DdpStatus ddp_data_gather_raw(const DdpDataSet *set, const int64_t *indices, int n, void *samples, int32_t *labels);

/* Copies samples INDICES[0..n) into IMAGES (n samples of channels x rows x
 * cols floats: pixel / 255 as torchvision's ToTensor computes it, or the
 * float data as they are) and LABELS (n), decoding image files on the way
 * (DDP_BAD_INPUT naming a file that does not decode). An index out of range
 * is an internal error (DDP_FAIL). */
DdpStatus ddp_data_gather(const DdpDataSet *set, const int64_t *indices, int n, float *images, int32_t *labels);

/* A digest of SET for comparing ranks' data: its sizes and up to 1024
 * samples (pixels and label; an image folder's file names below the folder
 * and labels) spread evenly over it, the first and the last among them. Cheap (a few megabytes read from memory at most), and enough to
 * tell another data set, a shorter cut of the same one or another order
 * apart; two sets differing only in samples it skips are not told apart. */
uint64_t ddp_data_digest(const DdpDataSet *set);

void ddp_data_free(DdpDataSet *set);

/* ---- for the readers (idx.c, cifar.c, npy.c) ------------------------------------- */

/* DIR, then SUB ("" or "/raw"), then "/NAME" unless NAME is "", with DIR's
 * trailing slashes dropped; NULL when out of memory. */
char *ddp_data_path(const char *dir, const char *sub, const char *name);

/* Nonzero when PATH is a regular file (or a link to one). */
int ddp_data_is_file(const char *path);

/* Why a data file expected at PATH was not taken, when something else is
 * there, for the message that says it is not found: "; PATH is a
 * directory, not a file" (an archive unpacked into a folder of the file's
 * name, as some of MNIST's are), or "; PATH is not a regular file"; ""
 * when nothing is there. Into NOTE, LEN bytes. */
void ddp_data_not_a_file(const char *path, char *note, size_t len);

/* Reads the regular file PATH whole into *BYTES (*LEN bytes; free it),
 * refusing one over MAX bytes by its size, before reading (a device, a
 * huge sparse file), as more than this loader takes from WHAT ("one CIFAR
 * file"). DDP_BAD_INPUT naming PATH; *BYTES is then NULL. */
DdpStatus ddp_data_read_file(const char *path, uint64_t max, const char *what, uint8_t **bytes, size_t *len);

#endif
