/*
 * nccl_helper.c: the NCCL backend on real GPUs, for a machine that has them
 * (the CI machine has none: run tests/mpi/run_nccl.sh there by hand).
 *
 *   one           one GPU, one rank: the backend opened directly (pg.c would
 *                 give a world of one its no-op group), every collective,
 *                 a bucket all-reduce ordered against the compute stream
 *   collectives   under `mpirun -np N` (N GPUs): the id shared by MPI_Bcast,
 *                 sums, averages, all-gather, barrier, buckets in flight, and
 *                 the same bits on every rank
 *   timeout       under `mpirun -np 2`: rank 0's bucket all-reduce, which
 *                 rank 1 never calls, fails within the 2 s timeout with the
 *                 message (through ddp_pg_wait or ddp_pg_status)
 *
 * Each rank prints "rank R: PASS MODE" or "rank R: FAIL: why".
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pg.h"  // ddp_pg_*, ddp_pg_nccl_open

static int rank_, size_, failures;

#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            printf("rank %d: FAIL: line %d: ", rank_, __LINE__); \
            printf(__VA_ARGS__);                                 \
            printf("\n");                                        \
            failures++;                                          \
        }                                                        \
    } while (0)
#define OK(call) CHECK((call) == DDP_OK, "%s: %s", #call, ddp_error_message())
#define CUDA(call) CHECK((call) == cudaSuccess, "%s failed", #call)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v ? atoi(v) : dflt;
}

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3u;
    return h;
}

/* The collectives through OPS/IMPL on STREAM, with W ranks; device buffers. */
static void exercise(const DdpPgBackendOps *ops, void *impl, cudaStream_t stream, int W)
{
    enum { N = 1 << 20 };
    float *h = malloc(N * sizeof *h), *d = NULL;
    CUDA(cudaMalloc((void **)&d, N * sizeof *d));

    /* all-reduce SUM and AVG of small integers: exact */
    for (int i = 0; i < N; i++)
        h[i] = (float)((rank_ + 1) * (i % 1000));
    CUDA(cudaMemcpyAsync(d, h, N * sizeof *h, cudaMemcpyHostToDevice, stream));
    OK(ops->allreduce(impl, d, N, DDP_F32, DDP_SUM));
    CUDA(cudaMemcpyAsync(h, d, N * sizeof *h, cudaMemcpyDeviceToHost, stream));
    CUDA(cudaStreamSynchronize(stream));
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += h[i] != (float)(W * (W + 1) / 2 * (i % 1000));
    CHECK(!bad, "all-reduce SUM: %d wrong", bad);

    /* a bucket all-reduce started behind a kernel-free stretch of the compute
     * stream, waited for on the stream: the copy after the wait sees it */
    for (int i = 0; i < N; i++)
        h[i] = (float)((rank_ + 1) * (i % 1000));
    CUDA(cudaMemcpyAsync(d, h, N * sizeof *h, cudaMemcpyHostToDevice, stream));
    DdpWork *w = NULL;
    OK(ops->allreduce_start(impl, d, N, DDP_F32, DDP_AVG, "bucket 0", &w));
    OK(ops->wait(impl, w));
    float *back = malloc(N * sizeof *back);
    CUDA(cudaMemcpyAsync(back, d, N * sizeof *back, cudaMemcpyDeviceToHost, stream));
    CUDA(cudaStreamSynchronize(stream));
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += back[i] != (float)(i % 1000) * (float)(W + 1) / 2.0f;
    CHECK(!bad, "bucket all-reduce AVG: %d wrong", bad);
    int64_t mine = (int64_t)fnv1a(back, N * sizeof *back), *all_d = NULL, all[64];
    CUDA(cudaMalloc((void **)&all_d, 64 * sizeof *all_d));
    CUDA(cudaMemcpyAsync(all_d + rank_, &mine, sizeof mine, cudaMemcpyHostToDevice, stream));
    OK(ops->allgather(impl, all_d + rank_, all_d, 1, DDP_I64));
    CUDA(cudaMemcpyAsync(all, all_d, (size_t)W * sizeof *all, cudaMemcpyDeviceToHost, stream));
    CUDA(cudaStreamSynchronize(stream));
    for (int k = 0; k < W; k++)
        CHECK(all[k] == mine, "rank %d got other bits than this one", k);

    /* broadcast from the last rank, barrier */
    double x = rank_ == W - 1 ? 2.5 : 0, *xd = NULL;
    CUDA(cudaMalloc((void **)&xd, sizeof *xd));
    CUDA(cudaMemcpyAsync(xd, &x, sizeof x, cudaMemcpyHostToDevice, stream));
    OK(ops->broadcast(impl, xd, 1, DDP_F64, W - 1));
    CUDA(cudaMemcpyAsync(&x, xd, sizeof x, cudaMemcpyDeviceToHost, stream));
    CUDA(cudaStreamSynchronize(stream));
    CHECK(x == 2.5, "broadcast F64: %g", x);
    OK(ops->barrier(impl));

    /* many buckets in flight */
    enum { NB = 32 };
    DdpWork *ws[NB];
    for (int b = 0; b < NB; b++)
        OK(ops->allreduce_start(impl, d + b * 1000, 1000, DDP_F32, DDP_SUM, "bucket", &ws[b]));
    for (int b = 0; b < NB; b++)
        OK(ops->wait(impl, ws[b]));
    OK(ops->status(impl));
    CUDA(cudaStreamSynchronize(stream));
    cudaFree(d);
    cudaFree(all_d);
    cudaFree(xd);
    free(h);
    free(back);
}

/* pg.c's calls in the shape of a backend's, so that exercise() runs through either */
static DdpStatus via_broadcast(void *pg, void *buf, size_t count, DdpPgType type, int root)
{
    return ddp_pg_broadcast(pg, buf, count, type, root);
}
static DdpStatus via_allreduce(void *pg, void *buf, size_t count, DdpPgType type, DdpPgOp op)
{
    return ddp_pg_allreduce(pg, buf, count, type, op);
}
static DdpStatus via_allgather(void *pg, const void *send, void *recv, size_t count, DdpPgType type)
{
    return ddp_pg_allgather(pg, send, recv, count, type);
}
static DdpStatus via_barrier(void *pg) { return ddp_pg_barrier(pg); }
static DdpStatus via_start(void *pg, void *buf, size_t count, DdpPgType type, DdpPgOp op, const char *what,
                           DdpWork **work)
{
    return ddp_pg_allreduce_start(pg, buf, count, type, op, what, work);
}
static DdpStatus via_wait(void *pg, DdpWork *work) { return ddp_pg_wait(pg, work); }
static DdpStatus via_status(void *pg) { return ddp_pg_status(pg); }

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    DdpTopology t = {.rank = env_int("OMPI_COMM_WORLD_RANK", 0),
                     .world_size = env_int("OMPI_COMM_WORLD_SIZE", 1),
                     .local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0),
                     .local_world_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1),
                     .launch = DDP_LAUNCH_MPIRUN};
    rank_ = t.rank;
    size_ = t.world_size;
    cudaStream_t stream;
    cudaSetDevice(t.local_rank);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    double timeout = strcmp(mode, "timeout") == 0 ? 2.0 : 60.0;

    if (strcmp(mode, "one") == 0) {
        const DdpPgBackendOps *ops = NULL;
        void *impl = NULL;
        t.rank = 0;
        t.world_size = 1;
        OK(ddp_pg_nccl_open(&t, NULL, stream, timeout, &ops, &impl));
        if (ops) {
            exercise(ops, impl, stream, 1);
            ops->destroy(impl, 0);
        }
    } else {
        DdpProcessGroup *pg = NULL;
        if (ddp_pg_create(&pg, DDP_PG_NCCL, &t, NULL, stream, timeout) != DDP_OK) {
            printf("rank %d: FAIL: ddp_pg_create: %s\n", rank_, ddp_error_message());
            return 1;
        }
        if (strcmp(mode, "collectives") == 0) {
            /* through pg.c: what the trainer's calls reach */
            const DdpPgBackendOps ops = {.name = "pg",
                                         .broadcast = via_broadcast,
                                         .allreduce = via_allreduce,
                                         .allgather = via_allgather,
                                         .barrier = via_barrier,
                                         .allreduce_start = via_start,
                                         .wait = via_wait,
                                         .status = via_status};
            exercise(&ops, pg, stream, size_);
            ddp_pg_destroy(pg);
        } else if (strcmp(mode, "timeout") == 0) {
            if (rank_ != 0) {
                sleep(60); /* never calls: mpirun ends this rank when rank 0 exits */
                return 0;
            }
            float *d = NULL;
            cudaMalloc((void **)&d, 1290 * sizeof *d);
            DdpWork *w = NULL;
            double t0 = now();
            OK(ddp_pg_allreduce_start(pg, d, 1290, DDP_F32, DDP_AVG, "bucket 3", &w));
            DdpStatus st = ddp_pg_wait(pg, w);
            while (st == DDP_OK && now() - t0 < 30) {
                usleep(10000);
                st = ddp_pg_status(pg);
            }
            double took = now() - t0;
            printf("rank 0: failed after %.2f s: %s\n", took, ddp_error_message());
            CHECK(st == DDP_FAIL && strstr(ddp_error_message(), "all-reduce of bucket 3 did not finish within 2 s"),
                  "no timeout");
            CHECK(took > 1.9 && took < 5, "failed after %.2f s", took);
            printf("rank 0: %s timeout\n", failures ? "FAIL" : "PASS");
            ddp_pg_abort(pg);
            return 3;
        }
    }
    printf("rank %d: %s %s\n", rank_, failures ? "FAIL" : "PASS", mode);
    return failures ? 1 : 0;
}
