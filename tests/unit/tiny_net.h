/*
 * tiny_net.h: a DdpNet written by hand, for testing the runtime without ddpc:
 * input 784 (or 1x28x28) -> linear C -> softmax cross-entropy, SGD as PyTorch
 * writes it, in plain C loops on the CPU.
 *
 * It also carries three buffers in the shape of a batchnorm's (norm.running_mean,
 * norm.running_var: running statistics of the logits, and norm.num_batches_tracked),
 * which the forward pass does not use, so that the buffer, ones/zeros and
 * step-count paths of --init and --export are exercised.
 */
#ifndef TINY_NET_H
#define TINY_NET_H

#include "model.h"  // DdpNet, DdpTrainConfig

enum { TINY_NET_MAX_CLASSES = 16 };

/* Its train { } block: batch 20, 3 epochs, sgd lr 0.1 momentum 0.9
 * weight_decay 1e-4, constant schedule, seed 7. */
DdpTrainConfig tiny_net_train(void);

/* The net, with TRAIN as its train { } block: the optimizer reads momentum,
 * dampening, weight decay and nesterov from it, as generated code has them
 * written in. SAMPLE_RANK 1: input 784; 3: input 1x28x28. NUM_CLASSES from 1
 * to TINY_NET_MAX_CLASSES. The net lives in static storage: one at a time. */
const DdpNet *tiny_net(const DdpTrainConfig *train, int sample_rank, int num_classes);

#endif
