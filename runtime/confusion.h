/*
 * confusion.h: what --eval-only reports of a test set: how many samples of
 * each class were taken for each class (the confusion matrix), and from it
 * each class's accuracy and the class it is most often taken for.
 *
 * A prediction is the first largest score, as the loss kernel counts a
 * correct one (the generated loss_forward_backward), so the accuracy here is
 * the one training reports for the same samples.
 */
#ifndef DDPRT_CONFUSION_H
#define DDPRT_CONFUSION_H

#include <stdint.h>
#include <stdio.h>

#include "status.h"  // DdpStatus

typedef struct {
    int classes;
    /* classes x classes, [label][prediction]; doubles, so that the ranks'
     * matrices are summed as the run's statistics are (ddp_dist_sum_stats) */
    double *counts;
} DdpConfusion;

DdpStatus ddp_confusion_init(DdpConfusion *c, int classes);
void ddp_confusion_free(DdpConfusion *c);

/* Counts N samples: SCORES their rows of c->classes (any scores: logits,
 * log-probabilities), LABELS their classes. */
void ddp_confusion_add(DdpConfusion *c, const float *scores, const int32_t *labels, int64_t n);

/* Samples counted, and the share predicted right (NaN for none). */
int64_t ddp_confusion_total(const DdpConfusion *c);
double ddp_confusion_accuracy(const DdpConfusion *c);

/* One line per class: its samples, those right, its accuracy and the class
 * it is most often wrongly taken for (with how often). Classes are shown by
 * number, and those of the N_NAMES of NAMES (NULL: none) by name too
 * ("3 cat"), as an image folder's data names them. */
void ddp_confusion_print(const DdpConfusion *c, char *const *names, int64_t n_names, FILE *out);

/* The matrix as JSON rows, [[..], ..], for the log: a string to free, or
 * NULL when memory runs out. */
char *ddp_confusion_json(const DdpConfusion *c);

#endif
