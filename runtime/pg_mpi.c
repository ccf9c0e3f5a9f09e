/*
 * pg_mpi.c: the MPI backend: collectives over CPU buffers, run by one
 * communication thread.
 *
 * Why a thread: DDP overlaps a bucket's all-reduce with the rest of the
 * backward pass. MPI's non-blocking collectives (MPI_Iallreduce) progress
 * only while some thread is inside MPI, so overlap would need the compute
 * loop to poll MPI_Test between layers. Instead every MPI call of the process
 * is made by one thread that takes collectives from a FIFO queue and runs
 * each to completion with the blocking call; the trainer's thread only
 * enqueues and, when it needs a result, waits on a condition variable. MPI is
 * therefore initialised by that thread (MPI_THREAD_SERIALIZED asked, FUNNELED
 * enough) and finalised by it.
 *
 * Order: the queue runs collectives in the order the trainer started them,
 * which is the same on every rank (the reducer launches buckets in bucket
 * order), so the ranks' MPI calls match. Blocking collectives (the parameter
 * broadcast, batchnorm's statistics) go through the same queue, behind any
 * bucket still in flight.
 *
 * Determinism: all ranks get bit-identical results. MPI_Allreduce on one
 * communicator gives every rank the same result with Open MPI (its
 * algorithms reduce each element once and share it, or combine the same
 * pairs with a commutative operation); the test suite checks it. The average
 * is the sum divided by the world size, done here after the sum, the same
 * operation on the same value on every rank.
 *
 * Timeouts: the trainer waits until the collective's start plus the timeout.
 * Past it, the collective is abandoned: the call fails with a message naming
 * it ("all-reduce of bucket 3 did not finish within 600 s"), the group is
 * broken (later calls fail at once), and its memory is left to the
 * communication thread, which may be stuck inside MPI for good. Such a group
 * is never finalised (MPI_Finalize would wait for the lost rank): the process
 * exits with MPI unfinished and mpirun ends the other ranks.
 *
 * Matching: before its data moves, every collective's header (a sequence
 * number, the kind, what it is for, the count, the type, the root or the
 * operation) goes through one small all-reduce of its own. Ranks that took
 * different paths (different flags, data or programs) would otherwise have
 * MPI pour one collective's data into another's buffer, or hang; this way
 * every rank sees the mismatch in the same call, names both sides, and,
 * since all agree, the group may still finish MPI cleanly. It costs one
 * latency-bound all-reduce per collective (a 3-value all-reduce took 7 to
 * 33 us between two ranks of a loaded 2-core machine; bench/ddp_cpu.sh saw
 * no difference beyond its noise).
 *
 * Stops asked for (ddp_pg_stop_vote) ride in the same header: each rank's
 * request, which the maximum makes every rank's in the same collective.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg.h"  // DdpPgBackendOps, ddp_pg_mpi_open
#include "clock.h"     // ddp_now, ddp_abs_time: monotonic seconds

#ifndef DDP_HAVE_MPI

DdpStatus ddp_pg_mpi_open(const DdpTopology *t, double timeout_s, const DdpPgBackendOps **ops, void **impl)
{
    (void)t;
    (void)timeout_s;
    *ops = NULL;
    *impl = NULL;
    return DDP_ERR(DDP_BAD_INPUT, "this program was built without MPI (no mpicc was found when ddpc was built), "
                                  "so --backend mpi is not available: install libopenmpi-dev and rebuild ddpc");
}

#else

#include <mpi.h>

enum { MESSAGE_LEN = 512, WHAT_LEN = 96 };

typedef enum { OP_BROADCAST, OP_ALLREDUCE, OP_ALLGATHER, OP_BARRIER } OpKind;

/* One queued collective; a DdpWork to the callers of allreduce_start. */
struct DdpWork {
    OpKind kind;
    void *buf;
    const void *send;
    size_t count;
    DdpPgType type;
    DdpPgOp op;
    int root;
    DdpPgPurpose purpose;        /* sent in the header, with the kind and the size */
    char what[WHAT_LEN];         /* "all-reduce of bucket 3", for messages */
    double deadline;             /* monotonic seconds */
    int done, failed, abandoned; /* under the lock */
    char message[MESSAGE_LEN];   /* the MPI error, when failed */
    DdpWork *next;
};

typedef struct {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t queued;       /* the communication thread waits for work */
    pthread_cond_t finished;     /* the trainer waits for a collective */
    DdpWork *head, *tail;        /* to run, in order */
    DdpWork *spare;              /* finished works, for reuse: no allocation per step */
    int rank, size;
    double timeout_s;
    int expected_rank, expected_size;

    /* under the lock */
    int started;                 /* 1 MPI is up, -1 start-up failed */
    char start_message[MESSAGE_LEN];
    int start_bad_input;         /* ...the failure is the ranks' set-up (exit 2), not MPI's */
    int busy;                    /* the thread is inside a collective */
    int stop, abort;             /* destroy asked; abort: leave MPI unfinished */
    int broken;                  /* a collective failed or timed out */
    int agreed;                  /* ...because every rank found the same mismatch: MPI may finish */
    char broken_message[MESSAGE_LEN];
    DdpPgPurpose next_purpose;   /* the trainer's: of the next collective it starts */
    int64_t seq;                 /* the communication thread's: collectives run so far */
    int stop_local, stop_agreed; /* ddp_pg_stop_vote's: atomics, shared with the thread */

    MPI_Comm comm;               /* the communication thread's alone */
} MpiGroup;

static void say_mpi_error(char *buf, const char *call, int rc)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", rc);
    snprintf(buf, MESSAGE_LEN, "%s failed: %s", call, text);
}

static MPI_Datatype mpi_type(DdpPgType type)
{
    switch (type) {
    case DDP_F32: return MPI_FLOAT;
    case DDP_F64: return MPI_DOUBLE;
    case DDP_I64: return MPI_INT64_T;
    case DDP_U8: return MPI_UINT8_T;
    }
    return MPI_DATATYPE_NULL;
}

/* ---- the communication thread ---------------------------------------------------- */

/* A collective's header: what every rank must agree on before data moves
 * (the first MATCHED fields), then what it tells the others. */
enum { H_SEQ, H_KIND, H_PURPOSE, H_COUNT, H_TYPE, H_ROOT_OR_OP, MATCHED, H_STOP = MATCHED, HEADER };

static void fill_header(const MpiGroup *g, const DdpWork *w, int64_t h[HEADER])
{
    h[H_SEQ] = g->seq;
    h[H_KIND] = w->kind;
    h[H_PURPOSE] = w->purpose;
    h[H_COUNT] = (int64_t)w->count;
    h[H_TYPE] = w->kind == OP_BARRIER ? 0 : w->type;
    h[H_ROOT_OR_OP] = w->kind == OP_BROADCAST ? (int64_t)w->root : w->kind == OP_ALLREDUCE ? (int64_t)w->op : 0;
    h[H_STOP] = __atomic_load_n(&g->stop_local, __ATOMIC_RELAXED);
}

/* "the evaluation all-reduce (3 doubles)", from a header. */
static void describe(const int64_t h[HEADER], char *buf, size_t len)
{
    static const char *const ops[] = {[OP_BROADCAST] = "the broadcast", [OP_ALLREDUCE] = "the all-reduce",
                                      [OP_ALLGATHER] = "the all-gather", [OP_BARRIER] = "the barrier"};
    const char *name = h[H_PURPOSE] >= DDP_PG_FOR_OTHER && h[H_PURPOSE] < DDP_PG_PURPOSE_COUNT
                           ? ddp_pg_purpose_name((DdpPgPurpose)h[H_PURPOSE]) : NULL;
    if (!name)
        name = h[H_KIND] >= OP_BROADCAST && h[H_KIND] <= OP_BARRIER ? ops[h[H_KIND]] : "an unknown collective";
    if (h[H_KIND] == OP_BARRIER)
        snprintf(buf, len, "%s", name);
    else
        snprintf(buf, len, "%s (%lld %s%s)", name, (long long)h[H_COUNT], ddp_pg_type_name((DdpPgType)h[H_TYPE]),
                 h[H_KIND] == OP_BROADCAST && h[H_ROOT_OR_OP] != 0 ? ", from another root" : "");
}

/* Before each collective the ranks compare headers, in one small all-reduce
 * (the maximum of each field and of its negation: equal everywhere iff the
 * two agree), so a rank that took another path is caught before MPI would
 * read one collective's data into another's buffer. On a mismatch, which
 * every rank sees in the same all-reduce, the headers are gathered so that
 * each rank names the same two sides. Returns 0 when they agree; 2 when they
 * differ (every rank alike, so MPI may still finish), 1 when MPI failed;
 * either with the message in W. */
static int headers_differ(MpiGroup *g, DdpWork *w)
{
    int64_t h[2 * HEADER];
    fill_header(g, w, h);
    g->seq++;
    for (int i = 0; i < HEADER; i++)
        h[HEADER + i] = -h[i];
    int rc = MPI_Allreduce(MPI_IN_PLACE, h, 2 * HEADER, MPI_INT64_T, MPI_MAX, g->comm);
    if (rc != MPI_SUCCESS) {
        say_mpi_error(w->message, "MPI_Allreduce (a collective's header)", rc);
        return 1;
    }
    if (h[H_STOP] > __atomic_load_n(&g->stop_agreed, __ATOMIC_RELAXED))
        __atomic_store_n(&g->stop_agreed, (int)h[H_STOP], __ATOMIC_RELAXED);
    int same = 1;
    for (int i = 0; i < MATCHED; i++)
        same &= h[i] == -h[HEADER + i];
    if (same)
        return 0;
    int64_t *all = calloc((size_t)g->size, HEADER * sizeof *all), mine[HEADER];
    fill_header(g, w, mine);
    mine[H_SEQ]--;
    if (!all || MPI_Allgather(mine, HEADER, MPI_INT64_T, all, HEADER, MPI_INT64_T, g->comm) != MPI_SUCCESS) {
        snprintf(w->message, MESSAGE_LEN, "the ranks started different collectives (collective %lld)",
                 (long long)mine[H_SEQ]);
    } else {
        int r = 1;
        while (r < g->size - 1 && memcmp(all + (size_t)r * HEADER, all, MATCHED * sizeof *all) == 0)
            r++;
        char theirs[128], first[128];
        describe(all + (size_t)r * HEADER, theirs, sizeof theirs);
        describe(all, first, sizeof first);
        snprintf(w->message, MESSAGE_LEN,
                 "rank %d started %s where rank 0 started %s, as collective %lld: the ranks no longer make the "
                 "same collectives (different flags, data or programs?)", r, theirs, first, (long long)all[H_SEQ]);
    }
    free(all);
    return 2;
}

/* MPI counts are ints: larger buffers go in pieces (each a collective of its own,
 * the same pieces on every rank). */
static const size_t CHUNK = (size_t)1 << 30;

/* 0 done; 1 failed; 2 not run: the ranks' headers differ (headers_differ). */
static int run_collective(MpiGroup *g, DdpWork *w)
{
    int differ = headers_differ(g, w);
    if (differ)
        return differ;
    MPI_Datatype dt = mpi_type(w->type);
    size_t esize = ddp_pg_type_size(w->type);
    char *buf = w->buf;
    int rc = MPI_SUCCESS;
    switch (w->kind) {
    case OP_BROADCAST:
        for (size_t off = 0; off < w->count && rc == MPI_SUCCESS; off += CHUNK) {
            size_t n = w->count - off < CHUNK ? w->count - off : CHUNK;
            rc = MPI_Bcast(buf + off * esize, (int)n, dt, w->root, g->comm);
        }
        if (rc != MPI_SUCCESS)
            say_mpi_error(w->message, "MPI_Bcast", rc);
        break;
    case OP_ALLREDUCE: {
        MPI_Op op = w->op == DDP_MAX ? MPI_MAX : MPI_SUM;
        for (size_t off = 0; off < w->count && rc == MPI_SUCCESS; off += CHUNK) {
            size_t n = w->count - off < CHUNK ? w->count - off : CHUNK;
            rc = MPI_Allreduce(MPI_IN_PLACE, buf + off * esize, (int)n, dt, op, g->comm);
        }
        if (rc != MPI_SUCCESS) {
            say_mpi_error(w->message, "MPI_Allreduce", rc);
            break;
        }
        if (w->op == DDP_AVG && w->type == DDP_F32) {
            float *x = w->buf, d = (float)g->size;
            for (size_t i = 0; i < w->count; i++)
                x[i] /= d;
        } else if (w->op == DDP_AVG) {
            double *x = w->buf, d = (double)g->size;
            for (size_t i = 0; i < w->count; i++)
                x[i] /= d;
        }
        break;
    }
    case OP_ALLGATHER:
        if (w->count > (size_t)INT_MAX) {
            snprintf(w->message, MESSAGE_LEN, "all-gather of %zu %s: more than MPI's %d per call", w->count,
                     ddp_pg_type_name(w->type), INT_MAX);
            return 1;
        }
        rc = MPI_Allgather(w->send == buf + (size_t)g->rank * w->count * esize ? MPI_IN_PLACE : w->send,
                           (int)w->count, dt, buf, (int)w->count, dt, g->comm);
        if (rc != MPI_SUCCESS)
            say_mpi_error(w->message, "MPI_Allgather", rc);
        break;
    case OP_BARRIER:
        rc = MPI_Barrier(g->comm);
        if (rc != MPI_SUCCESS)
            say_mpi_error(w->message, "MPI_Barrier", rc);
        break;
    }
    return rc != MPI_SUCCESS;
}

/* Starts MPI and checks that its world is the topology's; 0 on success,
 * else the reason is in g->start_message. */
static int start_mpi(MpiGroup *g, int *we_started)
{
    int initialized = 0, provided = 0, rc;
    *we_started = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
        /* Open MPI spins while it waits inside a collective; on a machine whose
         * cores all compute (OpenMP), yielding leaves them to backward. The
         * user's own setting wins. */
        setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) {
            say_mpi_error(g->start_message, "MPI_Init_thread", rc);
            return 1;
        }
        *we_started = 1;
        if (provided < MPI_THREAD_FUNNELED) {
            snprintf(g->start_message, MESSAGE_LEN,
                     "MPI gives no thread support (MPI_THREAD_SINGLE); the MPI backend needs MPI_THREAD_FUNNELED");
            return 1;
        }
    } else {
        /* Someone else started MPI on another thread: calls from this one must be allowed. */
        MPI_Query_thread(&provided);
        if (provided < MPI_THREAD_SERIALIZED) {
            snprintf(g->start_message, MESSAGE_LEN,
                     "MPI was started elsewhere in this program without MPI_THREAD_SERIALIZED support");
            return 1;
        }
    }
    int rank = -1, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != g->expected_size || rank != g->expected_rank) {
        snprintf(g->start_message, MESSAGE_LEN,
                 "MPI sees rank %d of %d but this process is rank %d of %d: with --backend mpi, start the ranks "
                 "with mpirun and give no --rank/--world-size (nor OMPI_COMM_WORLD_* variables of your own)",
                 rank, size, g->expected_rank, g->expected_size);
        g->start_bad_input = 1;
        return 1;
    }
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &g->comm);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        say_mpi_error(g->start_message, "MPI_Comm_dup", rc);
        return 1;
    }
    return 0;
}

static void *comm_thread(void *arg)
{
    MpiGroup *g = arg;
    int we_started = 0;
    int failed = start_mpi(g, &we_started);
    pthread_mutex_lock(&g->lock);
    g->started = failed ? -1 : 1;
    pthread_cond_broadcast(&g->finished);
    while (!failed) {
        while (!g->head && !g->stop)
            pthread_cond_wait(&g->queued, &g->lock);
        if (g->stop)
            break;
        DdpWork *w = g->head;
        g->head = w->next;
        if (!g->head)
            g->tail = NULL;
        int bad = 1;
        if (g->broken) {
            /* After a failure the ranks' calls no longer match: run nothing more. */
            snprintf(w->message, MESSAGE_LEN, "not run: %.400s", g->broken_message);
        } else {
            g->busy = 1;
            pthread_mutex_unlock(&g->lock);
            bad = run_collective(g, w);
            pthread_mutex_lock(&g->lock);
            g->busy = 0;
        }
        w->done = 1;
        w->failed = bad != 0;
        if (bad && !g->broken) {
            g->broken = 1;
            g->agreed = bad == 2;
            snprintf(g->broken_message, MESSAGE_LEN, "%s", w->message);
        }
        if (w->abandoned) /* its waiter gave up: nobody else will free it */
            free(w);
        pthread_cond_broadcast(&g->finished);
    }
    /* A mismatch every rank found alike leaves every rank here: MPI may finish. */
    int finish = !failed && ((!g->abort && !g->broken) || g->agreed);
    pthread_mutex_unlock(&g->lock);
    /* Otherwise MPI stays unfinished: MPI_Finalize could wait for ranks that
     * will never get there, and mpirun ends the job when this process exits. */
    if (finish) {
        MPI_Comm_free(&g->comm);
        if (we_started)
            MPI_Finalize();
    }
    return NULL;
}

/* ---- the trainer's side ---------------------------------------------------------- */

static DdpWork *new_work(MpiGroup *g)
{
    DdpWork *w = g->spare;
    if (w)
        g->spare = w->next;
    else
        w = malloc(sizeof *w);
    if (w)
        memset(w, 0, sizeof *w);
    return w;
}

static DdpStatus broken_error(MpiGroup *g)
{
    return DDP_ERR(DDP_FAIL, "an earlier collective failed, so this one cannot run: %s", g->broken_message);
}

/* Takes the lock and a fresh work item for a collective: on DDP_OK the lock
 * is held (submit and unlock follow); on failure (an earlier collective
 * broke the group, or no memory) it is not. */
static DdpStatus lock_new_work(MpiGroup *g, DdpWork **w)
{
    pthread_mutex_lock(&g->lock);
    DdpStatus st = g->broken ? broken_error(g) : DDP_OK;
    *w = st == DDP_OK ? new_work(g) : NULL;
    if (st == DDP_OK && !*w)
        st = DDP_ERR(DDP_FAIL, "out of memory");
    if (st != DDP_OK)
        pthread_mutex_unlock(&g->lock);
    return st;
}

/* Queues W (from new_work, filled in), the lock held. */
static void submit(MpiGroup *g, DdpWork *w)
{
    w->deadline = ddp_now() + g->timeout_s;
    if (w->purpose == DDP_PG_FOR_OTHER)
        w->purpose = g->next_purpose;
    g->next_purpose = DDP_PG_FOR_OTHER;
    if (g->tail)
        g->tail->next = w;
    else
        g->head = w;
    g->tail = w;
    pthread_cond_signal(&g->queued);
}

/* Waits, the lock held, until W is done or its deadline has passed; releases W. */
static DdpStatus wait_locked(MpiGroup *g, DdpWork *w)
{
    struct timespec until = ddp_abs_time(w->deadline);
    while (!w->done && !g->broken) {
        int rc = pthread_cond_timedwait(&g->finished, &g->lock, &until);
        if (rc == ETIMEDOUT && !w->done)
            break;
    }
    if (!w->done) {
        /* Timed out, or an earlier collective failed while this one waited. */
        w->abandoned = 1;
        if (g->broken)
            return broken_error(g);
        g->broken = 1;
        char detail[64] = "";
        if (w->kind != OP_BARRIER)
            snprintf(detail, sizeof detail, " (%zu %s)", w->count, ddp_pg_type_name(w->type));
        snprintf(g->broken_message, MESSAGE_LEN, "%s did not finish within %g s", w->what, g->timeout_s);
        char why[768];
        ddp_pg_why_stuck(why, sizeof why);
        return DDP_ERR(DDP_FAIL, "%s did not finish within %g s%s: %s", w->what, g->timeout_s, detail, why);
    }
    DdpStatus st = DDP_OK;
    if (w->failed && g->agreed && strcmp(w->message, g->broken_message) == 0)
        st = DDP_ERR(DDP_FAIL, "%s", w->message); /* names the collectives itself */
    else if (w->failed)
        st = DDP_ERR(DDP_FAIL, "%s: %s", w->what, w->message);
    w->next = g->spare;
    g->spare = w;
    return st;
}

static DdpStatus run_blocking(MpiGroup *g, DdpWork *proto)
{
    DdpWork *w;
    DDP_CHECK(lock_new_work(g, &w));
    *w = *proto;
    submit(g, w);
    DdpStatus st = wait_locked(g, w);
    pthread_mutex_unlock(&g->lock);
    return st;
}

static DdpStatus mpi_broadcast(void *impl, void *buf, size_t count, DdpPgType type, int root)
{
    DdpWork w = {.kind = OP_BROADCAST, .buf = buf, .count = count, .type = type, .root = root};
    snprintf(w.what, sizeof w.what, "broadcast from rank %d", root);
    return run_blocking(impl, &w);
}

static DdpStatus mpi_allreduce(void *impl, void *buf, size_t count, DdpPgType type, DdpPgOp op)
{
    DdpWork w = {.kind = OP_ALLREDUCE, .buf = buf, .count = count, .type = type, .op = op};
    snprintf(w.what, sizeof w.what, "all-reduce");
    return run_blocking(impl, &w);
}

static DdpStatus mpi_allgather(void *impl, const void *send, void *recv, size_t count, DdpPgType type)
{
    DdpWork w = {.kind = OP_ALLGATHER, .buf = recv, .send = send, .count = count, .type = type};
    snprintf(w.what, sizeof w.what, "all-gather");
    return run_blocking(impl, &w);
}

static DdpStatus mpi_barrier(void *impl)
{
    DdpWork w = {.kind = OP_BARRIER};
    snprintf(w.what, sizeof w.what, "barrier");
    return run_blocking(impl, &w);
}

static DdpStatus mpi_allreduce_start(void *impl, void *buf, size_t count, DdpPgType type, DdpPgOp op,
                                     const char *what, DdpWork **work)
{
    MpiGroup *g = impl;
    DdpWork *w;
    DDP_CHECK(lock_new_work(g, &w));
    w->kind = OP_ALLREDUCE;
    w->buf = buf;
    w->count = count;
    w->type = type;
    w->op = op;
    w->purpose = DDP_PG_FOR_GRADIENTS;
    snprintf(w->what, sizeof w->what, "all-reduce%s%s", what ? " of " : "", what ? what : "");
    submit(g, w);
    pthread_mutex_unlock(&g->lock);
    *work = w;
    return DDP_OK;
}

static DdpStatus mpi_wait(void *impl, DdpWork *work)
{
    MpiGroup *g = impl;
    pthread_mutex_lock(&g->lock);
    DdpStatus st = wait_locked(g, work);
    pthread_mutex_unlock(&g->lock);
    return st;
}

static void mpi_purpose(void *impl, DdpPgPurpose purpose)
{
    MpiGroup *g = impl;
    pthread_mutex_lock(&g->lock);
    g->next_purpose = purpose;
    pthread_mutex_unlock(&g->lock);
}

static DdpStatus mpi_status(void *impl)
{
    MpiGroup *g = impl;
    pthread_mutex_lock(&g->lock);
    DdpStatus st = g->broken ? DDP_ERR(DDP_FAIL, "%s", g->broken_message) : DDP_OK;
    pthread_mutex_unlock(&g->lock);
    return st;
}

static void free_group(MpiGroup *g)
{
    for (DdpWork *w = g->spare, *next; w; w = next) {
        next = w->next;
        free(w);
    }
    for (DdpWork *w = g->head, *next; w; w = next) {
        next = w->next;
        free(w);
    }
    pthread_cond_destroy(&g->queued);
    pthread_cond_destroy(&g->finished);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* Stops the thread. A healthy group first lets the queue drain (within the
 * timeout), then MPI finishes; a broken or aborted one leaves MPI unfinished,
 * and if the thread is stuck inside MPI, leaves it and its memory be (and
 * returns 1: the collective's buffer is still MPI's). */
static int mpi_destroy(void *impl, int abort)
{
    MpiGroup *g = impl;
    pthread_mutex_lock(&g->lock);
    if (!abort && !g->broken) {
        double deadline = ddp_now() + g->timeout_s;
        struct timespec until = ddp_abs_time(deadline);
        while ((g->head || g->busy) && !g->broken)
            if (pthread_cond_timedwait(&g->finished, &g->lock, &until) == ETIMEDOUT)
                break;
        if (g->head || g->busy)
            g->broken = 1;
    }
    g->stop = 1;
    g->abort = abort || g->broken;
    int stuck = g->busy;
    pthread_cond_broadcast(&g->queued);
    pthread_mutex_unlock(&g->lock);
    if (stuck) {
        /* its buffer may still be written: the caller must keep it (pg.h) */
        pthread_detach(g->thread);
        return 1;
    }
    pthread_join(g->thread, NULL);
    free_group(g);
    return 0;
}

/* The thread updates STOP_AGREED in each collective's header, and the
 * trainer calls this after waiting for every collective of its step: so
 * every rank reads it after the same collectives, and reads the same. */
static DdpStatus mpi_stop_vote(void *impl, int local, int *agreed)
{
    MpiGroup *g = impl;
    __atomic_store_n(&g->stop_local, local, __ATOMIC_RELAXED);
    *agreed = __atomic_load_n(&g->stop_agreed, __ATOMIC_RELAXED);
    return DDP_OK;
}

static const DdpPgBackendOps mpi_ops = {
    .name = "mpi",
    .destroy = mpi_destroy,
    .broadcast = mpi_broadcast,
    .allreduce = mpi_allreduce,
    .allgather = mpi_allgather,
    .barrier = mpi_barrier,
    .allreduce_start = mpi_allreduce_start,
    .wait = mpi_wait,
    .status = mpi_status,
    .stop_vote = mpi_stop_vote,
    .purpose = mpi_purpose,
};

DdpStatus ddp_pg_mpi_open(const DdpTopology *t, double timeout_s, const DdpPgBackendOps **ops, void **impl)
{
    static int opened; /* MPI starts once per process (see pg.h) */
    *ops = NULL;
    *impl = NULL;
    if (t->launch != DDP_LAUNCH_MPIRUN && t->launch != DDP_LAUNCH_SRUN)
        return DDP_ERR(DDP_BAD_INPUT,
                       "--backend mpi needs the ranks started by mpirun (or srun); these %d were not: use "
                       "mpirun -np %d PROGRAM, or --backend nccl on GPUs",
                       t->world_size, t->world_size);
    if (opened)
        return DDP_ERR(DDP_FAIL, "internal error: the MPI process group was opened twice (MPI starts once)");
    MpiGroup *g = calloc(1, sizeof *g);
    if (!g)
        return DDP_ERR(DDP_FAIL, "out of memory");
    g->rank = g->expected_rank = t->rank;
    g->size = g->expected_size = t->world_size;
    g->timeout_s = timeout_s;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->queued, &ca);
    pthread_cond_init(&g->finished, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&g->thread, NULL, comm_thread, g) != 0) {
        free_group(g);
        return DDP_ERR(DDP_FAIL, "could not start the MPI communication thread");
    }
    opened = 1;
    pthread_setname_np(g->thread, "ddp-mpi");

    /* Wait for MPI_Init (which meets the other ranks) within the timeout. */
    pthread_mutex_lock(&g->lock);
    struct timespec until = ddp_abs_time(ddp_now() + timeout_s);
    while (!g->started)
        if (pthread_cond_timedwait(&g->finished, &g->lock, &until) == ETIMEDOUT)
            break;
    int started = g->started;
    pthread_mutex_unlock(&g->lock);
    if (started == 0) {
        pthread_detach(g->thread); /* stuck in MPI_Init: leave it */
        return DDP_ERR(DDP_FAIL, "MPI did not start within %g s", timeout_s);
    }
    if (started < 0) {
        DdpStatus st = DDP_ERR(g->start_bad_input ? DDP_BAD_INPUT : DDP_FAIL, "%s", g->start_message);
        pthread_join(g->thread, NULL);
        free_group(g);
        return st;
    }
    *ops = &mpi_ops;
    *impl = g;
    return DDP_OK;
}

#endif
