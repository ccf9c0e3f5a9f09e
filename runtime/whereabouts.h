/*
 * whereabouts.h: where every rank is, so that a hang names its culprit.
 *
 * NCCL and PyTorch leave a user with a watchdog's timeout and no culprit: a
 * collective that never ends says only that it did not end. Here every rank
 * notes its place as it goes (the step and the phase of step_times.h,
 * evaluation, a checkpoint), and a thread of its own publishes the latest
 * one through the run's store (store.h), at most ten times a second,
 * on a connection of its own: the trainer never waits for the network. When
 * a collective times out, the rank reads the others' places back and says
 * which were not where it was, and since when. A rank stopped (SIGSTOP, a
 * debugger, a swapping node) stops publishing, which its heartbeat shows.
 *
 * Ages compare the wall clocks (CLOCK_REALTIME) of two hosts, which NTP
 * keeps within milliseconds of each other; within one host they are exact.
 */
#ifndef DDPRT_WHEREABOUTS_H
#define DDPRT_WHEREABOUTS_H

#include <stddef.h>
#include <stdint.h>

#include "topology.h"  // DdpTopology
#include "status.h"      // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

typedef struct DdpWhereabouts DdpWhereabouts;

/* The longest place or detail kept (longer ones are cut). */
enum { DDP_PLACE_LEN = 64 };

/* Starts publishing this rank's place through the store rank 0 serves for T
 * (every rank must have opened it: ddp_store_open or ddp_store_open_served). */
DdpStatus ddp_whereabouts_open(DdpWhereabouts **w, const DdpTopology *t);

/* This rank is now at PLACE ("backward", "evaluation"...) of STEP, with no
 * detail yet. A few memory writes under a lock: cheap enough for every phase
 * of every step. NULL W does nothing. */
void ddp_whereabouts_note(DdpWhereabouts *w, int64_t step, const char *place);

/* Where within its place the rank is ("past conv2" in backward, "bucket 3"
 * in the gradient all-reduce), shown after the place. A detail is not a new
 * place: how long a rank has been in its place, and the place before it,
 * are of places alone, so that a rank moving through backward's layers has
 * been in backward since backward began. NULL W does nothing. */
void ddp_whereabouts_detail(DdpWhereabouts *w, const char *detail);

/* Into BUF (LEN bytes), joined by "; ", every other rank that is silent
 * (its publisher not heard from for seconds: the rank is stopped or
 * frozen), "rank 1 was last seen 29.8 s ago in backward (step 57), and has
 * been silent since (stopped, or frozen?)"; that is elsewhere, "rank 1 is in
 * evaluation (step 57), for 12.0 s now"; or that came to this rank's place
 * only lately, "rank 1 was in backward (step 57) until 0.1 s ago". Says so
 * when the store does not answer (rank 0, which serves it, is stopped or
 * gone) or every rank waits where this one does. Safe from any thread; may wait a
 * few seconds for the store. */
void ddp_whereabouts_others(DdpWhereabouts *w, char *buf, size_t len);

/* Stops the thread and closes its connection. NULL is fine. */
void ddp_whereabouts_close(DdpWhereabouts *w);

#ifdef __cplusplus
}
#endif

#endif
