/*
 * loader.c: batches made ahead on worker threads (loader.h).
 *
 * Batch b goes to slot b % slots, so the trainer, taking them in order,
 * finds each where it expects it, and a worker may start batch b only once
 * batch b - slots has been released. One mutex guards the slots and the
 * epoch's plan; the making itself runs outside it.
 */
#include "loader.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"   // ddp_now
#include "device.h"  // ddp_host_alloc, ddp_host_free

typedef enum { SLOT_FREE, SLOT_MAKING, SLOT_READY, SLOT_TAKEN } SlotState;

typedef struct {
    void *buf;
    float *scratch;          /* for its maker: one sample */
    int64_t batch;           /* the batch it holds or is being made into */
    int count;               /* its samples */
    SlotState state;
    DdpStatus status;        /* of the making */
    char message[DDP_ERROR_MESSAGE_LEN]; /* its failure's, from the worker's thread */
} Slot;

struct DdpLoader {
    DdpLoaderSpec spec;
    pthread_mutex_t mu;
    pthread_cond_t changed;  /* a slot's state, the plan, or quit */
    pthread_t *threads;
    int workers, started;
    Slot *slots;
    int n_slots;
    /* the epoch's plan */
    int64_t epoch;
    const int64_t *order;
    int64_t n, batches;
    int64_t next;            /* the next batch a worker takes up */
    int quit;
};

static size_t align_up(size_t n)
{
    enum { ALIGN = 256 };
    return (n + ALIGN - 1) / ALIGN * ALIGN;
}

DdpBatchLayout ddp_batch_layout(int64_t batch, int64_t numel, size_t raw_sample)
{
    size_t n = (size_t)batch;
    DdpBatchLayout l = {.ids = 0, .raw_sample = raw_sample};
    l.labels = align_up(n * sizeof(int64_t));
    l.raw = l.labels + align_up(n * sizeof(int32_t));
    l.x = l.raw + align_up(n * raw_sample);
    l.host_bytes = raw_sample ? l.x : l.x + align_up(n * (size_t)numel * sizeof(float));
    l.bytes = l.x + align_up(n * (size_t)numel * sizeof(float));
    return l;
}

DdpStatus ddp_loader_make(const DdpLoaderSpec *spec, int64_t epoch, const int64_t *ids, int n, void *buf,
                          float *scratch)
{
    char *b = buf;
    int32_t *labels = (int32_t *)(b + spec->layout.labels);
    memcpy(b + spec->layout.ids, ids, (size_t)n * sizeof *ids);
    if (spec->layout.raw_sample) {
        if (spec->layout.raw_sample != ddp_data_raw_bytes(spec->set))
            return DDP_ERR(DDP_FAIL, "internal error: a batch laid out for raw samples of %zu bytes, of a data set "
                           "whose samples are %zu", spec->layout.raw_sample, ddp_data_raw_bytes(spec->set));
        return ddp_data_gather_raw(spec->set, ids, n, b + spec->layout.raw, labels);
    }
    float *x = (float *)(b + spec->layout.x);
    DDP_CHECK(ddp_data_gather(spec->set, ids, n, x, labels));
    if (ddp_augment_any(spec->data))
        ddp_augment_batch(spec->data, spec->seed, epoch, ids, n, spec->channels, spec->rows, spec->cols, x, scratch);
    return DDP_OK;
}

static void *work(void *arg)
{
    DdpLoader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->quit && (l->next >= l->batches || l->slots[l->next % l->n_slots].state != SLOT_FREE))
            pthread_cond_wait(&l->changed, &l->mu);
        if (l->quit)
            break;
        int64_t b = l->next++;
        Slot *s = &l->slots[b % l->n_slots];
        s->batch = b;
        s->state = SLOT_MAKING;
        int64_t first = b * l->spec.batch;
        int count = (int)(l->n - first < l->spec.batch ? l->n - first : l->spec.batch);
        s->count = count;
        int64_t epoch = l->epoch;
        const int64_t *ids = l->order + first;
        pthread_mutex_unlock(&l->mu);
        DdpStatus status = ddp_loader_make(&l->spec, epoch, ids, count, s->buf, s->scratch);
        pthread_mutex_lock(&l->mu);
        s->status = status;
        if (status != DDP_OK)
            snprintf(s->message, sizeof s->message, "%s", ddp_error_message());
        s->state = SLOT_READY;
        pthread_cond_broadcast(&l->changed);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

DdpStatus ddp_loader_create(DdpLoader **out, int workers, int slots, const DdpLoaderSpec *spec)
{
    *out = NULL;
    if (workers < 1 || slots <= workers)
        return DDP_ERR(DDP_FAIL, "internal error: a loader of %d workers and %d slots", workers, slots);
    DdpLoader *l = calloc(1, sizeof *l);
    if (!l)
        return DDP_ERR(DDP_FAIL, "out of memory: the loader");
    l->spec = *spec;
    l->workers = workers;
    l->n_slots = slots;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->changed, NULL);
    l->slots = calloc((size_t)slots, sizeof *l->slots);
    l->threads = calloc((size_t)workers, sizeof *l->threads);
    size_t sample = (size_t)spec->channels * (size_t)spec->rows * (size_t)spec->cols;
    DdpStatus s = l->slots && l->threads ? DDP_OK : DDP_ERR(DDP_FAIL, "out of memory: the loader");
    for (int i = 0; s == DDP_OK && i < slots; i++) {
        l->slots[i].batch = -1;
        s = ddp_host_alloc(&l->slots[i].buf, spec->layout.host_bytes);
        if (s == DDP_OK && !(l->slots[i].scratch = malloc(sample * sizeof(float))))
            s = DDP_ERR(DDP_FAIL, "out of memory: the loader");
    }
    for (; s == DDP_OK && l->started < workers; l->started++) {
        int rc = pthread_create(&l->threads[l->started], NULL, work, l);
        if (rc != 0) { /* not counted: destroy joins the started ones only */
            char why[128];
            s = DDP_ERR(DDP_FAIL, "cannot start loader thread %d of %d: %s", l->started + 1, workers,
                        ddp_strerror_lower(rc, why, sizeof why));
            break;
        }
    }
    if (s != DDP_OK) {
        ddp_loader_destroy(l);
        return s;
    }
    *out = l;
    return DDP_OK;
}

/* Waits, holding the mutex, until no worker is making a batch. */
static void wait_for_makers(DdpLoader *l)
{
    for (int busy = 1; busy;) {
        busy = 0;
        for (int i = 0; i < l->n_slots; i++)
            busy |= l->slots[i].state == SLOT_MAKING;
        if (busy)
            pthread_cond_wait(&l->changed, &l->mu);
    }
}

void ddp_loader_stop(DdpLoader *l)
{
    pthread_mutex_lock(&l->mu);
    l->next = l->batches; /* no more batches to take up */
    wait_for_makers(l);
    /* a batch the trainer holds stays its own until released: a copy to the
     * device may still read it */
    for (int i = 0; i < l->n_slots; i++)
        if (l->slots[i].state != SLOT_TAKEN)
            l->slots[i].state = SLOT_FREE;
    pthread_mutex_unlock(&l->mu);
}

void ddp_loader_start(DdpLoader *l, int64_t epoch, const int64_t *order, int64_t n, int64_t first)
{
    ddp_loader_stop(l);
    pthread_mutex_lock(&l->mu);
    l->epoch = epoch;
    l->order = order;
    l->n = n;
    l->batches = (n + l->spec.batch - 1) / l->spec.batch;
    l->next = first;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->mu);
}

DdpStatus ddp_loader_take(DdpLoader *l, int64_t b, void **buf, int *n, double *waited)
{
    pthread_mutex_lock(&l->mu);
    Slot *s = &l->slots[b % l->n_slots];
    /* B is coming if its slot is being made into it or holds it, or if no
     * worker has taken it up yet and its slot is not held by the trainer
     * (which would wait for itself); else (taken twice, out of order, after
     * a stop, with its slot held) waiting would hang */
    int coming = b >= 0 && b < l->batches &&
                 ((s->batch == b && (s->state == SLOT_MAKING || s->state == SLOT_READY)) ||
                  (b >= l->next && s->state != SLOT_TAKEN));
    double start = ddp_now();
    while (coming && !(s->batch == b && s->state == SLOT_READY))
        pthread_cond_wait(&l->changed, &l->mu);
    *waited += ddp_now() - start;
    DdpStatus status = !coming ? DDP_ERR(DDP_FAIL, "internal error: batch %lld of an epoch of %lld is not being "
                                         "made", (long long)b, (long long)l->batches)
                     : s->status != DDP_OK ? DDP_ERR(s->status, "%s", s->message)
                                           : DDP_OK;
    if (status == DDP_OK) {
        s->state = SLOT_TAKEN;
        *buf = s->buf;
        *n = s->count;
    }
    pthread_mutex_unlock(&l->mu);
    return status;
}

void ddp_loader_release(DdpLoader *l, int64_t b)
{
    pthread_mutex_lock(&l->mu);
    Slot *s = &l->slots[b % l->n_slots];
    if (s->batch == b && s->state == SLOT_TAKEN) {
        s->state = SLOT_FREE;
        pthread_cond_broadcast(&l->changed);
    }
    pthread_mutex_unlock(&l->mu);
}

void ddp_loader_destroy(DdpLoader *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->quit = 1;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->started; i++)
        pthread_join(l->threads[i], NULL);
    for (int i = 0; l->slots && i < l->n_slots; i++) {
        ddp_host_free(l->slots[i].buf);
        free(l->slots[i].scratch);
    }
    free(l->slots);
    free(l->threads);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->changed);
    free(l);
}

int ddp_loader_default_workers(int on_gpu, int cores, int local_ranks)
{
    if (!on_gpu)
        return 1;
    int share = (local_ranks > 0 ? cores / local_ranks : cores) - 1;
    return share < 1 ? 1 : share > DDP_LOADER_MOST_WORKERS ? DDP_LOADER_MOST_WORKERS : share;
}
