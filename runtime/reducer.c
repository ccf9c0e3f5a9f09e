/*
 * reducer.c: DDP's reducer: buckets of gradients all-reduced while backward
 * goes on (see reducer.h for the calls per step).
 *
 * The buckets come from buckets.c, the same code ddpc's plan uses, over the
 * trainable parameters in reverse order; ddpc lays the gradients out in that
 * order, so bucket b is the slice grads[offset, offset + count) and its
 * all-reduce needs no copy into a separate bucket buffer (DDP's
 * gradient_as_bucket_view). The reducer checks that layout once at creation
 * instead of trusting it every step.
 *
 * Per step it keeps, for each bucket, the number of gradients still to come,
 * and for each parameter whether it was announced. grad_ready runs on the
 * trainer's thread inside the generated backward pass, so it must be cheap
 * and cannot return a status: it decrements a counter, and when the next
 * bucket in order has no gradient pending, launches it (and any completed
 * ones behind it). A failure there (a broken process group, a parameter
 * announced twice) is kept with its message and returned by finish, which is
 * also where the step's checks run: every parameter announced exactly once,
 * which is what keeps all ranks' collectives matched.
 */
#include "reducer.h"
#include "clock.h"     // ddp_now, ddp_abs_time: monotonic seconds

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MESSAGE_LEN = 1024 };

struct DdpReducer {
    DdpProcessGroup *pg;
    const DdpNet *net;
    unsigned char *grads;   /* net->grad_bytes each: grad_type values */
    DdpPgType grad_type;
    DdpBucket *buckets;
    int n_buckets;
    int *order;             /* position in fill order -> net parameter */
    int *bucket_of;         /* net parameter -> bucket; -1 if not trainable */
    int *pending;           /* per bucket: gradients still to come this step */
    unsigned char *seen;    /* per net parameter: announced this step */
    DdpWork **works;        /* per bucket: its all-reduce, while in flight */
    int n_trainable;
    int launched;           /* buckets launched this step: always a prefix, in order */
    int overlap, skip;
    double exposed;
    DdpWhereabouts *whereabouts; /* where places are detailed (NULL: nowhere) */
    char (*param_place)[DDP_PLACE_LEN];  /* per net parameter: "past conv2" */
    char (*bucket_place)[DDP_PLACE_LEN]; /* per bucket: "bucket 3" */
    DdpStatus failure;      /* the first failure of the step, */
    char message[MESSAGE_LEN]; /* and its message */
};

/* Keeps ST's message (just recorded) as the step's failure, if it is the first. */
static void keep_failure(DdpReducer *r, DdpStatus st)
{
    if (r->failure != DDP_OK)
        return;
    r->failure = st;
    snprintf(r->message, sizeof r->message, "%s", ddp_error_message());
}

static void reset_step(DdpReducer *r)
{
    for (int b = 0; b < r->n_buckets; b++) {
        r->pending[b] = r->buckets[b].n_params;
        r->works[b] = NULL;
    }
    memset(r->seen, 0, (size_t)r->net->n_params);
    r->launched = 0;
    r->skip = 0;
    r->failure = DDP_OK;
    r->message[0] = '\0';
}

DdpStatus ddp_reducer_grad_type(const DdpNet *net, DdpPgType *type)
{
    /* floats (GPUs) or two doubles (CPUs: the order-free sums of exact_sum.h,
     * which add as plain doubles, HI to HI and LO to LO) */
    if (net->grad_bytes != sizeof(float) && net->grad_bytes != 2 * sizeof(double))
        return DDP_ERR(DDP_FAIL, "internal error: gradients of %d bytes (a float or two doubles only)",
                       net->grad_bytes);
    *type = net->grad_bytes == sizeof(float) ? DDP_F32 : DDP_F64;
    return DDP_OK;
}

DdpStatus ddp_reducer_create(DdpReducer **out, DdpProcessGroup *pg, const DdpNet *net, void *grads,
                             double bucket_cap_mb)
{
    *out = NULL;
    DdpPgType grad_type = DDP_F32; /* set by ddp_reducer_grad_type */
    DDP_CHECK(ddp_reducer_grad_type(net, &grad_type));
    int n = net->n_params;
    DdpReducer *r = calloc(1, sizeof *r);
    int64_t *sizes = malloc(sizeof *sizes * (size_t)(n + 1));
    if (!r || !sizes) {
        free(r);
        free(sizes);
        return DDP_ERR(DDP_FAIL, "out of memory");
    }
    r->pg = pg;
    r->net = net;
    r->grads = grads;
    r->grad_type = grad_type;
    r->overlap = 1;
    r->buckets = malloc(sizeof *r->buckets * (size_t)(n + 1));
    r->order = malloc(sizeof *r->order * (size_t)(n + 1));
    r->bucket_of = malloc(sizeof *r->bucket_of * (size_t)(n + 1));
    r->pending = malloc(sizeof *r->pending * (size_t)(n + 1));
    r->seen = malloc((size_t)n + 1);
    r->works = malloc(sizeof *r->works * (size_t)(n + 1));
    if (!r->buckets || !r->order || !r->bucket_of || !r->pending || !r->seen || !r->works) {
        free(sizes);
        ddp_reducer_destroy(r);
        return DDP_ERR(DDP_FAIL, "out of memory");
    }

    /* The trainable parameters in reverse order, which must lie one after the
     * other, each at ddp_param_start of the one before's end. */
    int64_t offset = 0;
    for (int i = n - 1; i >= 0; i--) {
        const DdpParamInfo *p = &net->params[i];
        r->bucket_of[i] = -1;
        if (!p->trainable)
            continue;
        offset = ddp_param_start(offset);
        if (p->offset != offset) {
            free(sizes);
            ddp_reducer_destroy(r);
            return DDP_ERR(DDP_FAIL, "internal error: the gradient of %s lies at float %lld, not %lld as the "
                           "buckets need (trainable parameters one after the other on %d floats, last one "
                           "first: a .cu from an older ddpc? generate it again)",
                           p->name, (long long)p->offset, (long long)offset, DDP_PARAM_ALIGN);
        }
        sizes[r->n_trainable] = p->numel;
        r->order[r->n_trainable++] = i;
        offset += p->numel;
    }
    if (offset != net->n_param_floats) {
        free(sizes);
        ddp_reducer_destroy(r);
        return DDP_ERR(DDP_FAIL, "internal error: the trainable parameters hold %lld floats, the net says %lld",
                       (long long)offset, (long long)net->n_param_floats);
    }

    int64_t cap = net->train.bucket_cap_bytes, first = net->train.first_bucket_bytes;
    if (bucket_cap_mb >= 0) {
        /* --bucket-cap-mb X: the same rule and range as the .net's `bucket` line */
        cap = (int64_t)(bucket_cap_mb * 1024.0 * 1024.0);
        first = ddp_first_bucket_bytes(cap);
    } else if (cap <= 0) {
        /* a net that says nothing (written by hand): DDP's defaults */
        cap = 25 * 1024 * 1024;
        first = 1024 * 1024;
    }
    r->n_buckets = ddp_buckets_plan(sizes, r->n_trainable, cap, first, r->buckets);
    free(sizes);
    for (int b = 0; b < r->n_buckets; b++)
        for (int k = 0; k < r->buckets[b].n_params; k++)
            r->bucket_of[r->order[r->buckets[b].first + k]] = b;
    reset_step(r);
    *out = r;
    return DDP_OK;
}

void ddp_reducer_destroy(DdpReducer *r)
{
    if (!r)
        return;
    free(r->buckets);
    free(r->order);
    free(r->bucket_of);
    free(r->pending);
    free(r->seen);
    free(r->works);
    free(r->param_place);
    free(r->bucket_place);
    free(r);
}

DdpStatus ddp_reducer_note_places(DdpReducer *r, DdpWhereabouts *w)
{
    if (!w)
        return DDP_OK;
    int n = r->net->n_params;
    r->param_place = calloc((size_t)n + 1, sizeof *r->param_place);
    r->bucket_place = calloc((size_t)r->n_buckets + 1, sizeof *r->bucket_place);
    if (!r->param_place || !r->bucket_place)
        return DDP_ERR(DDP_FAIL, "out of memory");
    for (int i = 0; i < n; i++) {
        /* the layer: the parameter's name less its last part (conv2.weight) */
        const char *name = r->net->params[i].name, *dot = strrchr(name, '.');
        int layer = dot ? (int)(dot - name) : (int)strlen(name);
        snprintf(r->param_place[i], DDP_PLACE_LEN, "past %.*s", layer, name);
    }
    for (int b = 0; b < r->n_buckets; b++)
        snprintf(r->bucket_place[b], DDP_PLACE_LEN, "bucket %d", b);
    r->whereabouts = w;
    return DDP_OK;
}

/* Launches, in bucket order, every bucket from the next one on whose
 * gradients are all in. */
static void launch_ready(DdpReducer *r)
{
    while (r->launched < r->n_buckets && r->pending[r->launched] == 0 && r->failure == DDP_OK) {
        int b = r->launched;
        const DdpBucket *k = &r->buckets[b];
        char what[32];
        snprintf(what, sizeof what, "bucket %d", b);
        /* SUM: the generated loss gradient is already over the global batch */
        const size_t values = (size_t)r->net->grad_bytes / ddp_pg_type_size(r->grad_type); /* per gradient */
        DdpStatus st = ddp_pg_allreduce_start(r->pg, r->grads + (size_t)k->offset * r->net->grad_bytes,
                                              (size_t)k->count * values, r->grad_type, DDP_SUM, what, &r->works[b]);
        if (st != DDP_OK) {
            keep_failure(r, st);
            return;
        }
        r->launched++;
    }
}

void ddp_reducer_grad_ready(DdpCtx *ctx, int param)
{
    DdpReducer *r = ctx->reducer;
    if (!r)
        return;
    if (param < 0 || param >= r->net->n_params || r->bucket_of[param] < 0) {
        keep_failure(r, DDP_ERR(DDP_FAIL, "internal error: a gradient announced for parameter %d, which is not "
                                "a trainable one", param));
        return;
    }
    if (r->seen[param]) {
        keep_failure(r, DDP_ERR(DDP_FAIL, "internal error: parameter %s got its gradient twice this step",
                                r->net->params[param].name));
        return;
    }
    r->seen[param] = 1;
    if (r->whereabouts)
        ddp_whereabouts_detail(r->whereabouts, r->param_place[param]);
    int b = r->bucket_of[param];
    if (--r->pending[b] == 0 && b == r->launched && r->overlap && !r->skip)
        launch_ready(r);
}

void ddp_reducer_skip(DdpReducer *r) { r->skip = 1; }

void ddp_reducer_set_overlap(DdpReducer *r, int overlap) { r->overlap = overlap != 0; }

DdpStatus ddp_reducer_finish(DdpReducer *r)
{
    double start = ddp_now();
    int skipped = r->skip;
    if (!skipped)
        launch_ready(r);
    /* Every launched bucket is waited for, even after a failure: its buffer is in use until then. */
    for (int b = 0; b < r->launched; b++) {
        if (r->whereabouts)
            ddp_whereabouts_detail(r->whereabouts, r->bucket_place[b]);
        DdpStatus st = ddp_pg_wait(r->pg, r->works[b]);
        r->works[b] = NULL;
        if (st != DDP_OK)
            keep_failure(r, st);
    }
    for (int k = 0; k < r->n_trainable && r->failure == DDP_OK; k++)
        if (!r->seen[r->order[k]])
            keep_failure(r, DDP_ERR(DDP_FAIL, "internal error: parameter %s got no gradient this step",
                                    r->net->params[r->order[k]].name));
    if (!skipped && r->failure == DDP_OK && r->launched != r->n_buckets)
        keep_failure(r, DDP_ERR(DDP_FAIL, "internal error: %d of %d buckets were all-reduced this step",
                                r->launched, r->n_buckets));
    if (!skipped)
        r->exposed += ddp_now() - start;
    DdpStatus st = r->failure;
    char message[MESSAGE_LEN];
    snprintf(message, sizeof message, "%s", r->message);
    reset_step(r);
    if (st != DDP_OK)
        return DDP_ERR(st, "%s", message);
    return DDP_OK;
}

double ddp_reducer_exposed_seconds(const DdpReducer *r) { return r->exposed; }

const DdpBucket *ddp_reducer_buckets(const DdpReducer *r, int *n)
{
    *n = r->n_buckets;
    return r->buckets;
}
