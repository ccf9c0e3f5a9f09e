/*
 * data_load.h: reading a --data directory, whatever its format.
 *
 * The formats, each read by a module of its own:
 *  - IDX (idx.c): MNIST's files, images of N x H x W or N x C x H x W bytes;
 *  - CIFAR-10 and CIFAR-100 in their binary form (cifar.c);
 *  - NumPy arrays, .npy (npy.c);
 *  - folders of PNG and JPEG images per class (image_folder.c).
 * ddp_data_load tells them apart by the files a directory holds, so --data
 * names a directory whatever its format, and the run's first line says which
 * it found.
 */
#ifndef DDPRT_DATA_LOAD_H
#define DDPRT_DATA_LOAD_H

#include "dataset.h"  // DdpDataSet, DdpDataOptions, DDP_DATA_DEFAULT_DIR
#include "status.h"   // DdpStatus

/* Loads the training set (TRAIN != 0) or the test set from DIR (NULL:
 * DDP_DATA_DEFAULT_DIR): CIFAR's binary files where DIR holds them (see
 * cifar.h for where they are looked for), else NumPy arrays where DIR holds
 * x_train.npy (npy.h), else an image folder where DIR holds train/
 * (image_folder.h), else IDX files (idx.h). OPTIONS' resize and center_crop
 * are refused for all but image folders.
 * DDP_BAD_INPUT, naming the file and the fault, for missing or malformed
 * files and for options that do not fit the format; OUT is then empty (safe
 * to ddp_data_free). */
DdpStatus ddp_data_load(const char *dir, int train, const DdpDataOptions *options, DdpDataSet *out);

/* The images of the one file PATH, to classify (--predict): a PNG or JPEG
 * image (told by its name: .png, .jpg, .jpeg), a NumPy array (told by its
 * magic bytes; its layout as for ddp_npy_images) or else IDX images, raw or
 * gzipped. Their labels are all 0, for the loss the forward
 * pass ends in. DDP_BAD_INPUT, naming the file and the fault (a file of
 * no images too: both readers refuse it); OUT is then empty. */
DdpStatus ddp_data_load_inputs(const char *path, const DdpDataOptions *options, DdpDataSet *out);

#endif
