/*
 * rendezvous.h: how a rank learns who it is and finds the others.
 *
 * The topology comes from the first of: the program's flags (--rank,
 * --world-size, --init-method tcp://HOST:PORT), torchrun's environment
 * (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
 * mpirun's (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE), srun's
 * (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE). With
 * none of them the run is one rank.
 *
 * Ranks that need to exchange a few bytes before a process group exists (the
 * NCCL unique id, the check that every rank runs the same net) meet in a small
 * TCP store served by rank 0 on MASTER_ADDR:MASTER_PORT (store.c). Its
 * protocol is versioned and every message is length-checked, so a foreign or
 * corrupt peer is refused with a message, never trusted.
 */
#ifndef DDPRT_RENDEZVOUS_H
#define DDPRT_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"  // DdpStatus

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DDP_LAUNCH_NONE,     /* one rank, nothing set */
    DDP_LAUNCH_FLAGS,    /* --rank/--world-size and --init-method */
    DDP_LAUNCH_TORCHRUN, /* env:// */
    DDP_LAUNCH_MPIRUN,
    DDP_LAUNCH_SRUN,
    DDP_LAUNCH_SPAWN,    /* a child of --nproc-per-node (it sets torchrun's variables) */
} DdpLaunch;

typedef struct {
    int rank, world_size;
    int local_rank, local_world_size;
    char master_addr[256]; /* where rank 0 serves the store; "" when not needed (MPI) */
    int master_port;
    DdpLaunch launch;
} DdpTopology;

/* Reads the topology from the flags given (rank/world_size -1 when absent,
 * init_method NULL when absent) and the environment, checking every value
 * (a rank outside the world, a port that is not one, a world of 0):
 * DDP_BAD_INPUT naming the variable or flag. */
DdpStatus ddp_topology_read(DdpTopology *t, int64_t flag_rank, int64_t flag_world_size, const char *init_method);

/* A small key-value store for start-up: rank 0 serves, every rank (0 too)
 * is a client. Keys and values are short byte strings. */
typedef struct DdpStore DdpStore;

/* Connects (rank 0 also listens first) within TIMEOUT_S seconds, or fails
 * with a message naming the address and what went wrong (refused, unreachable,
 * port in use, world never filled). */
DdpStatus ddp_store_open(DdpStore **store, const DdpTopology *t, double timeout_s);
DdpStatus ddp_store_set(DdpStore *s, const char *key, const void *value, size_t len);
/* Waits (up to the store's timeout) until KEY is set; *len in: capacity, out: length. */
DdpStatus ddp_store_get(DdpStore *s, const char *key, void *value, size_t *len);
/* Every rank calls it with the same NAME; returns when all have. */
DdpStatus ddp_store_barrier(DdpStore *s, const char *name);
void ddp_store_close(DdpStore *s);

/* The message parser of the store, exposed for tests and the fuzzer: parses
 * one message from BUF (LEN bytes). Returns bytes consumed, 0 if more bytes
 * are needed, -1 (with the error recorded) if the message is malformed. */
typedef struct {
    int type;
    const char *key;
    size_t key_len;
    const unsigned char *value;
    size_t value_len;
} DdpStoreMessage;
long ddp_store_parse(const unsigned char *buf, size_t len, DdpStoreMessage *msg);

#ifdef __cplusplus
}
#endif

#endif
