/*
 * step_scalars.h: what changes from one training step to the next besides the
 * batch, held in device memory where the generated kernels read it.
 *
 * A step's work is the same every step of a batch shape: only the learning
 * rate, the step count (SGD's first momentum step, Adam's bias corrections)
 * and the epoch (dropout's masks) move. Passed as kernel arguments they would
 * be frozen into a CUDA graph at capture, and every replay would train with
 * the captured step's rate. So the runtime writes them here before each step
 * (ddp_device_write, device.h: a kernel argument carries them, so a graph
 * replayed afterwards reads the new ones) and the kernels read them through
 * ctx->step_scalars, computing what derives from them (Adam's corrections, a
 * dropout layer's key) at the top of the kernel by the formula the host used
 * before (a GPU's pow may differ from the C library's in the last bit).
 */
#ifndef DDPRT_STEP_SCALARS_H
#define DDPRT_STEP_SCALARS_H

#include <stdint.h>

typedef struct {
    int64_t step;  /* optimizer steps taken before this one */
    int64_t epoch; /* of the batch being trained */
    float lr;      /* of this step, from the schedule */
} DdpStepScalars;

#endif
