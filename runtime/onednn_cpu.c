/*
 * onednn_cpu.c: CPU convolutions by oneDNN, one sample per call (what and
 * why in onednn_cpu.h).
 *
 * Per conv: three convolution primitives made for a batch of 1 and one
 * thread, with the layouts oneDNN prefers ("any"), and the reorders between
 * those layouts and the runtime's NCHW / KCRS. Per thread: a stream, the
 * sample's buffers in oneDNN's layouts, a scratchpad (user-managed, so that
 * threads never share the library's), and for the weight gradient one
 * sample's part and the thread's order-free sums.
 */
#include "onednn_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>  // omp_get_thread_num, omp_set_num_threads: one thread per call
#define ONEDNN_PRAGMA(text) _Pragma(#text)
#define OMP(text) ONEDNN_PRAGMA(omp text)
#else
#define OMP(text)
static int omp_get_thread_num(void) { return 0; }
static void omp_set_num_threads(int n) { (void)n; }
static int omp_get_max_threads(void) { return 1; }
#endif

/* -1 until the environment is read. */
static int allow = -1;

int ddp_onednn_allowed(void)
{
#ifdef DDP_HAVE_DNNL
    if (allow < 0) {
        const char *asked = getenv("DDP_CPU_CONV");
        allow = !(asked && strcmp(asked, "own") == 0);
    }
    return allow;
#else
    return 0;
#endif
}

void ddp_onednn_allow(int on)
{
    allow = on < 0 ? -1 : on != 0;
}

#ifndef DDP_HAVE_DNNL

/* Built without oneDNN (libdnnl-dev was missing): every conv is the
 * runtime's own. */
struct OnednnConv {
    int unused;
};

DdpStatus ddp_onednn_conv_create(OnednnConv **conv, const DdpConvShape *shape, int nthreads, char *why,
                                 size_t len)
{
    (void)shape, (void)nthreads;
    *conv = NULL;
    snprintf(why, len, "oneDNN not built in");
    return DDP_OK;
}
void ddp_onednn_conv_destroy(OnednnConv *conv) { (void)conv; }
const char *ddp_onednn_conv_kernel(const OnednnConv *conv) { (void)conv; return ""; }
void ddp_onednn_conv_forward(OnednnConv *conv, int n, const float *x, const float *w, float *y)
{
    (void)conv, (void)n, (void)x, (void)w, (void)y;
}
void ddp_onednn_conv_backward_data(OnednnConv *conv, int n, const float *dy, const float *w, float *dx,
                                   float beta)
{
    (void)conv, (void)n, (void)dy, (void)w, (void)dx, (void)beta;
}
void ddp_onednn_conv_backward_filter(OnednnConv *conv, int n, const float *x, const float *dy, DdpGrad *dw,
                                     float beta)
{
    (void)conv, (void)n, (void)x, (void)dy, (void)dw, (void)beta;
}
int ddp_onednn_conv_failed(const OnednnConv *conv, const char **what, int *status)
{
    (void)conv, (void)what, (void)status;
    return 0;
}

#else

#include <oneapi/dnnl/dnnl.h>

/* The buffers in oneDNN's layouts: each thread's for one sample, then the
 * two copies of the weights that all threads read. */
enum { X_FWD, Y_FWD, DY_DATA, DX_DATA, X_FILTER, DY_FILTER, DW_FILTER, SAMPLE_BUFFERS, W_FWD = SAMPLE_BUFFERS,
       W_DATA, BUFFERS };

/* The reorders: from the runtime's layout into a buffer (x, dy, w), or out
 * of one (y, dx, the weight gradient's part); indexed by the buffer. */
static const struct {
    int plain;     /* 0: x's (one sample, NCHW), 1: y's (one sample), 2: w's (KCRS) */
    int into_buf;  /* 1: plain -> buffer, 0: buffer -> plain */
} REORDERS[BUFFERS] = {
    [X_FWD] = {0, 1},    [Y_FWD] = {1, 0},    [DY_DATA] = {1, 1}, [DX_DATA] = {0, 0},
    [X_FILTER] = {0, 1}, [DY_FILTER] = {1, 1}, [DW_FILTER] = {2, 0},
    [W_FWD] = {2, 1},    [W_DATA] = {2, 1},
};

typedef struct {
    dnnl_stream_t stream;
    dnnl_memory_t plain[3];            /* x, y, w: no memory of their own, pointed at each call's */
    dnnl_memory_t buf[SAMPLE_BUFFERS]; /* this thread's, in oneDNN's layouts */
    dnnl_memory_t scratch;
    float *part, *dx; /* one sample's weight gradient (KCRS), and input gradient when added to dx */
    double *sum_hi, *sum_lo; /* this thread's order-free sums of the weight gradient */
} Thread;

struct OnednnConv {
    DdpConvShape sh;
    size_t x_floats, y_floats, w_floats; /* one sample's x, y; the weights */
    dnnl_engine_t engine;
    dnnl_memory_desc_t plain_md[3], md[BUFFERS];
    dnnl_primitive_t forward, data, filter, reorder[BUFFERS];
    dnnl_memory_t weights[2]; /* W_FWD, W_DATA: shared */
    size_t scratch_bytes;
    char kernel[64];
    int nthreads;
    Thread *threads;
    const char *failed_what; /* the first failure, or NULL */
    int failed_status;
};

/* ---- running --------------------------------------------------------------------- */

static void record_failure(OnednnConv *c, const char *what, dnnl_status_t status)
{
    OMP(critical(onednn_failure))
    if (!c->failed_what) {
        c->failed_what = what;
        c->failed_status = (int)status;
    }
}

/* Runs P on thread T's stream with ARGS and T's scratchpad, and waits. */
static void run(OnednnConv *c, Thread *t, dnnl_primitive_t p, int nargs, const dnnl_exec_arg_t *args,
                const char *what)
{
    dnnl_exec_arg_t all[4];
    memcpy(all, args, (size_t)nargs * sizeof *args);
    all[nargs] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, t->scratch};
    dnnl_status_t s = dnnl_primitive_execute(p, t->stream, nargs + 1, all);
    if (s == dnnl_success)
        s = dnnl_stream_wait(t->stream);
    if (s != dnnl_success)
        record_failure(c, what, s);
}

/* Reorder I between the plain layout (at DATA) and buffer TO_OR_FROM. */
static void reorder(OnednnConv *c, Thread *t, int i, const void *data, dnnl_memory_t buffer)
{
    dnnl_memory_t plain = t->plain[REORDERS[i].plain];
    dnnl_status_t s = dnnl_memory_set_data_handle(plain, (void *)data);
    if (s != dnnl_success) {
        record_failure(c, "setting a buffer", s);
        return;
    }
    const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, REORDERS[i].into_buf ? plain : buffer},
                                     {DNNL_ARG_TO, REORDERS[i].into_buf ? buffer : plain}};
    run(c, t, c->reorder[i], 2, args, "a reorder");
}

/* This thread's resources, single-threaded inside oneDNN: the primitives
 * were made for one thread, and a oneDNN loop that asks for the threads
 * must get one, not the team's count. */
static Thread *this_thread(OnednnConv *c)
{
    omp_set_num_threads(1);
    return &c->threads[omp_get_thread_num()];
}

/* ---- the three calls ----------------------------------------------------------------- */

void ddp_onednn_conv_forward(OnednnConv *c, int n, const float *x, const float *w, float *y)
{
    OMP(parallel num_threads(c->nthreads))
    {
        Thread *t = this_thread(c);
        OMP(single)
        reorder(c, t, W_FWD, w, c->weights[0]);
        OMP(for schedule(static))
        for (int s = 0; s < n; s++) {
            reorder(c, t, X_FWD, x + (size_t)s * c->x_floats, t->buf[X_FWD]);
            const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, t->buf[X_FWD]},
                                             {DNNL_ARG_WEIGHTS, c->weights[0]},
                                             {DNNL_ARG_DST, t->buf[Y_FWD]}};
            run(c, t, c->forward, 3, args, "convolution forward");
            reorder(c, t, Y_FWD, y + (size_t)s * c->y_floats, t->buf[Y_FWD]);
        }
    }
}

void ddp_onednn_conv_backward_data(OnednnConv *c, int n, const float *dy, const float *w, float *dx,
                                   float beta)
{
    OMP(parallel num_threads(c->nthreads))
    {
        Thread *t = this_thread(c);
        OMP(single)
        reorder(c, t, W_DATA, w, c->weights[1]);
        OMP(for schedule(static))
        for (int s = 0; s < n; s++) {
            reorder(c, t, DY_DATA, dy + (size_t)s * c->y_floats, t->buf[DY_DATA]);
            const dnnl_exec_arg_t args[3] = {{DNNL_ARG_DIFF_DST, t->buf[DY_DATA]},
                                             {DNNL_ARG_WEIGHTS, c->weights[1]},
                                             {DNNL_ARG_DIFF_SRC, t->buf[DX_DATA]}};
            run(c, t, c->data, 3, args, "convolution backward data");
            float *out = dx + (size_t)s * c->x_floats;
            if (beta == 0.0f) { /* dx's old contents ignored */
                reorder(c, t, DX_DATA, out, t->buf[DX_DATA]);
                continue;
            }
            reorder(c, t, DX_DATA, t->dx, t->buf[DX_DATA]);
            for (size_t i = 0; i < c->x_floats; i++)
                out[i] = beta == 1.0f ? out[i] + t->dx[i] : beta * out[i] + t->dx[i];
        }
    }
}

void ddp_onednn_conv_backward_filter(OnednnConv *c, int n, const float *x, const float *dy, DdpGrad *dw,
                                     float beta)
{
    OMP(parallel num_threads(c->nthreads))
    {
        Thread *t = this_thread(c);
        memset(t->sum_hi, 0, c->w_floats * sizeof *t->sum_hi);
        memset(t->sum_lo, 0, c->w_floats * sizeof *t->sum_lo);
        OMP(for schedule(static))
        for (int s = 0; s < n; s++) {
            reorder(c, t, X_FILTER, x + (size_t)s * c->x_floats, t->buf[X_FILTER]);
            reorder(c, t, DY_FILTER, dy + (size_t)s * c->y_floats, t->buf[DY_FILTER]);
            const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, t->buf[X_FILTER]},
                                             {DNNL_ARG_DIFF_DST, t->buf[DY_FILTER]},
                                             {DNNL_ARG_DIFF_WEIGHTS, t->buf[DW_FILTER]}};
            run(c, t, c->filter, 3, args, "convolution backward weights");
            reorder(c, t, DW_FILTER, t->part, t->buf[DW_FILTER]);
            /* the sample's part, the same bits in any batch: one part of
             * the sums */
            ddp_exact_add_floats(t->sum_hi, t->sum_lo, t->part, (int)c->w_floats, 0, &ddp_grad_window);
        }
        /* dw = (beta ? dw : the empty sums) + every thread's sums: sums of
         * grid multiples, exact in any order (the implicit barrier above
         * has every thread's finished) */
        OMP(for schedule(static))
        for (size_t i = 0; i < c->w_floats; i++) {
            DdpExact total = {0.0, 0.0};
            for (int k = 0; k < c->nthreads; k++)
                ddp_exact_merge(&total, (DdpExact){c->threads[k].sum_hi[i], c->threads[k].sum_lo[i]});
            if (beta == 0.0f)
                dw[i] = total;
            else
                ddp_exact_merge(&dw[i], total);
        }
    }
}

int ddp_onednn_conv_failed(const OnednnConv *c, const char **what, int *status)
{
    if (!c->failed_what)
        return 0;
    *what = c->failed_what;
    *status = c->failed_status;
    return 1;
}

const char *ddp_onednn_conv_kernel(const OnednnConv *c)
{
    return c->kernel;
}

/* ---- making one ------------------------------------------------------------------------ */

void ddp_onednn_conv_destroy(OnednnConv *c)
{
    if (!c)
        return;
    for (int k = 0; c->threads && k < c->nthreads; k++) {
        Thread *t = &c->threads[k];
        for (int i = 0; i < 3; i++)
            dnnl_memory_destroy(t->plain[i]);
        for (int i = 0; i < SAMPLE_BUFFERS; i++)
            dnnl_memory_destroy(t->buf[i]);
        dnnl_memory_destroy(t->scratch);
        if (t->stream)
            dnnl_stream_destroy(t->stream);
        free(t->part), free(t->dx), free(t->sum_hi), free(t->sum_lo);
    }
    free(c->threads);
    for (int i = 0; i < 2; i++)
        dnnl_memory_destroy(c->weights[i]);
    dnnl_primitive_destroy(c->forward);
    dnnl_primitive_destroy(c->data);
    dnnl_primitive_destroy(c->filter);
    for (int i = 0; i < BUFFERS; i++)
        dnnl_primitive_destroy(c->reorder[i]);
    if (c->engine)
        dnnl_engine_destroy(c->engine);
    free(c);
}

/* A direct kernel (just-in-time or brgemm), not oneDNN's reference loops
 * nor its im2col + GEMM, which are slower than the runtime's own. */
static int direct_kernel(const char *impl)
{
    return (strncmp(impl, "jit:", 4) == 0 || strncmp(impl, "brg", 3) == 0) && !strstr(impl, "gemm");
}

/* A primitive descriptor's implementation name. */
static const char *impl_of(const_dnnl_primitive_desc_t pd)
{
    const char *impl = "";
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
        impl = "";
    return impl;
}

static void note_scratch(OnednnConv *c, const_dnnl_primitive_desc_t pd)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t bytes = md ? dnnl_memory_desc_get_size(md) : 0;
    c->scratch_bytes = bytes > c->scratch_bytes ? bytes : c->scratch_bytes;
}

/* The primitive for PD (destroyed after), its scratch noted. */
static dnnl_status_t make_primitive(OnednnConv *c, dnnl_primitive_desc_t pd, dnnl_primitive_t *p)
{
    note_scratch(c, pd);
    dnnl_status_t s = dnnl_primitive_create(p, pd);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

/* The three convolutions, each with the layouts it prefers; 1 where one of
 * them has no direct kernel (WHY says which). */
static dnnl_status_t make_convolutions(OnednnConv *c, const_dnnl_primitive_attr_t attr, int *refused, char *why,
                                       size_t len)
{
    const DdpConvShape *sh = &c->sh;
    dnnl_dims_t xd = {1, sh->c, sh->h, sh->w}, wd = {sh->k, sh->c, sh->r, sh->s}, yd = {1, sh->k, sh->out_h, sh->out_w};
    dnnl_dims_t strides = {sh->stride, sh->stride}, pad_l = {sh->pad, sh->pad};
    /* the right and bottom padding that the output's size uses (less than
     * pad where the stride leaves the last rows unread) */
    dnnl_dims_t pad_r = {(sh->out_h - 1) * sh->stride + sh->r - sh->h - sh->pad,
                         (sh->out_w - 1) * sh->stride + sh->s - sh->w - sh->pad};
    dnnl_memory_desc_t x, w, y;
    dnnl_status_t s;
    if ((s = dnnl_memory_desc_init_by_tag(&x, 4, xd, dnnl_f32, dnnl_format_tag_any)) ||
        (s = dnnl_memory_desc_init_by_tag(&w, 4, wd, dnnl_f32, dnnl_format_tag_any)) ||
        (s = dnnl_memory_desc_init_by_tag(&y, 4, yd, dnnl_f32, dnnl_format_tag_any)))
        return s;
    dnnl_convolution_desc_t fd, dd, wgd;
    dnnl_primitive_desc_t fpd = NULL, dpd = NULL, wpd = NULL;
    if ((s = dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &x, &w, NULL,
                                                &y, strides, pad_l, pad_r)) ||
        (s = dnnl_convolution_backward_data_desc_init(&dd, dnnl_convolution_direct, &x, &w, &y, strides, pad_l,
                                                      pad_r)) ||
        (s = dnnl_convolution_backward_weights_desc_init(&wgd, dnnl_convolution_direct, &x, &w, NULL, &y, strides,
                                                         pad_l, pad_r)) ||
        (s = dnnl_primitive_desc_create(&fpd, &fd, attr, c->engine, NULL)) ||
        (s = dnnl_primitive_desc_create(&dpd, &dd, attr, c->engine, fpd)) ||
        (s = dnnl_primitive_desc_create(&wpd, &wgd, attr, c->engine, fpd))) {
        dnnl_primitive_desc_destroy(fpd), dnnl_primitive_desc_destroy(dpd), dnnl_primitive_desc_destroy(wpd);
        return s;
    }
    const char *impls[3] = {impl_of(fpd), impl_of(dpd), impl_of(wpd)};
    static const char *const passes[3] = {"forward", "backward data", "backward weights"};
    for (int i = 0; i < 3; i++)
        if (!direct_kernel(impls[i]) && !*refused) {
            *refused = 1;
            snprintf(why, len, "oneDNN has no direct kernel for its %s (%s)", passes[i], impls[i]);
        }
    snprintf(c->kernel, sizeof c->kernel, "%s", impls[0]);
    c->md[X_FWD] = *dnnl_primitive_desc_query_md(fpd, dnnl_query_src_md, 0);
    c->md[W_FWD] = *dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0);
    c->md[Y_FWD] = *dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0);
    c->md[DY_DATA] = *dnnl_primitive_desc_query_md(dpd, dnnl_query_diff_dst_md, 0);
    c->md[W_DATA] = *dnnl_primitive_desc_query_md(dpd, dnnl_query_weights_md, 0);
    c->md[DX_DATA] = *dnnl_primitive_desc_query_md(dpd, dnnl_query_diff_src_md, 0);
    c->md[X_FILTER] = *dnnl_primitive_desc_query_md(wpd, dnnl_query_src_md, 0);
    c->md[DY_FILTER] = *dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_dst_md, 0);
    c->md[DW_FILTER] = *dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_weights_md, 0);
    dnnl_status_t made[3] = {make_primitive(c, fpd, &c->forward), make_primitive(c, dpd, &c->data),
                             make_primitive(c, wpd, &c->filter)};
    for (int i = 0; i < 3; i++)
        if (made[i])
            return made[i];
    return dnnl_success;
}

static dnnl_status_t make_reorders(OnednnConv *c, const_dnnl_primitive_attr_t attr)
{
    for (int i = 0; i < BUFFERS; i++) {
        const dnnl_memory_desc_t *plain = &c->plain_md[REORDERS[i].plain], *buf = &c->md[i];
        dnnl_primitive_desc_t pd;
        dnnl_status_t s = REORDERS[i].into_buf ? dnnl_reorder_primitive_desc_create(&pd, plain, c->engine, buf,
                                                                                   c->engine, attr)
                                               : dnnl_reorder_primitive_desc_create(&pd, buf, c->engine, plain,
                                                                                   c->engine, attr);
        if (s || (s = make_primitive(c, pd, &c->reorder[i])))
            return s;
    }
    return dnnl_success;
}

static dnnl_status_t make_threads(OnednnConv *c)
{
    c->threads = calloc((size_t)c->nthreads, sizeof *c->threads);
    if (!c->threads)
        return dnnl_out_of_memory;
    dnnl_memory_desc_t scratch_md;
    dnnl_dims_t scratch_dims = {(dnnl_dim_t)(c->scratch_bytes ? c->scratch_bytes : 1)};
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(&scratch_md, 1, scratch_dims, dnnl_u8, dnnl_a);
    for (int k = 0; k < c->nthreads && !s; k++) {
        Thread *t = &c->threads[k];
        s = dnnl_stream_create(&t->stream, c->engine, dnnl_stream_default_flags);
        for (int i = 0; i < 3 && !s; i++)
            s = dnnl_memory_create(&t->plain[i], &c->plain_md[i], c->engine, DNNL_MEMORY_NONE);
        for (int i = 0; i < SAMPLE_BUFFERS && !s; i++)
            s = dnnl_memory_create(&t->buf[i], &c->md[i], c->engine, DNNL_MEMORY_ALLOCATE);
        if (!s)
            s = dnnl_memory_create(&t->scratch, &scratch_md, c->engine, DNNL_MEMORY_ALLOCATE);
        t->part = malloc(c->w_floats * sizeof *t->part);
        t->dx = malloc(c->x_floats * sizeof *t->dx);
        t->sum_hi = malloc(c->w_floats * sizeof *t->sum_hi);
        t->sum_lo = malloc(c->w_floats * sizeof *t->sum_lo);
        if (!s && !(t->part && t->dx && t->sum_hi && t->sum_lo))
            s = dnnl_out_of_memory;
    }
    for (int i = 0; i < 2 && !s; i++)
        s = dnnl_memory_create(&c->weights[i], &c->md[W_FWD + i], c->engine, DNNL_MEMORY_ALLOCATE);
    return s;
}

/* Each call twice on the same random sample: the same bits, or oneDNN is
 * not used for this conv. */
static int same_bits_twice(OnednnConv *c)
{
    const size_t xn = c->x_floats, yn = c->y_floats, wn = c->w_floats;
    float *x = malloc(xn * sizeof *x), *w = malloc(wn * sizeof *w), *dy = malloc(yn * sizeof *dy);
    float *out[2] = {malloc((xn > yn ? xn : yn) * sizeof(float)), malloc((xn > yn ? xn : yn) * sizeof(float))};
    DdpGrad *dw[2] = {malloc(wn * sizeof(DdpGrad)), malloc(wn * sizeof(DdpGrad))};
    int same = x && w && dy && out[0] && out[1] && dw[0] && dw[1];
    unsigned state = 12345u;
    for (size_t i = 0; same && i < (xn > yn ? xn : yn); i++) {
        state = state * 1664525u + 1013904223u;
        float v = (float)(state >> 8) / 16777216.0f - 0.5f;
        if (i < xn)
            x[i] = v;
        if (i < yn)
            dy[i] = v * 0.5f;
        if (i < wn)
            w[i] = v * 0.25f;
    }
    for (int pass = 0; same && pass < 3; pass++) {
        for (int k = 0; k < 2; k++) {
            if (pass == 0)
                ddp_onednn_conv_forward(c, 1, x, w, out[k]);
            else if (pass == 1)
                ddp_onednn_conv_backward_data(c, 1, dy, w, out[k], 0.0f);
            else
                ddp_onednn_conv_backward_filter(c, 1, x, dy, dw[k], 0.0f);
        }
        same = pass < 2 ? !memcmp(out[0], out[1], (pass == 0 ? yn : xn) * sizeof(float))
                        : !memcmp(dw[0], dw[1], wn * sizeof(DdpGrad));
    }
    free(x), free(w), free(dy), free(out[0]), free(out[1]), free(dw[0]), free(dw[1]);
    return same && !c->failed_what;
}

DdpStatus ddp_onednn_conv_create(OnednnConv **conv, const DdpConvShape *shape, int nthreads, char *why,
                                 size_t len)
{
    *conv = NULL;
    if (!ddp_onednn_allowed()) {
        snprintf(why, len, "DDP_CPU_CONV=own");
        return DDP_OK;
    }
    if (shape->groups != 1) {
        snprintf(why, len, "grouped: oneDNN not used");
        return DDP_OK;
    }
    OnednnConv *c = calloc(1, sizeof *c);
    if (!c)
        return DDP_ERR(DDP_FAIL, "out of memory planning a conv");
    c->sh = *shape;
    c->nthreads = nthreads > 0 ? nthreads : 1;
    c->x_floats = (size_t)shape->c * shape->h * shape->w;
    c->y_floats = (size_t)shape->k * shape->out_h * shape->out_w;
    c->w_floats = (size_t)shape->k * shape->c * shape->r * shape->s;
    dnnl_dims_t xd = {1, shape->c, shape->h, shape->w}, yd = {1, shape->k, shape->out_h, shape->out_w};
    dnnl_dims_t wd = {shape->k, shape->c, shape->r, shape->s};
    /* Made for one thread: oneDNN sizes its work split by the threads it
     * sees when a primitive is made. */
    const int threads_before = omp_get_max_threads();
    omp_set_num_threads(1);
    dnnl_primitive_attr_t attr = NULL;
    int refused = 0;
    dnnl_status_t s = dnnl_engine_create(&c->engine, dnnl_cpu, 0);
    if (!s)
        s = dnnl_primitive_attr_create(&attr);
    if (!s)
        s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (!s && !(s = dnnl_memory_desc_init_by_tag(&c->plain_md[0], 4, xd, dnnl_f32, dnnl_nchw)) &&
        !(s = dnnl_memory_desc_init_by_tag(&c->plain_md[1], 4, yd, dnnl_f32, dnnl_nchw)))
        s = dnnl_memory_desc_init_by_tag(&c->plain_md[2], 4, wd, dnnl_f32, dnnl_oihw);
    if (!s)
        s = make_convolutions(c, attr, &refused, why, len);
    if (!s && !refused)
        s = make_reorders(c, attr);
    if (!s && !refused)
        s = make_threads(c);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    omp_set_num_threads(threads_before);
    if (s == dnnl_out_of_memory) {
        ddp_onednn_conv_destroy(c);
        return DDP_ERR(DDP_FAIL, "out of memory planning a conv with oneDNN");
    }
    if (s || refused) {
        if (s)
            snprintf(why, len, "oneDNN refused the shape (status %d)", (int)s);
        ddp_onednn_conv_destroy(c);
        return DDP_OK;
    }
    if (!same_bits_twice(c)) {
        snprintf(why, len, "oneDNN's %s gave other bits on a second call", c->kernel);
        ddp_onednn_conv_destroy(c);
        return DDP_OK;
    }
    *conv = c;
    return DDP_OK;
}

#endif
