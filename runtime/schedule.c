/*
 * schedule.c: learning-rate schedules (see schedule.h).
 *
 * Closed forms of a step's rate rather than a scheduler object that updates
 * the rate step after step, as PyTorch's do: a rate that depends only on
 * (step, epoch) is the same however the run got there, so a resumed run or
 * one started at --max-steps continues the schedule exactly, with no state to
 * checkpoint. StepLR's chained form multiplies by gamma once per boundary
 * where we raise gamma to a power; the two agree to the last bit or two of a
 * double, far below the float the step uses.
 *
 * The cosine schedule's T counts every step the epochs will take, not
 * --max-steps: like a PyTorch script whose scheduler is built from the epoch
 * count, stopping early does not compress the schedule.
 */
#include "schedule.h"

#include <math.h>

double ddp_schedule_lr(const DdpTrainConfig *cfg, int64_t step, int64_t epoch, int64_t steps_per_epoch)
{
    switch (cfg->schedule) {
    case DDP_SCHED_CONSTANT:
        return cfg->lr;
    case DDP_SCHED_STEP: {
        int64_t every = cfg->step_every > 0 ? cfg->step_every : 1;
        return cfg->lr * pow(cfg->gamma, (double)(epoch / every));
    }
    case DDP_SCHED_COSINE: {
        int64_t warmup = cfg->warmup > 0 ? cfg->warmup : 0;
        if (step < warmup)
            return cfg->lr * (double)(step + 1) / (double)warmup;
        int64_t total = cfg->epochs * steps_per_epoch;
        int64_t span = total - warmup > 1 ? total - warmup : 1;
        return cfg->lr * 0.5 * (1.0 + cos(M_PI * (double)(step - warmup) / (double)span));
    }
    }
    return cfg->lr;
}

const char *ddp_schedule_name(DdpSchedule schedule)
{
    switch (schedule) {
    case DDP_SCHED_CONSTANT: return "constant";
    case DDP_SCHED_STEP: return "step";
    case DDP_SCHED_COSINE: return "cosine";
    }
    return "?";
}
