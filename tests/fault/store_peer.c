/*
 * store_peer.c: one rank of the start-up store (runtime/store.c, store_server.c), for
 * tests/fault/two_hosts.sh, which runs rank 0 in one network namespace and
 * rank 1 in another, so that the store is reached across a real link that
 * the test can cut.
 *
 *   store_peer RANK tcp://HOST:PORT TIMEOUT_S exchange|cut
 *
 * The topology is built from the arguments (world of 2, as --rank,
 * --world-size and --init-method would give it) through ddp_topology_read,
 * so the address is checked as the program checks it. The modes:
 *
 *   exchange  what a GPU build does with its NCCL unique id: rank 0 sets
 *             "nccl_id" to 128 bytes (NCCL_UNIQUE_ID_BYTES), rank 1 gets it
 *             and checks every byte; then both meet in a barrier.
 *   cut       both open the store and say "ready"; rank 1 then waits for a
 *             key nobody sets while the test cuts the link, rank 0 for a key
 *             only rank 1 would set. Each must fail with a message naming the
 *             store, in about its timeout: the line "failed after S s: MESSAGE"
 *             is what the test checks and reports.
 *
 * Each rank prints "store_peer: rank R: ..." lines; exit 0 when the mode went
 * as expected (for cut: the wait failed), 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"       // ddp_now
#include "store.h"  // ddp_store_*, and topology.h's ddp_topology_read
#include "status.h"      // ddp_error_message

enum { ID_BYTES = 128 }; /* sizeof(ncclUniqueId) */

static void fake_id(unsigned char *id)
{
    for (int i = 0; i < ID_BYTES; i++)
        id[i] = (unsigned char)(i * 37 + 11);
}

static int exchange(DdpStore *s, int rank)
{
    unsigned char id[ID_BYTES], got[ID_BYTES];
    fake_id(id);
    if (rank == 0) {
        if (ddp_store_set(s, "nccl_id", id, sizeof id) != DDP_OK) {
            printf("store_peer: rank 0: FAIL: set nccl_id: %s\n", ddp_error_message());
            return 1;
        }
        printf("store_peer: rank 0: set nccl_id (%d bytes)\n", ID_BYTES);
    } else {
        size_t len = sizeof got;
        if (ddp_store_get(s, "nccl_id", got, &len) != DDP_OK) {
            printf("store_peer: rank %d: FAIL: get nccl_id: %s\n", rank, ddp_error_message());
            return 1;
        }
        if (len != sizeof id || memcmp(got, id, sizeof id) != 0) {
            printf("store_peer: rank %d: FAIL: nccl_id has %zu bytes, not rank 0's %d\n", rank, len, ID_BYTES);
            return 1;
        }
        printf("store_peer: rank %d: got nccl_id (%zu bytes), identical to rank 0's\n", rank, len);
    }
    if (ddp_store_barrier(s, "exchanged") != DDP_OK) {
        printf("store_peer: rank %d: FAIL: barrier: %s\n", rank, ddp_error_message());
        return 1;
    }
    printf("store_peer: rank %d: PASS exchange\n", rank);
    return 0;
}

static int cut(DdpStore *s, int rank)
{
    printf("store_peer: rank %d: ready\n", rank);
    fflush(stdout);
    unsigned char buf[ID_BYTES];
    size_t len = sizeof buf;
    double start = ddp_now();
    DdpStatus st = ddp_store_get(s, rank == 0 ? "from_rank_1" : "never_set", buf, &len);
    double took = ddp_now() - start;
    if (st == DDP_OK) {
        printf("store_peer: rank %d: FAIL: the wait succeeded after %.1f s across a cut link\n", rank, took);
        return 1;
    }
    printf("store_peer: rank %d: failed after %.1f s: %s\n", rank, took, ddp_error_message());
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[4], "exchange") != 0 && strcmp(argv[4], "cut") != 0)) {
        fprintf(stderr, "usage: store_peer RANK tcp://HOST:PORT TIMEOUT_S exchange|cut\n");
        return 2;
    }
    int rank = atoi(argv[1]);
    double timeout_s = atof(argv[3]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    DdpTopology t;
    if (ddp_topology_read(&t, rank, 2, argv[2]) != DDP_OK) {
        printf("store_peer: rank %d: FAIL: %s\n", rank, ddp_error_message());
        return 1;
    }
    DdpStore *s;
    double start = ddp_now();
    if (ddp_store_open(&s, &t, timeout_s) != DDP_OK) {
        printf("store_peer: rank %d: FAIL: open after %.1f s: %s\n", rank, ddp_now() - start, ddp_error_message());
        return 1;
    }
    printf("store_peer: rank %d: opened the store at %s:%d in %.2f s\n", rank, t.master_addr, t.master_port,
           ddp_now() - start);
    int bad = strcmp(argv[4], "exchange") == 0 ? exchange(s, rank) : cut(s, rank);
    ddp_store_close(s);
    return bad;
}
