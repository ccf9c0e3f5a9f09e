/*
 * trainer.h: the generated program's whole life outside the numeric work
 * (trainer.c): flags, data, the epoch loop, evaluation, logging, weights,
 * checkpoints and the ranks.
 */
#ifndef DDPRT_TRAINER_H
#define DDPRT_TRAINER_H

#include "model.h"  // DdpNet

#ifdef __cplusplus
extern "C" {
#endif

/* The generated program's main calls this; it returns the exit status. */
int ddp_main(int argc, char **argv, const DdpNet *net);

#ifdef __cplusplus
}
#endif

#endif
