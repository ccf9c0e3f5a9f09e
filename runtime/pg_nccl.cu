/*
 * pg_nccl.cu: the NCCL backend: collectives over GPU buffers, one GPU and one
 * communicator per process.
 *
 * Start-up: rank 0 makes the NCCL unique id and the others receive it through
 * the TCP store (key "nccl_id"), or by MPI_Bcast when mpirun started the
 * ranks and no store was opened. The GPU is the one ddp_device_open chose
 * (cudaGetDevice: the only one visible, else the local rank's), current
 * before the communicator exists. The communicator is non-blocking
 * (ncclConfig_t.blocking = 0) only so that its start-up, which waits for
 * every rank, can be given up after the timeout instead of hanging.
 *
 * Streams: every collective runs on one communication stream, behind an
 * event recorded on the compute stream, and leaves a done-event behind it.
 * A bucket's all-reduce (allreduce_start) therefore runs while the compute
 * stream goes on with backward, and ddp_pg_wait only makes the compute stream
 * wait for the done-event: the host never waits (llm.c's zero.cuh makes the
 * same choice). Blocking collectives (the parameter broadcast, batchnorm's
 * statistics) take the same route and make the compute stream wait at once.
 * One stream for all of a communicator's collectives means one order for
 * them, the order the trainer issued them, on every rank.
 *
 * Failures: nothing here waits on the GPU, so a hung collective would show
 * up as a hang elsewhere (the trainer's next synchronisation). A watchdog
 * thread, as PyTorch's ProcessGroupNCCL has, polls the done-events of the
 * collectives in flight and ncclCommGetAsyncError every 100 ms. A collective
 * past its timeout or an NCCL error breaks the group: the watchdog aborts the
 * communicator (ncclCommAbort ends its kernels, so the GPU and whoever waits
 * for it move on) and keeps the message, which the trainer's next call into
 * the group returns (ddp_pg_status after each step). If the trainer has not
 * ended the group GRACE_S later (it is stuck outside it, waiting for the
 * GPU), the watchdog prints the message and ends the process, as PyTorch's
 * watchdog does: a rank that hangs silently is worse.
 *
 * Locking: the trainer's calls and the watchdog take one mutex around every
 * NCCL call and every look at the list of collectives in flight; the only
 * slow calls under it are the watchdog's ncclCommAbort and start-up.
 */
#include "pg.h"
#include "cuda_check.h"  // CUDA_TRY
#include "device_calls.h"  // ddp_device_call_note: a host wait, counted
#include "clock.h"     // ddp_now, ddp_abs_time: monotonic seconds

#include <cuda_runtime.h>
#include <errno.h>
#include <nccl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef DDP_HAVE_MPI
#define OMPI_SKIP_MPICXX 1 /* the C API only: MPI's C++ bindings do not pass -Wextra */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

enum { MESSAGE_LEN = 1024, WHAT_LEN = 96 };

static const double POLL_S = 0.1;   /* the watchdog's period */
static const double GRACE_S = 15.0; /* for the trainer to end a failed group before the watchdog ends the process */

/* One collective in flight: the watchdog watches its done-event until it has
 * passed; a bucket's all-reduce is also held by the reducer until ddp_pg_wait. */
struct DdpWork {
    cudaEvent_t done;
    double deadline;
    char what[WHAT_LEN];
    char detail[64];
    int watched, held;
    DdpWork *next;
};

typedef struct {
    ncclComm_t comm;
    cudaStream_t compute, stream; /* the trainer's, the collectives' */
    cudaEvent_t ready;            /* recorded on compute before each collective */
    float *scratch;               /* a barrier's all-reduce */
    int64_t *vote_dev, *vote_host; /* the stop vote's value; pinned: [0] sent, [1] agreed */
    cudaEvent_t vote_read;        /* recorded after the agreed value's copy to the host */
    int vote_pending;             /* a vote is in flight */
    int device, rank, size;
    double timeout_s;
    int mpi_started;

    pthread_t watchdog;
    int watchdog_running;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    DdpWork *watched, *spare;
    int stop;
    int broken, aborted, reported;
    double broken_at;
    char message[MESSAGE_LEN];
} NcclGroup;

static void nap(void)
{
    struct timespec ts = {0, 200000}; /* 0.2 ms */
    nanosleep(&ts, NULL);
}

static ncclDataType_t nccl_type(DdpPgType type)
{
    switch (type) {
    case DDP_F32: return ncclFloat32;
    case DDP_F64: return ncclFloat64;
    case DDP_I64: return ncclInt64;
    case DDP_U8: return ncclUint8;
    }
    return ncclFloat32;
}

static ncclRedOp_t nccl_op(DdpPgOp op)
{
    switch (op) {
    case DDP_SUM: return ncclSum;
    case DDP_AVG: return ncclAvg;
    case DDP_MAX: return ncclMax;
    }
    return ncclSum;
}

/* Waits for a non-blocking communicator's call R to settle (ncclInProgress:
 * poll ncclCommGetAsyncError), until DEADLINE; DDP_OK or a message naming CALL.
 * A non-blocking communicator may say ncclInProgress for a collective it is
 * still queueing, which usually settles quickly: the first millisecond of
 * polls only yields the core, so that a step's collectives (a bucket's
 * all-reduce, the stop vote) do not wait a nap each, and a long wait
 * (start-up, finalize) naps rather than holds a core. */
static DdpStatus settle(NcclGroup *g, ncclResult_t r, const char *call, double deadline)
{
    const double spin_until = ddp_now() + 1e-3;
    while (r == ncclInProgress) {
        const double now = ddp_now();
        if (now > deadline)
            return DDP_ERR(DDP_FAIL, "%s did not finish within %g s", call, g->timeout_s);
        if (now < spin_until)
            sched_yield();
        else
            nap();
        if (ncclCommGetAsyncError(g->comm, &r) != ncclSuccess)
            break;
    }
    if (r != ncclSuccess)
        return DDP_ERR(DDP_FAIL, "%s: %s (%s)", call, ncclGetErrorString(r), ncclGetLastError(g->comm));
    return DDP_OK;
}

/* ---- the watchdog ---------------------------------------------------------------- */

/* Breaks the group (the lock held): keeps the message and aborts the communicator. */
static void break_group(NcclGroup *g, const char *message)
{
    if (g->broken)
        return;
    g->broken = 1;
    g->broken_at = ddp_now();
    snprintf(g->message, MESSAGE_LEN, "%s", message);
    if (!g->aborted) {
        g->aborted = 1;
        (void)ncclCommAbort(g->comm);
    }
}

static void recycle(NcclGroup *g, DdpWork *w)
{
    w->next = g->spare;
    g->spare = w;
}

/* One look at the collectives in flight (the lock held). */
static void inspect(NcclGroup *g)
{
    double t = ddp_now();
    char message[MESSAGE_LEN];
    for (DdpWork **link = &g->watched; *link && !g->broken;) {
        DdpWork *w = *link;
        cudaError_t q = cudaEventQuery(w->done);
        if (q == cudaSuccess) {
            *link = w->next;
            w->watched = 0;
            if (!w->held)
                recycle(g, w);
            continue;
        }
        if (q != cudaErrorNotReady) {
            snprintf(message, sizeof message, "%s failed on the GPU: %s (%s)", w->what, cudaGetErrorName(q),
                     cudaGetErrorString(q));
            break_group(g, message);
        } else if (t > w->deadline) {
            char why[MESSAGE_LEN / 2];
            ddp_pg_why_stuck(why, sizeof why);
            snprintf(message, sizeof message, "%s did not finish within %g s%s: %s", w->what, g->timeout_s,
                     w->detail, why);
            break_group(g, message);
        }
        link = &w->next;
    }
    ncclResult_t e = ncclSuccess;
    if (!g->broken && ncclCommGetAsyncError(g->comm, &e) == ncclSuccess && e != ncclSuccess &&
        e != ncclInProgress) {
        snprintf(message, sizeof message, "NCCL failed: %s (%s)", ncclGetErrorString(e), ncclGetLastError(g->comm));
        break_group(g, message);
    }
}

static void *watchdog(void *arg)
{
    NcclGroup *g = (NcclGroup *)arg;
    (void)cudaSetDevice(g->device);
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        struct timespec until = ddp_abs_time(ddp_now() + POLL_S);
        pthread_cond_timedwait(&g->wake, &g->lock, &until);
        if (g->stop)
            break;
        if (!g->broken) {
            inspect(g);
        } else if (ddp_now() - g->broken_at > GRACE_S) {
            /* The trainer has not ended the group: it is stuck outside it (waiting
             * for the GPU), and may never hear of the failure or get out. */
            if (!g->reported)
                fprintf(stderr, "%s: error: rank %d: %s\n", program_invocation_short_name, g->rank, g->message);
            else
                fprintf(stderr, "%s: error: rank %d: still stuck %g s after: %s\n", program_invocation_short_name,
                        g->rank, GRACE_S, g->message);
            fflush(stderr);
            _exit(DDP_FAIL);
        }
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

/* ---- the trainer's side ---------------------------------------------------------- */

/* The group's failure as this call's (the lock held); the trainer has now heard of it. */
static DdpStatus broken_error(NcclGroup *g)
{
    g->reported = 1;
    return DDP_ERR(DDP_FAIL, "%s", g->message);
}

static DdpStatus new_work(NcclGroup *g, DdpWork **out)
{
    DdpWork *w = g->spare;
    if (w) {
        g->spare = w->next;
    } else {
        w = (DdpWork *)calloc(1, sizeof *w);
        if (!w)
            return DDP_ERR(DDP_FAIL, "out of memory");
        cudaError_t e = cudaEventCreateWithFlags(&w->done, cudaEventDisableTiming);
        if (e != cudaSuccess) {
            free(w);
            return DDP_ERR(DDP_FAIL, "cudaEventCreateWithFlags: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
        }
    }
    w->next = NULL;
    w->watched = w->held = 0;
    w->what[0] = w->detail[0] = '\0';
    *out = w;
    return DDP_OK;
}

/* What every collective does around its NCCL call, the lock held: make the
 * communication stream wait for the compute stream's work so far, then (after
 * the call) record the done-event and hand it to the watchdog. */
static DdpStatus before(NcclGroup *g)
{
    if (g->broken)
        return broken_error(g);
    CUDA_TRY(cudaEventRecord(g->ready, g->compute));
    CUDA_TRY(cudaStreamWaitEvent(g->stream, g->ready, 0));
    return DDP_OK;
}

static DdpStatus after(NcclGroup *g, ncclResult_t r, const char *call, const char *what, int counted,
                       size_t count, DdpPgType type, DdpWork **out)
{
    DdpStatus st = settle(g, r, call, ddp_now() + g->timeout_s);
    if (st != DDP_OK) {
        break_group(g, ddp_error_message());
        g->reported = 1;
        return st;
    }
    DdpWork *w = NULL;
    DDP_CHECK(new_work(g, &w));
    snprintf(w->what, sizeof w->what, "%s", what);
    if (counted)
        snprintf(w->detail, sizeof w->detail, " (%zu %s)", count, ddp_pg_type_name(type));
    w->deadline = ddp_now() + g->timeout_s;
    cudaError_t e = cudaEventRecord(w->done, g->stream);
    if (e != cudaSuccess) {
        recycle(g, w);
        return DDP_ERR(DDP_FAIL, "cudaEventRecord: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    }
    /* A collective captured into a CUDA graph (graph.h) runs only when the
     * graph is launched, and its event, recorded in a capture, may not be
     * queried: the watchdog leaves it, and watches each launch instead
     * (nccl_watch, through ddp_pg_watch). */
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_TRY(cudaStreamIsCapturing(g->stream, &capture));
    if (capture == cudaStreamCaptureStatusNone) {
        w->watched = 1;
        w->next = g->watched;
        g->watched = w;
    }
    *out = w;
    return DDP_OK;
}

/* A blocking collective's end: the compute stream waits for it. */
static DdpStatus join_compute(NcclGroup *g, DdpWork *w)
{
    cudaError_t e = cudaStreamWaitEvent(g->compute, w->done, 0);
    if (!w->watched) /* captured: nothing will look at it again */
        recycle(g, w);
    CUDA_TRY(e);
    return DDP_OK;
}

static DdpStatus nccl_broadcast(void *impl, void *buf, size_t count, DdpPgType type, int root)
{
    NcclGroup *g = (NcclGroup *)impl;
    char what[WHAT_LEN];
    snprintf(what, sizeof what, "broadcast from rank %d", root);
    pthread_mutex_lock(&g->lock);
    DdpWork *w = NULL;
    DdpStatus st = before(g);
    if (st == DDP_OK)
        st = after(g, ncclBroadcast(buf, buf, count, nccl_type(type), root, g->comm, g->stream), "ncclBroadcast",
                   what, 1, count, type, &w);
    if (st == DDP_OK)
        st = join_compute(g, w);
    pthread_mutex_unlock(&g->lock);
    return st;
}

static DdpStatus nccl_allreduce(void *impl, void *buf, size_t count, DdpPgType type, DdpPgOp op)
{
    NcclGroup *g = (NcclGroup *)impl;
    pthread_mutex_lock(&g->lock);
    DdpWork *w = NULL;
    DdpStatus st = before(g);
    if (st == DDP_OK)
        st = after(g, ncclAllReduce(buf, buf, count, nccl_type(type), nccl_op(op), g->comm, g->stream),
                   "ncclAllReduce", "all-reduce", 1, count, type, &w);
    if (st == DDP_OK)
        st = join_compute(g, w);
    pthread_mutex_unlock(&g->lock);
    return st;
}

static DdpStatus nccl_allgather(void *impl, const void *send, void *recv, size_t count, DdpPgType type)
{
    NcclGroup *g = (NcclGroup *)impl;
    pthread_mutex_lock(&g->lock);
    DdpWork *w = NULL;
    DdpStatus st = before(g);
    if (st == DDP_OK)
        st = after(g, ncclAllGather(send, recv, count, nccl_type(type), g->comm, g->stream), "ncclAllGather",
                   "all-gather", 1, count, type, &w);
    if (st == DDP_OK)
        st = join_compute(g, w);
    pthread_mutex_unlock(&g->lock);
    return st;
}

/* The host waits for EVENT, polling, so that the watchdog's timeout and
 * NCCL's errors still end the wait; WHAT names it in messages. */
static DdpStatus host_wait(NcclGroup *g, cudaEvent_t event, const char *what)
{
    ddp_device_call_note(DDP_CALL_WAIT); /* the stop vote's, once a step (device_calls.h) */
    for (;;) {
        cudaError_t q = cudaEventQuery(event);
        if (q == cudaSuccess)
            return DDP_OK;
        DdpStatus st = DDP_OK;
        pthread_mutex_lock(&g->lock);
        if (g->broken)
            st = broken_error(g);
        pthread_mutex_unlock(&g->lock);
        DDP_CHECK(st);
        if (q != cudaErrorNotReady)
            return DDP_ERR(DDP_FAIL, "%s failed on the GPU: %s (%s)", what, cudaGetErrorName(q), cudaGetErrorString(q));
        nap();
    }
}

/* NCCL has no barrier: a one-float all-reduce, which the host waits for (a
 * barrier is for the host), polling so that the timeout and errors still count. */
static DdpStatus nccl_barrier(void *impl)
{
    NcclGroup *g = (NcclGroup *)impl;
    pthread_mutex_lock(&g->lock);
    DdpWork *w = NULL;
    DdpStatus st = before(g);
    if (st == DDP_OK)
        st = after(g, ncclAllReduce(g->scratch, g->scratch, 1, ncclFloat32, ncclSum, g->comm, g->stream),
                   "ncclAllReduce", "barrier", 0, 0, DDP_F32, &w);
    if (st == DDP_OK)
        st = join_compute(g, w);
    if (st == DDP_OK)
        w->held = 1; /* keep it from reuse while the host looks at it */
    pthread_mutex_unlock(&g->lock);
    if (st == DDP_OK)
        st = host_wait(g, w->done, "the barrier");
    if (w) {
        pthread_mutex_lock(&g->lock);
        w->held = 0;
        if (!w->watched)
            recycle(g, w);
        pthread_mutex_unlock(&g->lock);
    }
    return st;
}

static DdpStatus nccl_allreduce_start(void *impl, void *buf, size_t count, DdpPgType type, DdpPgOp op,
                                      const char *what, DdpWork **work)
{
    NcclGroup *g = (NcclGroup *)impl;
    char name[WHAT_LEN];
    snprintf(name, sizeof name, "all-reduce%s%s", what ? " of " : "", what ? what : "");
    pthread_mutex_lock(&g->lock);
    DdpWork *w = NULL;
    DdpStatus st = before(g);
    if (st == DDP_OK)
        st = after(g, ncclAllReduce(buf, buf, count, nccl_type(type), nccl_op(op), g->comm, g->stream),
                   "ncclAllReduce", name, 1, count, type, &w);
    if (st == DDP_OK) {
        w->held = 1;
        *work = w;
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

static DdpStatus nccl_wait(void *impl, DdpWork *w)
{
    NcclGroup *g = (NcclGroup *)impl;
    /* The thread that captures a CUDA graph may not query events, not even
     * those recorded before (the capture would be refused): the watchdog's
     * next look finds what inspect would. */
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    (void)cudaStreamIsCapturing(g->compute, &capture);
    pthread_mutex_lock(&g->lock);
    if (!g->broken && capture == cudaStreamCaptureStatusNone)
        inspect(g); /* a timeout or NCCL error now rather than at the watchdog's next look */
    DdpStatus st = g->broken ? broken_error(g) : DDP_OK;
    if (st == DDP_OK) {
        cudaError_t e = cudaStreamWaitEvent(g->compute, w->done, 0);
        if (e != cudaSuccess)
            st = DDP_ERR(DDP_FAIL, "cudaStreamWaitEvent: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    }
    w->held = 0;
    if (!w->watched)
        recycle(g, w);
    pthread_mutex_unlock(&g->lock);
    return st;
}

/* pg.h's ddp_pg_watch: an event behind STREAM's work so far, watched as a
 * collective's done-event is, so that a replayed graph's all-reduces have
 * the timeout every collective has. */
static DdpStatus nccl_watch(void *impl, void *stream, const char *what)
{
    NcclGroup *g = (NcclGroup *)impl;
    pthread_mutex_lock(&g->lock);
    DdpStatus st = g->broken ? broken_error(g) : DDP_OK;
    DdpWork *w = NULL;
    if (st == DDP_OK)
        st = new_work(g, &w);
    if (st == DDP_OK) {
        snprintf(w->what, sizeof w->what, "%s", what);
        w->deadline = ddp_now() + g->timeout_s;
        cudaError_t e = cudaEventRecord(w->done, (cudaStream_t)stream);
        if (e != cudaSuccess) {
            recycle(g, w);
            st = DDP_ERR(DDP_FAIL, "cudaEventRecord: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
        } else {
            w->watched = 1;
            w->next = g->watched;
            g->watched = w;
        }
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

static DdpStatus nccl_status(void *impl)
{
    NcclGroup *g = (NcclGroup *)impl;
    pthread_mutex_lock(&g->lock);
    if (!g->broken)
        inspect(g);
    DdpStatus st = g->broken ? broken_error(g) : DDP_OK;
    pthread_mutex_unlock(&g->lock);
    return st;
}

/* The stop vote (pg.h): this call's request is all-reduced (max) on the
 * communication stream and copied to pinned memory, which the next call
 * reads, so every rank reads the vote of the same call. The vote needs none
 * of the step's compute, so it does not wait for it; it follows the step's
 * bucket all-reduces on the communication stream, so the next call waits
 * for those at most: the host runs at most a step ahead. (A step replayed
 * from its CUDA graph runs its all-reduces inside the graph, on the compute
 * stream: the vote then follows them in NCCL's own order of the
 * communicator's work, which mixing captured and uncaptured collectives
 * keeps, NCCL_GRAPH_MIXING_SUPPORT being on by default.) The lock held. */
static DdpStatus vote_enqueue(NcclGroup *g, int local)
{
    if (g->broken)
        return broken_error(g);
    g->vote_host[0] = local;
    CUDA_TRY(cudaMemcpyAsync(g->vote_dev, &g->vote_host[0], sizeof *g->vote_dev, cudaMemcpyHostToDevice, g->stream));
    DdpWork *w = NULL;
    DDP_CHECK(after(g, ncclAllReduce(g->vote_dev, g->vote_dev, 1, ncclInt64, ncclMax, g->comm, g->stream),
                    "ncclAllReduce", "the stop vote", 0, 0, DDP_I64, &w));
    CUDA_TRY(cudaMemcpyAsync(&g->vote_host[1], g->vote_dev, sizeof *g->vote_dev, cudaMemcpyDeviceToHost, g->stream));
    CUDA_TRY(cudaEventRecord(g->vote_read, g->stream));
    g->vote_pending = 1;
    return DDP_OK;
}

static DdpStatus nccl_stop_vote(void *impl, int local, int *agreed)
{
    NcclGroup *g = (NcclGroup *)impl;
    *agreed = 0;
    if (g->vote_pending) { /* the last call's */
        DDP_CHECK(host_wait(g, g->vote_read, "the stop vote"));
        g->vote_pending = 0;
        *agreed = (int)g->vote_host[1];
    }
    pthread_mutex_lock(&g->lock);
    DdpStatus st = vote_enqueue(g, local);
    pthread_mutex_unlock(&g->lock);
    return st;
}

/* ---- start and end ---------------------------------------------------------------- */

static void free_list(DdpWork *w)
{
    while (w) {
        DdpWork *next = w->next;
        (void)cudaEventDestroy(w->done);
        free(w);
        w = next;
    }
}

/* Ends the group. A healthy one lets its collectives finish (within the
 * timeout) and finishes NCCL; a broken or aborted one aborts the communicator,
 * which ends its kernels, so no collective runs on afterwards (returns 0). */
static int nccl_destroy(void *impl, int abort)
{
    NcclGroup *g = (NcclGroup *)impl;
    pthread_mutex_lock(&g->lock);
    g->reported = 1;
    pthread_mutex_unlock(&g->lock);
    if (!abort) {
        double deadline = ddp_now() + g->timeout_s;
        for (;;) {
            pthread_mutex_lock(&g->lock);
            if (!g->broken)
                inspect(g);
            int busy = g->watched != NULL && !g->broken;
            if (busy && ddp_now() > deadline)
                break_group(g, "the collectives still running at the end did not finish within the timeout");
            int go_on = busy && !g->broken;
            pthread_mutex_unlock(&g->lock);
            if (!go_on)
                break;
            nap();
        }
    }
    pthread_mutex_lock(&g->lock);
    g->stop = 1;
    pthread_cond_broadcast(&g->wake);
    pthread_mutex_unlock(&g->lock);
    if (g->watchdog_running)
        pthread_join(g->watchdog, NULL);

    int healthy = !abort && !g->broken && !g->aborted;
    if (g->comm) {
        if (healthy) {
            if (settle(g, ncclCommFinalize(g->comm), "ncclCommFinalize", ddp_now() + g->timeout_s) == DDP_OK)
                (void)ncclCommDestroy(g->comm);
            else
                (void)ncclCommAbort(g->comm);
        } else if (!g->aborted) {
            (void)ncclCommAbort(g->comm);
        }
    }
    free_list(g->watched);
    free_list(g->spare);
    if (g->ready)
        (void)cudaEventDestroy(g->ready);
    if (g->stream)
        (void)cudaStreamDestroy(g->stream);
    if (g->scratch)
        (void)cudaFree(g->scratch);
    if (g->vote_dev)
        (void)cudaFree(g->vote_dev);
    if (g->vote_host)
        (void)cudaFreeHost(g->vote_host);
    if (g->vote_read)
        (void)cudaEventDestroy(g->vote_read);
#ifdef DDP_HAVE_MPI
    if (g->mpi_started && healthy)
        MPI_Finalize(); /* else left unfinished, so that mpirun ends the other ranks */
#endif
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
    return 0;
}

/* No purpose hook: a header check per collective would need a host
 * synchronisation (or a device-side comparison kernel) per collective on the
 * stream, which the NCCL backend avoids; ranks' flags and data are checked at
 * start-up (ddp_dist_check_same), and NCCL's own watchdog ends a mismatch at
 * the timeout. */
static const DdpPgBackendOps nccl_ops = {
    "nccl",         nccl_destroy,         nccl_broadcast, nccl_allreduce, nccl_allgather,
    nccl_barrier,   nccl_allreduce_start, nccl_wait,      nccl_status,    nccl_stop_vote, NULL,
    nccl_watch,
};

/* Rank 0's unique id to every rank: through the store, or MPI under mpirun. */
static DdpStatus share_id(NcclGroup *g, const DdpTopology *t, DdpStore *store, ncclUniqueId *id)
{
    (void)g; /* without MPI */
    if (t->world_size == 1)
        return DDP_OK; /* nobody to tell: --backend nccl with one rank, or tests/mpi/nccl_helper.c */
    if (store) {
        if (t->rank == 0)
            return ddp_store_set(store, "nccl_id", id, sizeof *id);
        size_t len = sizeof *id;
        DDP_CHECK(ddp_store_get(store, "nccl_id", id, &len));
        if (len != sizeof *id)
            return DDP_ERR(DDP_FAIL, "the NCCL id from rank 0 has %zu bytes, not %zu: do all ranks run the same "
                           "program?", len, sizeof *id);
        return DDP_OK;
    }
#ifdef DDP_HAVE_MPI
    if (t->launch == DDP_LAUNCH_MPIRUN || t->launch == DDP_LAUNCH_SRUN) {
        int initialized = 0, provided = 0, rank = -1, size = 0;
        MPI_Initialized(&initialized);
        if (!initialized) {
            if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
                return DDP_ERR(DDP_FAIL, "MPI_Init_thread failed (needed to share the NCCL id under mpirun)");
            g->mpi_started = 1;
        }
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (rank != t->rank || size != t->world_size)
            return DDP_ERR(DDP_FAIL, "MPI sees rank %d of %d but this process is rank %d of %d", rank, size, t->rank,
                           t->world_size);
        if (MPI_Bcast(id, (int)sizeof *id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
            return DDP_ERR(DDP_FAIL, "MPI_Bcast of the NCCL id failed");
        return DDP_OK;
    }
#endif
    return DDP_ERR(DDP_FAIL, "internal error: NCCL for %d ranks needs the store (--init-method or MASTER_ADDR) to "
                   "share its id", t->world_size);
}

static DdpStatus open_group(NcclGroup *g, const DdpTopology *t, DdpStore *store)
{
    CUDA_TRY(cudaSetDevice(g->device));
    CUDA_TRY(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreateWithFlags(&g->ready, cudaEventDisableTiming));
    CUDA_TRY(cudaMalloc((void **)&g->scratch, sizeof *g->scratch));
    /* on our own stream, and finished: the legacy stream's cudaMemset is not
     * ordered before work on a non-blocking stream */
    CUDA_TRY(cudaMemsetAsync(g->scratch, 0, sizeof *g->scratch, g->stream));
    CUDA_TRY(cudaMalloc((void **)&g->vote_dev, sizeof *g->vote_dev));
    CUDA_TRY(cudaHostAlloc((void **)&g->vote_host, 2 * sizeof *g->vote_host, cudaHostAllocDefault));
    g->vote_host[0] = g->vote_host[1] = 0;
    CUDA_TRY(cudaEventCreateWithFlags(&g->vote_read, cudaEventDisableTiming));
    CUDA_TRY(cudaStreamSynchronize(g->stream));

    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (t->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            return DDP_ERR(DDP_FAIL, "ncclGetUniqueId: %s (%s)", ncclGetErrorString(r), ncclGetLastError(NULL));
    }
    DDP_CHECK(share_id(g, t, store, &id));

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&g->comm, t->world_size, id, t->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        g->comm = NULL;
        return DDP_ERR(DDP_FAIL, "ncclCommInitRankConfig: %s (%s)", ncclGetErrorString(r), ncclGetLastError(NULL));
    }
    DdpStatus st = settle(g, r, "NCCL's start-up (ncclCommInitRankConfig)", ddp_now() + g->timeout_s);
    if (st != DDP_OK) {
        g->aborted = 1;
        (void)ncclCommAbort(g->comm);
        return st;
    }
    if (pthread_create(&g->watchdog, NULL, watchdog, g) != 0)
        return DDP_ERR(DDP_FAIL, "could not start the NCCL watchdog thread");
    g->watchdog_running = 1;
    pthread_setname_np(g->watchdog, "ddp-nccl-watch");
    return DDP_OK;
}

DdpStatus ddp_pg_nccl_open(const DdpTopology *t, DdpStore *store, void *stream, double timeout_s,
                           const DdpPgBackendOps **ops, void **impl)
{
    *ops = NULL;
    *impl = NULL;
    NcclGroup *g = (NcclGroup *)calloc(1, sizeof *g);
    if (!g)
        return DDP_ERR(DDP_FAIL, "out of memory");
    /* the trainer's device (ddp_device_open), not LOCAL_RANK: a rank shown
     * one GPU drives GPU 0 whatever its local rank */
    if (cudaGetDevice(&g->device) != cudaSuccess) {
        (void)cudaGetLastError();
        g->device = 0;
    }
    g->rank = t->rank;
    g->size = t->world_size;
    g->timeout_s = timeout_s;
    g->compute = (cudaStream_t)stream;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->wake, &ca);
    pthread_condattr_destroy(&ca);
    DdpStatus st = open_group(g, t, store);
    if (st != DDP_OK) {
        char message[MESSAGE_LEN];
        snprintf(message, sizeof message, "%s", ddp_error_message());
        nccl_destroy(g, 1);
        return DDP_ERR(st, "%s", message);
    }
    *ops = &nccl_ops;
    *impl = g;
    return DDP_OK;
}
