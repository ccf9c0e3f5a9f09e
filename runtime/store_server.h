/*
 * store_server.h: rank 0 serves the start-up store (store.h) on a thread of
 * its own; the client side (store.c) starts and stops it.
 */
#ifndef DDPRT_STORE_SERVER_H
#define DDPRT_STORE_SERVER_H

#include "status.h"  // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

typedef struct DdpStoreServer DdpStoreServer;

/* Binds HOST:PORT (the first of its addresses that binds; room for a
 * descriptor per rank of WORLD_SIZE) and starts the serving thread, which
 * takes no signals. DDP_FAIL naming the address: in use, not this machine's,
 * unresolvable. */
DdpStatus ddp_store_server_start(DdpStoreServer **server, const char *host, int port, int world_size);

/* Lets the server serve the ranks still connected for at most DRAIN_S, then
 * joins its thread and frees it. */
void ddp_store_server_stop(DdpStoreServer *server, double drain_s);

/* How many peers the server has dropped for sending something malformed. */
unsigned long ddp_store_server_dropped(const DdpStoreServer *server);

#ifdef __cplusplus
}
#endif

#endif
