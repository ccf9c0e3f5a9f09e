/*
 * onednn_cpu.c: CPU convolutions by oneDNN, one sample per call (what and
 * why in onednn_cpu.h).
 *
 * Per conv: three convolution primitives made for a batch of 1 and one
 * thread, with the layouts oneDNN prefers ("any"), and the reorders between
 * those layouts and the runtime's NCHW / KCRS. Per thread: a stream, the
 * sample's buffers in oneDNN's layouts and a scratchpad (user-managed, so
 * that threads never share the library's). The weight gradient's sums and
 * parts live in the caller's scratch, which the convs share.
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
static int omp_get_num_threads(void) { return 1; }
static void omp_set_num_threads(int n) { (void)n; }
static int omp_get_max_threads(void) { return 1; }
#endif

/* A test's choice (ddp_onednn_choose), or -1: the environment's. */
static int chosen = -1;

/* DDP_CPU_CONV's choice, or -1 when it names none. */
static int choice_of_environment(void)
{
    const char *asked = getenv("DDP_CPU_CONV");
    if (!asked || !*asked)
        return DDP_CONV_PLANNED;
    if (strcmp(asked, "own") == 0)
        return DDP_CONV_OWN;
    if (strcmp(asked, "onednn") == 0)
        return DDP_CONV_ONEDNN;
    return -1;
}

DdpConvChoice ddp_onednn_choice(void)
{
    if (chosen >= 0)
        return (DdpConvChoice)chosen;
    int choice = choice_of_environment();
    return choice < 0 ? DDP_CONV_PLANNED : (DdpConvChoice)choice;
}

void ddp_onednn_choose(int choice)
{
    chosen = choice < 0 ? -1 : choice;
}

DdpStatus ddp_onednn_check_environment(void)
{
    if (choice_of_environment() < 0)
        return DDP_ERR(DDP_BAD_INPUT, "DDP_CPU_CONV=%s: say own (every conv on the runtime's own kernels) or onednn "
                       "(every conv pass oneDNN has a direct kernel for), or leave it unset",
                       getenv("DDP_CPU_CONV"));
    return DDP_OK;
}

int ddp_onednn_built_in(void)
{
#ifdef DDP_HAVE_DNNL
    return 1;
#else
    return 0;
#endif
}

/* Why a conv is not for oneDNN before oneDNN is asked: 1 with WHY filled,
 * or 0. */
static int refused_up_front(const DdpConvShape *shape, char *why, size_t len)
{
    const char *reason = !ddp_onednn_built_in()                 ? "oneDNN not built in"
                         : ddp_onednn_choice() == DDP_CONV_OWN ? "DDP_CPU_CONV=own"
                         : shape->groups != 1                  ? "grouped"
                                                               : NULL;
    if (reason)
        snprintf(why, len, "%s", reason);
    return reason != NULL;
}

#ifndef DDP_HAVE_DNNL

/* Built without oneDNN (no libdnnl-dev 2.x): every conv is the runtime's own. */
struct OnednnConv {
    int unused;
};

DdpStatus ddp_onednn_conv_create(OnednnConv **conv, const DdpConvShape *shape, int passes, int nthreads,
                                 char *why, size_t len)
{
    (void)passes, (void)nthreads;
    *conv = NULL;
    if (len)
        *why = 0;
    refused_up_front(shape, why, len);
    return DDP_OK;
}
void ddp_onednn_conv_destroy(OnednnConv *conv) { (void)conv; }
int ddp_onednn_avx512(void) { return 0; }
const char *ddp_onednn_conv_kernel(const OnednnConv *conv, int pass)
{
    (void)conv, (void)pass;
    return "";
}
size_t ddp_onednn_conv_scratch_bytes(const OnednnConv *conv)
{
    (void)conv;
    return 0;
}
void ddp_onednn_conv_forward(OnednnConv *conv, int n, const float *x, const float *w, float *y)
{
    (void)conv, (void)n, (void)x, (void)w, (void)y;
}
void ddp_onednn_conv_backward_data(OnednnConv *conv, void *scratch, int n, const float *dy, const float *w,
                                   float *dx, float beta)
{
    (void)conv, (void)scratch, (void)n, (void)dy, (void)w, (void)dx, (void)beta;
}
void ddp_onednn_conv_backward_filter(OnednnConv *conv, void *scratch, int n, const float *x, const float *dy,
                                     DdpGrad *dw, float beta)
{
    (void)conv, (void)scratch, (void)n, (void)x, (void)dy, (void)dw, (void)beta;
}
int ddp_onednn_conv_failed(const OnednnConv *conv, const char **what, int *status)
{
    (void)conv, (void)what, (void)status;
    return 0;
}

#else

#include <oneapi/dnnl/dnnl.h>

int ddp_onednn_avx512(void)
{
    /* the ISAs are nested bit sets: avx512_core's bits are in every later one */
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

/* The buffers in oneDNN's layouts: each thread's for one sample, then the
 * two copies of the weights that all threads read. */
enum { X_FWD, Y_FWD, DY_DATA, DX_DATA, X_FILTER, DY_FILTER, DW_FILTER, SAMPLE_BUFFERS, W_FWD = SAMPLE_BUFFERS,
       W_DATA, BUFFERS };

/* The reorders: from the runtime's layout into a buffer (x, dy, w), or out
 * of one (y, dx, the weight gradient's part); indexed by the buffer. */
enum { PLAIN_X, PLAIN_Y, PLAIN_W }; /* one sample's x (NCHW), one sample's y, the weights (KCRS) */
static const struct {
    int plain, into_buffer;
} REORDERS[BUFFERS] = {
    [X_FWD] = {PLAIN_X, 1},    [Y_FWD] = {PLAIN_Y, 0},     [DY_DATA] = {PLAIN_Y, 1},
    [DX_DATA] = {PLAIN_X, 0},  [X_FILTER] = {PLAIN_X, 1},  [DY_FILTER] = {PLAIN_Y, 1},
    [DW_FILTER] = {PLAIN_W, 0}, [W_FWD] = {PLAIN_W, 1},    [W_DATA] = {PLAIN_W, 1},
};

/* The three convolutions, in this order wherever they are listed. */
enum { FORWARD, DATA, FILTER, CONVS };
static const char *const PASS_NAMES[CONVS] = {"forward", "backward data", "weight gradient"};

typedef struct {
    dnnl_stream_t stream;
    dnnl_memory_t plain[3];            /* PLAIN_*: no memory of their own, pointed at each call's */
    dnnl_memory_t buf[SAMPLE_BUFFERS]; /* this thread's, in oneDNN's layouts */
    dnnl_memory_t scratchpad;
} Thread;

/* A thread's part of the calls' scratch (ddp_onednn_conv_scratch_bytes):
 * the order-free sums of the weight gradient, one sample's part of it, and
 * one sample's input gradient, for beta other than 0. */
typedef struct {
    double *sum_hi, *sum_lo;
    float *part, *dx;
} ThreadScratch;

struct OnednnConv {
    DdpConvShape sh;
    int passes;                          /* DDP_ONEDNN_DATA, DDP_ONEDNN_FILTER */
    size_t x_floats, y_floats, w_floats; /* one sample's x, y; the weights */
    dnnl_engine_t engine;
    dnnl_memory_desc_t plain_md[3], md[BUFFERS];
    dnnl_primitive_t conv[CONVS], reorder[BUFFERS];
    char kernel[CONVS][64];   /* each convolution's implementation */
    dnnl_memory_t weights[2]; /* W_FWD, W_DATA: shared */
    size_t scratchpad_bytes;
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
    all[nargs] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, t->scratchpad};
    dnnl_status_t s = dnnl_primitive_execute(p, t->stream, nargs + 1, all);
    if (s == dnnl_success)
        s = dnnl_stream_wait(t->stream);
    if (s != dnnl_success)
        record_failure(c, what, s);
}

/* Reorder I between the runtime's layout, at DATA, and oneDNN's, in BUFFER. */
static void reorder(OnednnConv *c, Thread *t, int i, const void *data, dnnl_memory_t buffer)
{
    dnnl_memory_t plain = t->plain[REORDERS[i].plain];
    dnnl_status_t s = dnnl_memory_set_data_handle(plain, (void *)data);
    if (s != dnnl_success) {
        record_failure(c, "setting a buffer", s);
        return;
    }
    const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, REORDERS[i].into_buffer ? plain : buffer},
                                     {DNNL_ARG_TO, REORDERS[i].into_buffer ? buffer : plain}};
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

static size_t round_to_line(size_t bytes)
{
    return (bytes + 63) / 64 * 64;
}

static size_t thread_scratch_bytes(const OnednnConv *c)
{
    return round_to_line(2 * c->w_floats * sizeof(double)) + round_to_line(c->w_floats * sizeof(float)) +
           round_to_line(c->x_floats * sizeof(float));
}

static ThreadScratch thread_scratch(const OnednnConv *c, void *scratch, int k)
{
    char *at = (char *)scratch + (size_t)k * thread_scratch_bytes(c);
    ThreadScratch s;
    s.sum_hi = (double *)at;
    s.sum_lo = s.sum_hi + c->w_floats;
    s.part = (float *)(at + round_to_line(2 * c->w_floats * sizeof(double)));
    s.dx = (float *)((char *)s.part + round_to_line(c->w_floats * sizeof(float)));
    return s;
}

size_t ddp_onednn_conv_scratch_bytes(const OnednnConv *c)
{
    return (size_t)c->nthreads * thread_scratch_bytes(c);
}

/* ---- one sample ----------------------------------------------------------------------- */

/* Y = the sample X's output, from the weights in their forward layout. */
static void forward_one(OnednnConv *c, Thread *t, const float *x, float *y)
{
    reorder(c, t, X_FWD, x, t->buf[X_FWD]);
    const dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, t->buf[X_FWD]}, {DNNL_ARG_WEIGHTS, c->weights[0]}, {DNNL_ARG_DST, t->buf[Y_FWD]}};
    run(c, t, c->conv[FORWARD], 3, args, "convolution forward");
    reorder(c, t, Y_FWD, y, t->buf[Y_FWD]);
}

/* DX = the sample's input gradient from DY, weights in their backward layout. */
static void data_one(OnednnConv *c, Thread *t, const float *dy, float *dx)
{
    reorder(c, t, DY_DATA, dy, t->buf[DY_DATA]);
    const dnnl_exec_arg_t args[3] = {{DNNL_ARG_DIFF_DST, t->buf[DY_DATA]},
                                     {DNNL_ARG_WEIGHTS, c->weights[1]},
                                     {DNNL_ARG_DIFF_SRC, t->buf[DX_DATA]}};
    run(c, t, c->conv[DATA], 3, args, "convolution backward data");
    reorder(c, t, DX_DATA, dx, t->buf[DX_DATA]);
}

/* PART = the sample's weight gradient (KCRS, float). */
static void filter_one(OnednnConv *c, Thread *t, const float *x, const float *dy, float *part)
{
    reorder(c, t, X_FILTER, x, t->buf[X_FILTER]);
    reorder(c, t, DY_FILTER, dy, t->buf[DY_FILTER]);
    const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, t->buf[X_FILTER]},
                                     {DNNL_ARG_DIFF_DST, t->buf[DY_FILTER]},
                                     {DNNL_ARG_DIFF_WEIGHTS, t->buf[DW_FILTER]}};
    run(c, t, c->conv[FILTER], 3, args, "convolution backward weights");
    reorder(c, t, DW_FILTER, part, t->buf[DW_FILTER]);
}

/* ---- the three calls ----------------------------------------------------------------- */

void ddp_onednn_conv_forward(OnednnConv *c, int n, const float *x, const float *w, float *y)
{
    OMP(parallel num_threads(c->nthreads))
    {
        Thread *t = this_thread(c);
        OMP(single) /* then a barrier: every thread reads them */
        reorder(c, t, W_FWD, w, c->weights[0]);
        OMP(for schedule(static))
        for (int s = 0; s < n; s++)
            forward_one(c, t, x + (size_t)s * c->x_floats, y + (size_t)s * c->y_floats);
    }
}

void ddp_onednn_conv_backward_data(OnednnConv *c, void *scratch, int n, const float *dy, const float *w,
                                   float *dx, float beta)
{
    OMP(parallel num_threads(c->nthreads))
    {
        Thread *t = this_thread(c);
        const ThreadScratch ts = thread_scratch(c, scratch, omp_get_thread_num());
        OMP(single)
        reorder(c, t, W_DATA, w, c->weights[1]);
        OMP(for schedule(static))
        for (int s = 0; s < n; s++) {
            float *out = dx + (size_t)s * c->x_floats;
            if (beta == 0.0f) { /* dx's old contents ignored */
                data_one(c, t, dy + (size_t)s * c->y_floats, out);
                continue;
            }
            data_one(c, t, dy + (size_t)s * c->y_floats, ts.dx);
            for (size_t i = 0; i < c->x_floats; i++)
                out[i] = beta == 1.0f ? out[i] + ts.dx[i] : beta * out[i] + ts.dx[i];
        }
    }
}

void ddp_onednn_conv_backward_filter(OnednnConv *c, void *scratch, int n, const float *x, const float *dy,
                                     DdpGrad *dw, float beta)
{
    OMP(parallel num_threads(c->nthreads))
    {
        Thread *t = this_thread(c);
        /* The team may be smaller than planned (OMP_DYNAMIC): only its
         * threads' sums are zeroed and merged. */
        const int team = omp_get_num_threads();
        const ThreadScratch ts = thread_scratch(c, scratch, omp_get_thread_num());
        memset(ts.sum_hi, 0, 2 * c->w_floats * sizeof *ts.sum_hi); /* HI, then LO */
        OMP(for schedule(static))
        for (int s = 0; s < n; s++) {
            filter_one(c, t, x + (size_t)s * c->x_floats, dy + (size_t)s * c->y_floats, ts.part);
            /* the sample's part, the same bits in any batch: one part of the sums */
            ddp_exact_add_floats(ts.sum_hi, ts.sum_lo, ts.part, (int)c->w_floats, 0, &ddp_grad_window);
        }
        /* dw = (beta ? dw : the empty sums) + every thread's sums: sums of
         * grid multiples, exact in any order (the implicit barrier above
         * has every thread's finished) */
        OMP(for schedule(static))
        for (size_t i = 0; i < c->w_floats; i++) {
            DdpExact total = {0.0, 0.0};
            for (int k = 0; k < team; k++) {
                const ThreadScratch other = thread_scratch(c, scratch, k);
                ddp_exact_merge(&total, (DdpExact){other.sum_hi[i], other.sum_lo[i]});
            }
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

const char *ddp_onednn_conv_kernel(const OnednnConv *c, int pass)
{
    return c->kernel[pass == DDP_ONEDNN_FILTER ? FILTER : FORWARD];
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
        dnnl_memory_destroy(t->scratchpad);
        if (t->stream)
            dnnl_stream_destroy(t->stream);
    }
    free(c->threads);
    for (int i = 0; i < 2; i++)
        dnnl_memory_destroy(c->weights[i]);
    for (int i = 0; i < CONVS; i++)
        dnnl_primitive_destroy(c->conv[i]);
    for (int i = 0; i < BUFFERS; i++)
        dnnl_primitive_destroy(c->reorder[i]);
    if (c->engine)
        dnnl_engine_destroy(c->engine);
    free(c);
}

/* A direct kernel ("jit:avx512_core", "jit_1x1:avx2", "brgconv:..."), not
 * oneDNN's reference loops nor its im2col + GEMM ("gemm:jit"), which are
 * slower than the runtime's own. */
static int direct_kernel(const char *impl)
{
    const int jit = strncmp(impl, "jit", 3) == 0 && (impl[3] == ':' || impl[3] == '_');
    return (jit || strncmp(impl, "brg", 3) == 0) && !strstr(impl, "gemm");
}

/* A primitive descriptor's implementation name. */
static const char *impl_of(const_dnnl_primitive_desc_t pd)
{
    const char *impl = "";
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
        impl = "";
    return impl;
}

/* The primitive for PD (destroyed after), its scratchpad noted. */
static dnnl_status_t make_primitive(OnednnConv *c, dnnl_primitive_desc_t pd, dnnl_primitive_t *p)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    const size_t bytes = md ? dnnl_memory_desc_get_size(md) : 0;
    c->scratchpad_bytes = bytes > c->scratchpad_bytes ? bytes : c->scratchpad_bytes;
    dnnl_status_t s = dnnl_primitive_create(p, pd);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

/* The three convolutions, each with the layouts it prefers (the backward
 * ones need the forward's descriptor as a hint); *REFUSED where a pass
 * asked for has no direct kernel (WHY says which). */
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
    dnnl_primitive_desc_t pd[CONVS] = {NULL, NULL, NULL};
    if ((s = dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &x, &w, NULL,
                                                &y, strides, pad_l, pad_r)) ||
        (s = dnnl_convolution_backward_data_desc_init(&dd, dnnl_convolution_direct, &x, &w, &y, strides, pad_l,
                                                      pad_r)) ||
        (s = dnnl_convolution_backward_weights_desc_init(&wgd, dnnl_convolution_direct, &x, &w, NULL, &y, strides,
                                                         pad_l, pad_r)) ||
        (s = dnnl_primitive_desc_create(&pd[FORWARD], &fd, attr, c->engine, NULL)) ||
        (s = dnnl_primitive_desc_create(&pd[DATA], &dd, attr, c->engine, pd[FORWARD])) ||
        (s = dnnl_primitive_desc_create(&pd[FILTER], &wgd, attr, c->engine, pd[FORWARD]))) {
        for (int i = 0; i < CONVS; i++)
            dnnl_primitive_desc_destroy(pd[i]);
        return s;
    }
    const int wanted[CONVS] = {c->passes & DDP_ONEDNN_DATA, c->passes & DDP_ONEDNN_DATA,
                               c->passes & DDP_ONEDNN_FILTER};
    for (int i = 0; i < CONVS; i++) {
        snprintf(c->kernel[i], sizeof c->kernel[i], "%s", impl_of(pd[i]));
        if (wanted[i] && !direct_kernel(c->kernel[i]) && !*refused) {
            *refused = 1;
            snprintf(why, len, "oneDNN has no direct kernel for its %s (%s)", PASS_NAMES[i], c->kernel[i]);
        }
    }
    c->md[X_FWD] = *dnnl_primitive_desc_query_md(pd[FORWARD], dnnl_query_src_md, 0);
    c->md[W_FWD] = *dnnl_primitive_desc_query_md(pd[FORWARD], dnnl_query_weights_md, 0);
    c->md[Y_FWD] = *dnnl_primitive_desc_query_md(pd[FORWARD], dnnl_query_dst_md, 0);
    c->md[DY_DATA] = *dnnl_primitive_desc_query_md(pd[DATA], dnnl_query_diff_dst_md, 0);
    c->md[W_DATA] = *dnnl_primitive_desc_query_md(pd[DATA], dnnl_query_weights_md, 0);
    c->md[DX_DATA] = *dnnl_primitive_desc_query_md(pd[DATA], dnnl_query_diff_src_md, 0);
    c->md[X_FILTER] = *dnnl_primitive_desc_query_md(pd[FILTER], dnnl_query_src_md, 0);
    c->md[DY_FILTER] = *dnnl_primitive_desc_query_md(pd[FILTER], dnnl_query_diff_dst_md, 0);
    c->md[DW_FILTER] = *dnnl_primitive_desc_query_md(pd[FILTER], dnnl_query_diff_weights_md, 0);
    dnnl_status_t made = dnnl_success;
    for (int i = 0; i < CONVS; i++) { /* each call destroys its descriptor */
        s = make_primitive(c, pd[i], &c->conv[i]);
        made = made ? made : s;
    }
    return made;
}

static dnnl_status_t make_reorders(OnednnConv *c, const_dnnl_primitive_attr_t attr)
{
    for (int i = 0; i < BUFFERS; i++) {
        const dnnl_memory_desc_t *plain = &c->plain_md[REORDERS[i].plain], *buf = &c->md[i];
        dnnl_primitive_desc_t pd;
        dnnl_status_t s = REORDERS[i].into_buffer
                              ? dnnl_reorder_primitive_desc_create(&pd, plain, c->engine, buf, c->engine, attr)
                              : dnnl_reorder_primitive_desc_create(&pd, buf, c->engine, plain, c->engine, attr);
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
    dnnl_memory_desc_t scratchpad_md;
    dnnl_dims_t scratchpad_dims = {(dnnl_dim_t)(c->scratchpad_bytes ? c->scratchpad_bytes : 1)};
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(&scratchpad_md, 1, scratchpad_dims, dnnl_u8, dnnl_a);
    for (int k = 0; k < c->nthreads && !s; k++) {
        Thread *t = &c->threads[k];
        s = dnnl_stream_create(&t->stream, c->engine, dnnl_stream_default_flags);
        for (int i = 0; i < 3 && !s; i++)
            s = dnnl_memory_create(&t->plain[i], &c->plain_md[i], c->engine, DNNL_MEMORY_NONE);
        for (int i = 0; i < SAMPLE_BUFFERS && !s; i++)
            s = dnnl_memory_create(&t->buf[i], &c->md[i], c->engine, DNNL_MEMORY_ALLOCATE);
        if (!s)
            s = dnnl_memory_create(&t->scratchpad, &scratchpad_md, c->engine, DNNL_MEMORY_ALLOCATE);
    }
    for (int i = 0; i < 2 && !s; i++)
        s = dnnl_memory_create(&c->weights[i], &c->md[W_FWD + i], c->engine, DNNL_MEMORY_ALLOCATE);
    return s;
}

/* Each pass oneDNN is to do, twice on the same random sample, on this
 * thread: 1 when both give the same bits; 0 when not, or when a call
 * failed (WHY says which: the runtime's own code then does the conv); -1
 * when memory ran out. */
static int same_bits_twice(OnednnConv *c, char *why, size_t len)
{
    const size_t xn = c->x_floats, yn = c->y_floats, wn = c->w_floats, most = xn > yn ? xn : yn;
    const size_t out_floats = most > wn ? most : wn; /* the largest result of a pass */
    float *all = malloc((xn + yn + wn + 2 * out_floats) * sizeof *all);
    if (!all) {
        snprintf(why, len, "out of memory checking oneDNN's bits");
        return -1;
    }
    float *x = all, *dy = x + xn, *w = dy + yn, *out[2] = {w + wn, w + wn + out_floats};
    unsigned state = 12345u;
    for (size_t i = 0; i < xn + yn + wn; i++) { /* x, dy, w: uniform in [-0.5, 0.5) */
        state = state * 1664525u + 1013904223u;
        all[i] = (float)(state >> 8) / 16777216.0f - 0.5f;
    }
    Thread *t = &c->threads[0];
    reorder(c, t, W_FWD, w, c->weights[0]);
    reorder(c, t, W_DATA, w, c->weights[1]);
    int same = 1, pass = 0;
    for (; same && pass < CONVS; pass++) {
        if (!(c->passes & (pass == FILTER ? DDP_ONEDNN_FILTER : DDP_ONEDNN_DATA)))
            continue;
        for (int k = 0; k < 2; k++)
            if (pass == FORWARD)
                forward_one(c, t, x, out[k]);
            else if (pass == DATA)
                data_one(c, t, dy, out[k]);
            else
                filter_one(c, t, x, dy, out[k]);
        const size_t count = pass == FORWARD ? yn : pass == DATA ? xn : wn;
        same = !memcmp(out[0], out[1], count * sizeof(float));
    }
    free(all);
    if (c->failed_what) {
        snprintf(why, len, "oneDNN's %s failed (status %d) in a trial call", c->failed_what, c->failed_status);
        return 0;
    }
    if (!same)
        snprintf(why, len, "oneDNN's %s (%s) gave other bits on a second call", PASS_NAMES[pass - 1],
                 c->kernel[pass - 1]);
    return same;
}

DdpStatus ddp_onednn_conv_create(OnednnConv **conv, const DdpConvShape *shape, int passes, int nthreads,
                                 char *why, size_t len)
{
    *conv = NULL;
    if (len)
        *why = 0;
    if (refused_up_front(shape, why, len) || !passes)
        return DDP_OK;
    OnednnConv *c = calloc(1, sizeof *c);
    if (!c)
        return DDP_ERR(DDP_FAIL, "out of memory planning a conv");
    c->sh = *shape;
    c->passes = passes;
    c->nthreads = nthreads > 0 ? nthreads : 1;
    c->x_floats = (size_t)shape->c * shape->h * shape->w;
    c->y_floats = (size_t)shape->k * shape->out_h * shape->out_w;
    c->w_floats = (size_t)shape->k * shape->c * shape->r * shape->s;
    dnnl_dims_t xd = {1, shape->c, shape->h, shape->w}, yd = {1, shape->k, shape->out_h, shape->out_w};
    dnnl_dims_t wd = {shape->k, shape->c, shape->r, shape->s};
    /* Made for one thread: oneDNN sizes its work split by the threads it
     * sees when a primitive is made (and the bits check runs on this one). */
    const int threads_before = omp_get_max_threads();
    omp_set_num_threads(1);
    dnnl_primitive_attr_t attr = NULL;
    int refused = 0;
    dnnl_status_t s = dnnl_engine_create(&c->engine, dnnl_cpu, 0);
    if (!s)
        s = dnnl_primitive_attr_create(&attr);
    if (!s)
        s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (!s && !(s = dnnl_memory_desc_init_by_tag(&c->plain_md[PLAIN_X], 4, xd, dnnl_f32, dnnl_nchw)) &&
        !(s = dnnl_memory_desc_init_by_tag(&c->plain_md[PLAIN_Y], 4, yd, dnnl_f32, dnnl_nchw)))
        s = dnnl_memory_desc_init_by_tag(&c->plain_md[PLAIN_W], 4, wd, dnnl_f32, dnnl_oihw);
    if (!s)
        s = make_convolutions(c, attr, &refused, why, len);
    if (!s && !refused)
        s = make_reorders(c, attr);
    if (!s && !refused)
        s = make_threads(c);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    int same = s || refused ? 0 : same_bits_twice(c, why, len);
    omp_set_num_threads(threads_before);
    if (s == dnnl_out_of_memory || same < 0) {
        ddp_onednn_conv_destroy(c);
        return DDP_ERR(DDP_FAIL, "out of memory planning a conv with oneDNN");
    }
    if (s)
        snprintf(why, len, "oneDNN refused the shape (status %d)", (int)s);
    if (s || refused || !same) {
        ddp_onednn_conv_destroy(c);
        return DDP_OK;
    }
    *conv = c;
    return DDP_OK;
}

#endif
