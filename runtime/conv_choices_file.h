/*
 * conv_choices_file.h: cuDNN's algorithms for a net's convs kept in a file of
 * their own (--conv-algorithms FILE), as one line of conv_choices.h's text.
 *
 * cuDNN's timings choose faster algorithms than its heuristics on some nets,
 * but two processes that each time them may choose otherwise and sum in
 * another order. A file lets the timing happen once: the run that finds no
 * FILE times them and writes what it runs there, and every later run given
 * FILE takes them (trainer.c), so all of them run the same fast algorithms
 * and make the same bytes, as runs that take the heuristics' do. This file
 * only reads and writes the line; what the record means is conv_choices.h's.
 */
#ifndef DDPRT_CONV_CHOICES_FILE_H
#define DDPRT_CONV_CHOICES_FILE_H

#include <stddef.h>

#include "status.h"  // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the record in PATH into TEXT (LEN bytes). *FOUND is 0 where there is
 * none yet, PATH naming nothing or an empty file: TEXT is then "" and PATH
 * must be writable (ddp_output_check), so that a mistyped directory fails at
 * start-up rather than after the timing. Otherwise PATH must be a regular
 * file holding one record as ddp_conv_choices_parse reads it (a newline after
 * it allowed). DDP_BAD_INPUT else, the message starting "--FLAG PATH: ". */
DdpStatus ddp_conv_choices_read_file(const char *flag, const char *path, char *text, size_t len, int *found);

/* Writes TEXT and a newline to PATH, by a temporary file renamed over it
 * (dirs.h), so a reader finds the old record or the new, never half of one. */
DdpStatus ddp_conv_choices_write_file(const char *flag, const char *path, const char *text);

#ifdef __cplusplus
}
#endif

#endif
