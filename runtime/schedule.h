/*
 * schedule.h: the learning rate of each optimizer step, from the net's
 * `schedule` (train { }), as PyTorch's schedulers would set it.
 */
#ifndef DDPRT_SCHEDULE_H
#define DDPRT_SCHEDULE_H

#include <stdint.h>

#include "model.h"  // DdpTrainConfig, DdpSchedule

/* The learning rate of the optimizer step that follows STEP steps (0-based,
 * global, counted from the start of training), in EPOCH (0-based), for a run
 * of CFG->epochs epochs of STEPS_PER_EPOCH steps:
 *   constant  lr
 *   step      lr * gamma^floor(epoch / step_every)        (StepLR, stepped per epoch)
 *   cosine    lr * (step + 1) / warmup  while step < warmup,
 *             then lr * (1 + cos(pi * (step - warmup) / max(1, T - warmup))) / 2
 *             with T = epochs * steps_per_epoch            (LambdaLR, stepped per step)
 */
double ddp_schedule_lr(const DdpTrainConfig *cfg, int64_t step, int64_t epoch, int64_t steps_per_epoch);

/* "cosine", "step", "constant": for messages and logs. */
const char *ddp_schedule_name(DdpSchedule schedule);

#endif
