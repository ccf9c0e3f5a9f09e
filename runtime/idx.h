/*
 * idx.h: MNIST-format (IDX) data sets, as torchvision's MNIST and
 * FashionMNIST read them, into a DdpDataSet (dataset.h).
 */
#ifndef DDPRT_IDX_H
#define DDPRT_IDX_H

#include "dataset.h"  // DdpDataSet
#include "status.h"   // DdpStatus

/* Loads the training set (TRAIN != 0: train-images-idx3-ubyte, train-labels-
 * idx1-ubyte) or the test set (t10k-...), each raw or gzipped, from DIR, DIR/raw,
 * DIR/MNIST/raw or DIR/FashionMNIST/raw; DIR NULL means DDP_DATA_DEFAULT_DIR.
 * The images file has 3 dimensions (N x H x W, one channel) or 4 (N x C x H x
 * W), whatever its name says. DDP_BAD_INPUT, naming the file and the fault,
 * for missing or malformed files; OUT is then empty (safe to ddp_data_free).
 * ELSEWHERE ends the message that no images file is found: why DIR holds no
 * other format either, where a name of one is taken by a folder ("" if none). */
DdpStatus ddp_idx_load(const char *dir, int train, const char *elsewhere, DdpDataSet *out);

/* The images of the one file PATH (raw or gzipped; N x H x W or N x C x H x
 * W) into OUT, without labels. DDP_BAD_INPUT, naming the file and the
 * fault; OUT is then empty. */
DdpStatus ddp_idx_images(const char *path, DdpDataSet *out);

#endif
