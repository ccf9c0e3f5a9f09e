/*
 * clock.h: the one clock the runtime measures with: monotonic seconds, which
 * never jump with the wall clock, so timeouts and throughput stay right
 * across an NTP adjustment. ddp_abs_time turns such a time into what
 * pthread_cond_timedwait takes from a condition variable set to
 * CLOCK_MONOTONIC.
 */
#ifndef DDPRT_CLOCK_H
#define DDPRT_CLOCK_H

#include <time.h>

static inline double ddp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Milliseconds from now to DEADLINE, for poll(): 0 if it has passed, at
 * most an hour, rounded up so that a wait never ends just short of it. */
static inline int ddp_ms_until(double deadline)
{
    double ms = (deadline - ddp_now()) * 1000.0;
    if (ms <= 0)
        return 0;
    return ms > 3600e3 ? 3600000 : (int)ms + 1;
}

static inline struct timespec ddp_abs_time(double t)
{
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

#endif
