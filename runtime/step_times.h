/*
 * step_times.h: where a rank's training time goes, phase by phase, and the
 * rank that holds the others back.
 *
 * A phase clock: the trainer says when each phase of a step begins
 * (ddp_times_enter), and the time since the last change goes to the phase
 * that ends; it costs one clock read per change. Every --log-every steps the
 * ranks gather their sums (ddp_dist_gather_times) and rank 0 logs them,
 * naming a straggler (ddp_times_straggler).
 *
 * The times are the host's. On CPUs they are the work itself; on GPUs the
 * host only queues the forward, backward and optimizer work, so those three
 * say how long queueing took, and the data wait and step time are what they
 * say.
 *
 * The clock also counts the device calls made inside steps that wait or
 * allocate (device_calls.h): a steady step on a GPU should make no sync and
 * no allocation, and the log shows whether it does.
 */
#ifndef DDPRT_STEP_TIMES_H
#define DDPRT_STEP_TIMES_H

#include <stdint.h>

#include "device_calls.h"  // DdpDeviceCalls: the waits and allocations a step makes
#include "whereabouts.h"  // DdpWhereabouts

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DDP_PHASE_DATA,      /* gathering the batch, waiting for its staging buffer */
    DDP_PHASE_FORWARD,   /* the forward pass and the loss */
    DDP_PHASE_BACKWARD,  /* the backward pass (its buckets' all-reduces start meanwhile) */
    DDP_PHASE_ALLREDUCE, /* waiting for the all-reduces backward did not hide, and the buffers' broadcast */
    DDP_PHASE_OPTIMIZER, /* the optimizer step */
    DDP_PHASE_COUNT,     /* how many phases a step has: those above */
    DDP_PHASE_OUTSIDE,   /* reports, evaluation, checkpoints: not counted */
} DdpPhase;

/* "data", "forward", ...: the names of the log's fields (NAME_ms). */
const char *ddp_phase_name(DdpPhase phase);

/* "the data phase", "backward", "the gradient all-reduce"...: where a rank
 * in PHASE is, for whereabouts.h's messages. */
const char *ddp_phase_place(DdpPhase phase);

typedef struct {
    double seconds[DDP_PHASE_COUNT]; /* since the last ddp_times_reset */
    int64_t steps, samples;          /* this rank's, likewise */
    DdpDeviceCalls calls;            /* made in the phases above, likewise */
    DdpPhase current;
    double since;                    /* when CURRENT began */
    DdpDeviceCalls calls_since;      /* the count when CURRENT began */
    DdpWhereabouts *whereabouts;     /* told of each phase, with *STEP; NULL: none */
    const int64_t *step;
} DdpStepTimes;

/* A clock in phase OUTSIDE, with nothing summed, that tells WHEREABOUTS
 * (may be NULL) of each phase it enters, at the step *STEP. */
void ddp_times_init(DdpStepTimes *t, DdpWhereabouts *whereabouts, const int64_t *step);
/* Starts the sums again; the clock and its phase go on. */
void ddp_times_reset(DdpStepTimes *t);
/* Ends the current phase now and begins PHASE. */
void ddp_times_enter(DdpStepTimes *t, DdpPhase phase);

/* One rank's sums as the ranks gather them: plain doubles, so that one
 * all-gather of doubles carries them. */
typedef struct {
    double seconds[DDP_PHASE_COUNT];
    double steps, samples;
    double calls[DDP_CALL_KINDS];    /* DdpStepTimes' calls */
} DdpRankTimes;

void ddp_times_row(const DdpStepTimes *t, DdpRankTimes *row);
/* A rank's milliseconds per step: in PHASE; in all (the step); and busy,
 * the step less the all-reduce it waited for (a rank waits for the slowest). */
double ddp_times_ms(const DdpRankTimes *row, DdpPhase phase);
double ddp_times_step_ms(const DdpRankTimes *row);
double ddp_times_busy_ms(const DdpRankTimes *row);

/* Percent of a slowest rank's busy time over the median's that names it. */
#define DDP_STRAGGLER_PERCENT 20
/* The rank, of the N in ROWS, whose busy time per step is more than
 * DDP_STRAGGLER_PERCENT over the median of all ranks', or -1 if none (fewer
 * than two ranks, or no step). *SLOWEST gets the rank with the most busy
 * time, *MEDIAN_MS the median (one rank's own; 0 for none). */
int ddp_times_straggler(const DdpRankTimes *rows, int n, int *slowest, double *median_ms);

/* For tests only: a rank slowed on purpose. DDP_TEST_DATA_DELAY="R:MS"
 * makes rank R sleep MS milliseconds in each data phase; other ranks, and
 * runs without it, return at once. */
#define DDP_TEST_DATA_DELAY_ENV "DDP_TEST_DATA_DELAY"
void ddp_times_test_delay(int rank);

#ifdef __cplusplus
}
#endif

#endif
