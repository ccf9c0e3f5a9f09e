/*
 * top_classes.h: what --predict prints of one input: its likeliest classes,
 * each with its probability, the softmax of the scores the loss reads (for a
 * net ending in log_softmax, its probabilities themselves).
 *
 * The order is the scores' own, largest first and, among equal scores, the
 * lower class first: the first largest is the prediction the loss kernel
 * and --eval-only count (confusion.h).
 */
#ifndef DDPRT_TOP_CLASSES_H
#define DDPRT_TOP_CLASSES_H

#include <stdint.h>
#include <stdio.h>

/* The most bytes a line of ddp_top_classes_print takes, newline included:
 * the JSON form of 256 classes, each ", %d" (up to 12 bytes) and ", %.6g"
 * (up to 14), after the input's number, with room to spare. */
#define DDP_TOP_CLASSES_LINE_MAX (96 + 256 * 32)

/* Writes the TOP likeliest of CLASSES classes of input INPUT from its
 * SCORES: "input 0: 9 0.9731, 7 0.0152" or, with JSON, {"input": 0,
 * "classes": [9, 7], "probabilities": [0.9731, 0.0152]} on one line. WORK
 * holds CLASSES doubles. TOP is at most 256 (--top's limit). */
void ddp_top_classes_print(FILE *out, int64_t input, const float *scores, int classes, int top, int json,
                           double *work);

#endif
