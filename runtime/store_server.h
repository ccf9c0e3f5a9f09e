/*
 * store_server.h: rank 0 serves the start-up store (store.h) on a thread of
 * its own; the client side (store.c, ddp_store_serve) starts it, and the
 * store that owns it, or the caller it was never handed to, stops it.
 */
#ifndef DDPRT_STORE_SERVER_H
#define DDPRT_STORE_SERVER_H

#include "status.h"  // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

typedef struct DdpStoreServer DdpStoreServer;

/* The local launcher (launcher.h) picks rank 0's port by listening on it,
 * and hands rank 0 that socket, its descriptor's number in this variable,
 * so that no other program can take the port between the pick and rank 0's
 * store: a port picked and let go could be. */
#define DDP_STORE_LISTEN_FD_ENV "DDP_STORE_LISTEN_FD"

/* Serves on the socket DDP_STORE_LISTEN_FD_ENV names where it is one
 * listening on PORT (HOST unread; once a process: the first server takes
 * it); else binds HOST:PORT (the first of its addresses that binds). Room
 * for a descriptor per rank of WORLD_SIZE; the serving thread takes no
 * signals. DDP_FAIL naming the address: in use, not this machine's,
 * unresolvable. */
DdpStatus ddp_store_server_start(DdpStoreServer **server, const char *host, int port, int world_size);

/* Lets the server serve the ranks still connected for at most DRAIN_S, then
 * joins its thread and frees it. NULL is fine. */
void ddp_store_server_stop(DdpStoreServer *server, double drain_s);

/* How many peers the server has dropped for sending something malformed. */
unsigned long ddp_store_server_dropped(const DdpStoreServer *server);

#ifdef __cplusplus
}
#endif

#endif
