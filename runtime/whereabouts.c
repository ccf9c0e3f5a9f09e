/*
 * whereabouts.c: the places of whereabouts.h, published through the store.
 *
 * Each rank's place is one store key, "ddp/place/R", holding text:
 * "HEARD\tSINCE STEP PLACE\tSINCE STEP PLACE": when it was written, then the
 * place now and the one before, each with the wall-clock second it got
 * there. The publisher wakes every PUBLISH_S and sets the key when the place
 * changed since its last set, and every HEARTBEAT_S anyway, so a rank
 * changing phase every millisecond costs the store ten requests a second,
 * and one stuck in a collective one a second.
 *
 * The heartbeat tells a rank that is stopped or frozen (SIGSTOP, a
 * debugger, a node swapping), whose publisher stops with it, from one that
 * waits in the same collective as the reader: both may be at the same place.
 *
 * The place before is for a race: mpirun ends a job whose rank failed by
 * sending the others SIGCONT, then SIGTERM. A rank whose timeout comes a
 * moment after another's may then find the stopped rank already continued
 * into the collective it waits in; what it was doing until then is the
 * place before, and how long ago it arrived tells the two apart.
 */
#include "whereabouts.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"  // ddp_abs_time
#include "store.h"  // the connection the notes go through

/* A place as published: "PLACE, DETAIL"; a record: the time heard, then
 * the place now and the place before, each with its step and since. */
enum { SHOWN_LEN = 2 * DDP_PLACE_LEN + 2, RECORD_LEN = 2 * SHOWN_LEN + 96 };

static const double PUBLISH_S = 0.1, HEARTBEAT_S = 1.0;
/* A rank not heard from for this long is silent: stopped or frozen. */
static const double SILENT_S = 2.5;
/* How long the publisher and a reader wait for the store: a reader asks
 * after a collective has already timed out, and rank 0 (the store) may be
 * the rank that stopped. */
static const double STORE_WAIT_S = 3.0;
/* A rank that reached this one's place more than this after it did was
 * elsewhere meanwhile: it is named, with where it was. */
static const double LATE_S = 1.0;

static const char NO_ANSWER[] = "the store that rank 0 serves, which holds where the ranks were, did not answer: "
                                "rank 0 is stopped, frozen or gone";

struct DdpWhereabouts {
    int rank, world;
    pthread_mutex_t lock; /* the place, and stop */
    pthread_cond_t wake;
    int64_t step, prev_step;
    char place[DDP_PLACE_LEN], detail[DDP_PLACE_LEN];
    char prev_place[SHOWN_LEN];   /* as shown, with the detail it last had */
    double since, prev_since; /* wall-clock seconds */
    uint64_t version;     /* bumped by each change of place */
    int stop;
    pthread_t thread;
    int running;
    pthread_mutex_t store_lock; /* one request at a time on STORE */
    DdpStore *store;            /* NULL after a failure, until reconnected */
    DdpTopology topo;           /* where the store is */
};

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* W's place as shown (under W's lock): "backward, past conv2". */
static void shown_place(const DdpWhereabouts *w, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s", w->place, w->detail[0] ? ", " : "", w->detail);
}

static void place_key(char *key, size_t len, int rank)
{
    snprintf(key, len, "ddp/place/%d", rank);
}

static void *publish(void *arg)
{
    DdpWhereabouts *w = arg;
    uint64_t published = 0;
    double published_at = 0;
    pthread_mutex_lock(&w->lock);
    while (!w->stop) {
        struct timespec until = ddp_abs_time(ddp_now() + PUBLISH_S);
        pthread_cond_timedwait(&w->wake, &w->lock, &until);
        if (w->stop || (w->version == published && ddp_now() - published_at < HEARTBEAT_S))
            continue;
        char record[RECORD_LEN], key[32], place[SHOWN_LEN];
        shown_place(w, place, sizeof place);
        snprintf(record, sizeof record, "%.3f\t%.3f %lld %s\t%.3f %lld %s", wall_now(), w->since,
                 (long long)w->step, place, w->prev_since, (long long)w->prev_step, w->prev_place);
        published = w->version;
        published_at = ddp_now();
        pthread_mutex_unlock(&w->lock);
        place_key(key, sizeof key, w->rank);
        pthread_mutex_lock(&w->store_lock);
        /* A reply that came too late leaves a connection out of step: a
         * new one, at the next heartbeat. If rank 0 is gone, none will do,
         * and a reader says so. */
        for (int tries = 0; tries < 2; tries++) { /* a connection a reader broke, then a new one */
            if (!w->store && ddp_store_connect(&w->store, &w->topo, STORE_WAIT_S) != DDP_OK)
                w->store = NULL;
            if (w->store && ddp_store_set(w->store, key, record, strlen(record)) == DDP_OK)
                break;
            ddp_store_close(w->store);
            w->store = NULL;
        }
        pthread_mutex_unlock(&w->store_lock);
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

DdpStatus ddp_whereabouts_open(DdpWhereabouts **out, const DdpTopology *t)
{
    *out = NULL;
    DdpWhereabouts *w = calloc(1, sizeof *w);
    if (!w)
        return DDP_ERR(DDP_FAIL, "out of memory");
    w->rank = t->rank;
    w->world = t->world_size;
    w->topo = *t;
    w->since = wall_now();
    snprintf(w->place, sizeof w->place, "start-up");
    snprintf(w->prev_place, sizeof w->prev_place, "start-up");
    w->prev_since = w->since;
    w->version = 1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->store_lock, NULL);
    pthread_cond_init(&w->wake, &ca);
    pthread_condattr_destroy(&ca);
    DdpStatus st = ddp_store_connect(&w->store, t, STORE_WAIT_S);
    if (st == DDP_OK && pthread_create(&w->thread, NULL, publish, w) != 0)
        st = DDP_ERR(DDP_FAIL, "could not start the thread that publishes this rank's place");
    if (st != DDP_OK) {
        ddp_whereabouts_close(w);
        return st;
    }
    w->running = 1;
    pthread_setname_np(w->thread, "ddp-whereabouts");
    *out = w;
    return DDP_OK;
}

void ddp_whereabouts_note(DdpWhereabouts *w, int64_t step, const char *place)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    if (step != w->step || strncmp(place, w->place, sizeof w->place) != 0) {
        w->prev_step = w->step;
        w->prev_since = w->since;
        shown_place(w, w->prev_place, sizeof w->prev_place);
        w->step = step;
        snprintf(w->place, sizeof w->place, "%s", place);
        w->detail[0] = '\0';
        w->since = wall_now();
        w->version++;
    }
    pthread_mutex_unlock(&w->lock);
}

void ddp_whereabouts_detail(DdpWhereabouts *w, const char *detail)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    if (strncmp(detail, w->detail, sizeof w->detail) != 0) {
        snprintf(w->detail, sizeof w->detail, "%s", detail);
        w->version++;
    }
    pthread_mutex_unlock(&w->lock);
}

/* Appends "; " (unless first) and the printf-style text to BUF at *USED. */
__attribute__((format(printf, 4, 5))) static void add(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
    if (*used >= len)
        return;
    if (*used) {
        int n = snprintf(buf + *used, len - *used, "; ");
        *used += n > 0 ? (size_t)n : 0;
        if (*used >= len)
            return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    *used += n > 0 ? (size_t)n : 0;
}

/* One place of a record: "SINCE STEP PLACE". */
typedef struct {
    double since;
    long long step;
    const char *place;
} Place;

static int parse_place(const char *text, Place *p)
{
    int at = 0;
    if (sscanf(text, "%lf %lld %n", &p->since, &p->step, &at) < 2 || !at)
        return 0;
    p->place = text + at;
    return 1;
}

void ddp_whereabouts_others(DdpWhereabouts *w, char *buf, size_t len)
{
    if (!len)
        return;
    buf[0] = '\0';
    if (!w)
        return;
    char mine[SHOWN_LEN];
    pthread_mutex_lock(&w->lock);
    int64_t my_step = w->step;
    double my_since = w->since;
    shown_place(w, mine, sizeof mine);
    pthread_mutex_unlock(&w->lock);
    size_t used = 0;
    int elsewhere = 0;
    double now = wall_now();
    /* The publisher holds the connection for a request at most: while it
     * does for longer, the store does not answer it either. */
    int locked = 0;
    for (double until = ddp_now() + STORE_WAIT_S; !locked && ddp_now() < until;) {
        locked = pthread_mutex_trylock(&w->store_lock) == 0;
        if (!locked) {
            struct timespec nap = {0, 10000000};
            nanosleep(&nap, NULL);
        }
    }
    if (!locked || !w->store) {
        if (locked)
            pthread_mutex_unlock(&w->store_lock);
        snprintf(buf, len, "%s", NO_ANSWER);
        return;
    }
    for (int r = 0; r < w->world; r++) {
        if (r == w->rank)
            continue;
        char key[32], record[RECORD_LEN + 1];
        size_t n = RECORD_LEN;
        int found = 0;
        place_key(key, sizeof key, r);
        if (ddp_store_try_get(w->store, key, 0, record, &n, &found) != DDP_OK) {
            add(buf, len, &used, "%s", NO_ANSWER);
            elsewhere = 1;
            ddp_store_close(w->store); /* out of step now: the publisher opens another */
            w->store = NULL;
            break;
        }
        record[found ? n : 0] = '\0';
        /* "HEARD\tNOW\tBEFORE", split at the tabs */
        char *now_text = found ? strchr(record, '\t') : NULL;
        char *before_text = now_text ? strchr(now_text + 1, '\t') : NULL;
        Place at, prev;
        double heard;
        if (before_text) {
            *now_text++ = '\0';
            *before_text++ = '\0';
        }
        if (!before_text || sscanf(record, "%lf", &heard) != 1 || !parse_place(now_text, &at) ||
            !parse_place(before_text, &prev)) {
            add(buf, len, &used, "rank %d never said where it was", r);
            elsewhere = 1;
            continue;
        }
        int with_me = at.step == my_step && strcmp(at.place, mine) == 0;
        if (now - heard > SILENT_S)
            add(buf, len, &used, "rank %d was last seen %.1f s ago in %s (step %lld), and has been silent since "
                                 "(stopped, or frozen?)", r, now - heard, at.place, at.step);
        else if (!with_me)
            add(buf, len, &used, "rank %d is in %s (step %lld), for %.1f s now", r, at.place, at.step,
                now - at.since);
        else if (at.since > my_since + LATE_S)
            add(buf, len, &used, "rank %d was in %s (step %lld) until %.1f s ago", r, prev.place, prev.step,
                now - at.since);
        else
            continue; /* waiting with this rank all along */
        elsewhere = 1;
    }
    pthread_mutex_unlock(&w->store_lock);
    if (!elsewhere)
        add(buf, len, &used, "every other rank is in %s at step %lld too", mine, (long long)my_step);
}

void ddp_whereabouts_close(DdpWhereabouts *w)
{
    if (!w)
        return;
    if (w->running) {
        pthread_mutex_lock(&w->lock);
        w->stop = 1;
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
    }
    ddp_store_close(w->store);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->store_lock);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
