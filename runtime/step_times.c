/*
 * step_times.c: the phase clock and the straggler rule of step_times.h.
 */
#include "step_times.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"  // ddp_now: monotonic seconds

const char *ddp_phase_name(DdpPhase phase)
{
    switch (phase) {
    case DDP_PHASE_DATA: return "data";
    case DDP_PHASE_FORWARD: return "forward";
    case DDP_PHASE_BACKWARD: return "backward";
    case DDP_PHASE_ALLREDUCE: return "allreduce";
    case DDP_PHASE_OPTIMIZER: return "optimizer";
    case DDP_PHASE_COUNT:
    case DDP_PHASE_OUTSIDE: break;
    }
    return "outside";
}

const char *ddp_phase_place(DdpPhase phase)
{
    switch (phase) {
    case DDP_PHASE_DATA: return "the data phase";
    case DDP_PHASE_FORWARD: return "forward";
    case DDP_PHASE_BACKWARD: return "backward";
    case DDP_PHASE_ALLREDUCE: return "the gradient all-reduce";
    case DDP_PHASE_OPTIMIZER: return "the optimizer step";
    case DDP_PHASE_COUNT:
    case DDP_PHASE_OUTSIDE: break;
    }
    return "between steps";
}

void ddp_times_init(DdpStepTimes *t, DdpWhereabouts *whereabouts, const int64_t *step)
{
    memset(t, 0, sizeof *t);
    t->current = DDP_PHASE_OUTSIDE;
    t->since = ddp_now();
    t->calls_since = ddp_device_calls_read();
    t->whereabouts = whereabouts;
    t->step = step;
}

void ddp_times_reset(DdpStepTimes *t)
{
    memset(t->seconds, 0, sizeof t->seconds);
    t->steps = t->samples = 0;
    memset(&t->calls, 0, sizeof t->calls);
}

void ddp_times_enter(DdpStepTimes *t, DdpPhase phase)
{
    double now = ddp_now();
    DdpDeviceCalls calls = ddp_device_calls_read();
    if (t->current < DDP_PHASE_COUNT) {
        t->seconds[t->current] += now - t->since;
        for (int k = 0; k < DDP_CALL_KINDS; k++)
            t->calls.count[k] += calls.count[k] - t->calls_since.count[k];
    }
    t->current = phase;
    t->since = now;
    t->calls_since = calls;
    if (t->whereabouts)
        ddp_whereabouts_note(t->whereabouts, *t->step, ddp_phase_place(phase));
}

void ddp_times_row(const DdpStepTimes *t, DdpRankTimes *row)
{
    memcpy(row->seconds, t->seconds, sizeof row->seconds);
    row->steps = (double)t->steps;
    row->samples = (double)t->samples;
    for (int k = 0; k < DDP_CALL_KINDS; k++)
        row->calls[k] = (double)t->calls.count[k];
}

double ddp_times_ms(const DdpRankTimes *row, DdpPhase phase)
{
    return row->steps > 0 && phase < DDP_PHASE_COUNT ? 1e3 * row->seconds[phase] / row->steps : 0;
}

double ddp_times_step_ms(const DdpRankTimes *row)
{
    double ms = 0;
    for (int p = 0; p < DDP_PHASE_COUNT; p++)
        ms += ddp_times_ms(row, (DdpPhase)p);
    return ms;
}

double ddp_times_busy_ms(const DdpRankTimes *row)
{
    return ddp_times_step_ms(row) - ddp_times_ms(row, DDP_PHASE_ALLREDUCE);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int ddp_times_straggler(const DdpRankTimes *rows, int n, int *slowest, double *median_ms)
{
    *slowest = 0;
    *median_ms = 0;
    for (int r = 1; r < n; r++)
        if (ddp_times_busy_ms(&rows[r]) > ddp_times_busy_ms(&rows[*slowest]))
            *slowest = r;
    double *busy = n >= 1 ? malloc((size_t)n * sizeof *busy) : NULL;
    if (!busy)
        return -1;
    for (int r = 0; r < n; r++)
        busy[r] = ddp_times_busy_ms(&rows[r]);
    qsort(busy, (size_t)n, sizeof *busy, by_value);
    *median_ms = n % 2 ? busy[n / 2] : 0.5 * (busy[n / 2 - 1] + busy[n / 2]);
    free(busy);
    double top = ddp_times_busy_ms(&rows[*slowest]);
    if (rows[*slowest].steps <= 0 || !(*median_ms > 0))
        return -1;
    return top > *median_ms * (1 + DDP_STRAGGLER_PERCENT / 100.0) ? *slowest : -1;
}

void ddp_times_test_delay(int rank)
{
    static int parsed, delayed_rank = -1;
    static long delay_ms;
    if (!parsed) {
        parsed = 1;
        const char *s = getenv(DDP_TEST_DATA_DELAY_ENV);
        if (s && sscanf(s, "%d:%ld", &delayed_rank, &delay_ms) != 2)
            delayed_rank = -1;
    }
    if (rank != delayed_rank || delay_ms <= 0)
        return;
    struct timespec ts = {delay_ms / 1000, delay_ms % 1000 * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}
