/*
 * store.h: where ranks meet before a process group exists.
 *
 * Ranks that need to exchange a few bytes first (the NCCL unique id, the
 * check that every rank runs the same net, barriers) meet in a small TCP
 * store served by rank 0 on MASTER_ADDR:MASTER_PORT (store_server.c). Its
 * protocol is versioned and every message is length-checked (store_wire.h),
 * so a foreign or corrupt peer is refused with a message, never trusted.
 */
#ifndef DDPRT_STORE_H
#define DDPRT_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"    // DdpStatus
#include "store_server.h"  // DdpStoreServer
#include "topology.h"  // DdpTopology: where rank 0 serves, and the world

#ifdef __cplusplus
extern "C" {
#endif

/* A small key-value store for start-up: rank 0 serves, every rank (0 too)
 * is a client. Keys are 1 to DDP_STORE_MAX_KEY bytes, values at most
 * DDP_STORE_MAX_VALUE (store_wire.h). One DdpStore is used by one thread at a time. */
typedef struct DdpStore DdpStore;

/* Connects (rank 0 also listens first), then waits until every rank of the
 * world has connected, all within TIMEOUT_S seconds (5 s more where nothing
 * answers on the port: a rank 0 stuck before its store, say, while the
 * local launcher's socket takes the connection), or fails (DDP_FAIL) with
 * a message naming the address and what went wrong (refused, unreachable,
 * port in use, world never filled). TIMEOUT_S is also the store's timeout:
 * how long each later get or barrier may wait. */
DdpStatus ddp_store_open(DdpStore **store, const DdpTopology *t, double timeout_s);

/* ddp_store_open in two halves, for ranks that can tell each other through
 * other means whether rank 0 serves (mpirun's), so that none waits on a
 * store rank 0 could not serve (its port another program's, say): rank 0
 * serves (*SERVER; DDP_FAIL as ddp_store_open's), then every rank opens,
 * rank 0 with its SERVER, which the store then owns (NULL on the others),
 * whether or not the open succeeds. */
DdpStatus ddp_store_serve(DdpStoreServer **server, const DdpTopology *t);
DdpStatus ddp_store_open_served(DdpStore **store, const DdpTopology *t, double timeout_s, DdpStoreServer *server);
DdpStatus ddp_store_set(DdpStore *s, const char *key, const void *value, size_t len);
/* Waits (up to the store's timeout) until KEY is set; *len in: capacity, out:
 * length. A timeout fails with a message naming the key, and leaves the store
 * usable. When no answer comes at all (rank 0 gone, the network cut), the
 * wait ends 5 s after the timeout, with a message naming the key. */
DdpStatus ddp_store_get(DdpStore *s, const char *key, void *value, size_t *len);
/* KEY's value if a rank has set it within WAIT_S (0: now): *found 1 and the
 * value as ddp_store_get; else *found 0, and no error. */
DdpStatus ddp_store_try_get(DdpStore *s, const char *key, double wait_s, void *value, size_t *len, int *found);
/* Another connection to the store that rank 0 serves (once every rank has
 * opened it with ddp_store_open or ddp_store_open_served), for a thread of
 * its own: no barrier, and
 * TIMEOUT_S bounds each of its requests. */
DdpStatus ddp_store_connect(DdpStore **store, const DdpTopology *t, double timeout_s);
/* Adds DELTA to the counter KEY (a missing key counts as 0) and returns its
 * new value in *result: the building block of barriers. */
DdpStatus ddp_store_add(DdpStore *s, const char *key, int64_t delta, int64_t *result);
/* Every rank calls it with the same NAME; returns when all have. A NAME may
 * be used again: each round of world_size arrivals is its own barrier. */
DdpStatus ddp_store_barrier(DdpStore *s, const char *name);
/* Closes the connection; on rank 0 the server then keeps serving the other
 * ranks until they have closed too (at most the store's timeout, and at most
 * 10 s), so none loses a last reply, and its thread is joined. NULL is fine. */
void ddp_store_close(DdpStore *s);
/* The same after a run's end; FAILED_ALONE: this rank failed where the
 * others did not (they run on, to be ended by the launcher, or to fail at
 * the store's loss, and close only when they end): then rank 0 stops
 * serving at once, where it kept serving them, and itself alive, up to
 * 10 s more before the launcher could end them. */
void ddp_store_close_after(DdpStore *s, int failed_alone);
/* How long a close serves the ranks still connected: the store's timeout,
 * at most 10 s; none after a failure of this rank alone. */
double ddp_store_drain_s(double timeout_s, int failed_alone);
/* On rank 0: how many peers the server has dropped for sending something
 * malformed (a foreign program, a corrupt message); 0 on other ranks. */
unsigned long ddp_store_peers_dropped(const DdpStore *s);

#ifdef __cplusplus
}
#endif

#endif
