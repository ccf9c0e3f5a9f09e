/*
 * image_folder.h: a directory of images per class, torchvision's
 * ImageFolder layout, as a data set:
 *
 *   DIR/train/CLASS/... *.png *.jpg *.jpeg    the training set
 *   DIR/val/CLASS/...                         the test set
 *
 * The classes are train's folders (links to folders count) in Python's
 * sorted order (python_order.h), class k the k-th, as ImageFolder numbers
 * them; a class's images are every
 * .png, .jpg and .jpeg below its folder, in any case, subfolders included,
 * in the order ImageFolder takes them (sorted by folder, then by name).
 * Files of other kinds are left out, as ImageFolder leaves them, except
 * images ImageFolder would read but this loader does not (.bmp, .ppm,
 * .pgm, .tif, .tiff, .webp), which are refused by name, since
 * leaving them out would make another data set than PyTorch's. val is
 * labelled with train's classes, so a class missing from val shifts no
 * label (ImageFolder would number val's own folders); a val folder that is
 * no class of train is refused.
 *
 * Loading reads each file's header, so that a file that is no image, is
 * malformed or cannot fit the net's input is refused before training; the
 * pixels are decoded when a batch needs them (image_decode.h), on the
 * loader's threads.
 */
#ifndef DDPRT_IMAGE_FOLDER_H
#define DDPRT_IMAGE_FOLDER_H

#include "dataset.h"       // DdpDataSet
#include "image_decode.h"  // DdpImageFit
#include "status.h"        // DdpStatus

/* Nonzero when DIR holds a folder train/ (an image folder, then). */
int ddp_image_folder_find(const char *dir);

/* Loads DIR/train (TRAIN != 0) or DIR/val as samples FIT makes. DDP_BAD_INPUT,
 * naming the folder or file and the fault: no class folders, more than
 * DDP_DATA_MOST_LABEL + 1 of them, a class without images, a val class that
 * train lacks, a file of a kind not read, a file that is no image or does not
 * fit. OUT is then empty. */
DdpStatus ddp_image_folder_load(const char *dir, int train, const DdpImageFit *fit, DdpDataSet *out);

/* The one image file PATH as a data set of one sample (--predict), label 0. */
DdpStatus ddp_image_file_load(const char *path, const DdpImageFit *fit, DdpDataSet *out);

#endif
