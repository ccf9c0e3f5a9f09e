/*
 * trainer_harness.h: what the end-to-end tests of the trainer share: small
 * IDX data sets written on the spot, ddp_main run in a forked child (so its
 * exit status and output can be checked and a crash cannot take the runner
 * down), and comparisons of the weights files it writes.
 */
#ifndef TRAINER_HARNESS_H
#define TRAINER_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>  // pid_t

#include "trainer.h"  // DdpNet, ddp_main

/* Writes LEN bytes to PATH (a failure ends the test). */
void harness_write_file(const char *path, const void *bytes, size_t len);

/* One IDX pair in DIR, PREFIX-images-idx3-ubyte and PREFIX-labels-idx1-ubyte:
 * N images of ROWS x COLS whose label is i % 10, each noise plus bright rows
 * where (row / 2) % 10 is the label: learnable by a linear model, not trivially. */
void harness_write_set(const char *dir, const char *prefix, int n, int rows, int cols, uint32_t seed);

/* Runs ddp_main(NET) as `tiny_train ARGS...` (ARGS, from FMT, split at
 * spaces) in a child; returns its exit status (-1 if it died) and, in *OUT
 * when OUT is not NULL, everything it wrote to stdout and stderr (malloc'd). */
int harness_run(const DdpNet *net, char **out, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* harness_run's start: the child's pid, and in *FD the read end of its
 * output, for test_child_output (testutil.h) once the test is done with it. */
pid_t harness_start(const DdpNet *net, int *fd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* 1 when TEXT holds WHAT; says on stderr what it got otherwise. */
int harness_has(const char *text, const char *what);

/* 1 when the safetensors files A and B hold the same tensors, bit for bit. */
int harness_same_tensors(const char *a, const char *b);

#endif
