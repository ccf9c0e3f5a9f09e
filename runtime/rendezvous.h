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
 * DDP_BAD_INPUT naming the variable or flag.
 *
 * The first source that says anything wins: flags (--init-method tcp://
 * requires --rank and --world-size; a flag missing beside env:// or alone is
 * taken from the launcher's environment), then torchrun's variables (with
 * DDP_SPAWNED=1 a child of ddp_launch_local), then mpirun's, then srun's, then
 * one rank. --init-method env:// with no launcher's variables is an error.
 * Where the source says nothing of local ranks, local_rank = rank and
 * local_world_size = world_size (one node). master_addr is required for
 * several ranks except under mpirun (MPI carries the start-up there); under
 * srun it defaults to SLURM_LAUNCH_NODE_IPADDR and the port to 29500 +
 * SLURM_JOB_ID % 10000. master_port is 0 when master_addr is "". Under
 * torchrun with TORCHELASTIC_USE_AGENT_STORE=True, its agent already serves
 * a PyTorch store on MASTER_PORT, so master_port is MASTER_PORT + 1. */
DdpStatus ddp_topology_read(DdpTopology *t, int64_t flag_rank, int64_t flag_world_size, const char *init_method);

/* A small key-value store for start-up: rank 0 serves, every rank (0 too)
 * is a client. Keys are 1 to DDP_STORE_MAX_KEY bytes, values at most
 * DDP_STORE_MAX_VALUE. One DdpStore is used by one thread at a time. */
typedef struct DdpStore DdpStore;

/* Connects (rank 0 also listens first), then waits until every rank of the
 * world has connected, all within TIMEOUT_S seconds, or fails (DDP_FAIL) with
 * a message naming the address and what went wrong (refused, unreachable,
 * port in use, world never filled). TIMEOUT_S is also the store's timeout:
 * how long each later get or barrier may wait. */
DdpStatus ddp_store_open(DdpStore **store, const DdpTopology *t, double timeout_s);
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
 * opened it with ddp_store_open), for a thread of its own: no barrier, and
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
/* On rank 0: how many peers the server has dropped for sending something
 * malformed (a foreign program, a corrupt message); 0 on other ranks. */
unsigned long ddp_store_peers_dropped(const DdpStore *s);

/* The wire format, little endian: a header of DDP_STORE_HEADER bytes
 *   "DDPS" | version u16 | type u8 | key length u16 | value length u32
 * then the key and the value. Each request gets one reply: SET -> OK;
 * GET (value: u32 milliseconds to wait) -> VALUE (key, value) or TIMEOUT (key);
 * ADD (value: i64 delta) -> VALUE (key, i64 new count). */
#define DDP_STORE_MAGIC "DDPS"
#define DDP_STORE_VERSION 1
#define DDP_STORE_HEADER 13
#define DDP_STORE_MAX_KEY 256
#define DDP_STORE_MAX_VALUE (1u << 20)
typedef enum {
    DDP_STORE_SET = 1,
    DDP_STORE_GET = 2,
    DDP_STORE_ADD = 3,
    DDP_STORE_OK = 0x81,
    DDP_STORE_VALUE = 0x82,
    DDP_STORE_TIMEOUT = 0x83,
} DdpStoreType;

/* The message parser of the store, exposed for tests and the fuzzer: parses
 * one message from BUF (LEN bytes). Returns bytes consumed, 0 if more bytes
 * are needed, -1 (with the error recorded) if the message is malformed: a
 * wrong magic or version, an unknown type, a length over the limits or one
 * its type does not allow. The header is checked as soon as its bytes are
 * there, before any body arrives, so a reader never allocates for a lie. */
typedef struct {
    int type;
    const char *key;
    size_t key_len;
    const unsigned char *value;
    size_t value_len;
} DdpStoreMessage;
long ddp_store_parse(const unsigned char *buf, size_t len, DdpStoreMessage *msg);

/* Writes one message into BUF (CAP bytes); returns its length, or 0 if it
 * does not fit or breaks the limits above. For tests, the fuzzer and store.c. */
size_t ddp_store_encode(unsigned char *buf, size_t cap, int type, const char *key, size_t key_len,
                        const void *value, size_t value_len);

#ifdef __cplusplus
}
#endif

#endif
