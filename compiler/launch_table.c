/*
 * launch_table.c: what each launch of a generated program runs on a GPU, for
 * a reader tuning OUT.cu: the comment table at its end, and `ddpc --emit
 * plan`. The emitter notes each launch as it writes it (emit_cu.c); this file
 * keeps the notes and prints them at a batch.
 *
 * A row is a kernel launch or a library call, in the order the program makes
 * them. A kernel's threads and its work per thread come from the arithmetic
 * the launches themselves use (runtime/launch_shape.h for DDP_FOR's grid,
 * channel_split.h for per-channel sums), so the table cannot drift from what
 * runs. "Work" is the most trips one thread makes through its loops: a
 * thread's items times each item's inner loop (a maxpool window's taps, a
 * sample's classes); for a per-channel sum, the (sample, pixel) terms one
 * thread adds. Library calls (cuDNN, cuBLAS) pick their own launches, so
 * their rows name the call only.
 *
 * The table is the gauge for GPU shape: a kernel whose threads work through
 * thousands of elements each (as the bias gradients once did, 36,864 for
 * mnist.net's first) shows at once, and the tests hold every example's under
 * 256 at batch 64.
 */
#include "ddpc.h"

#include <stdlib.h>
#include <string.h>

#include "channel_split.h"  // ddp_channel_groups, ddp_channel_thread_terms: a per-channel sum's split
#include "launch_shape.h"   // DDP_BLOCK, ddp_grid, ddp_items_per_thread: DDP_LAUNCH's grid

typedef enum { ROW_ITEMS, ROW_CHANNELS, ROW_LIBRARY } RowKind;

typedef struct {
    RowKind kind;
    const char *function, *name; /* the name as shown: tagged where made in one kind of step only */
    LaunchWhen when;
    int64_t per_sample, fixed; /* ROW_ITEMS: items = per_sample x batch + fixed */
    int64_t item_work;         /* ROW_ITEMS: inner trips of one item; 0: the batch's size */
    int64_t channels, pixels;  /* ROW_CHANNELS */
} Row;

struct LaunchTable {
    Arena *arena;
    Row *rows;
    int n, cap;
};

LaunchTable *launch_table_new(Arena *a)
{
    LaunchTable *t = arena_alloc(a, sizeof *t);
    t->arena = a;
    return t;
}

/* NAME as the table shows it: forward()'s launches made in one kind of step
 * only say which, and so do eval_step's. */
static const char *shown_name(Arena *a, const char *name, LaunchWhen when)
{
    switch (when) {
    case LAUNCH_ALWAYS: break;
    case LAUNCH_TRAINING: return arena_printf(a, "%s (training)", name);
    case LAUNCH_EVALUATION: return arena_printf(a, "%s (evaluation)", name);
    }
    return arena_strndup(a, name, strlen(name));
}

static Row *add(LaunchTable *t, RowKind kind, const char *function, LaunchWhen when, const char *name)
{
    if (t->n == t->cap) { /* doubling in the arena: the old rows stay, unused, till it is freed */
        int cap = t->cap ? 2 * t->cap : 64;
        Row *rows = arena_alloc(t->arena, sizeof *rows * (size_t)cap);
        if (t->n)
            memcpy(rows, t->rows, sizeof *rows * (size_t)t->n);
        t->rows = rows;
        t->cap = cap;
    }
    Row *r = &t->rows[t->n++];
    *r = (Row){.kind = kind, .function = function, .name = shown_name(t->arena, name, when), .when = when};
    return r;
}

void launch_table_items(LaunchTable *t, const char *function, LaunchWhen when, const char *kernel, int64_t per_sample,
                        int64_t fixed, int64_t item_work)
{
    Row *r = add(t, ROW_ITEMS, function, when, kernel);
    r->per_sample = per_sample;
    r->fixed = fixed;
    r->item_work = item_work;
}

void launch_table_channels(LaunchTable *t, const char *function, LaunchWhen when, const char *kernel,
                           int64_t channels, int64_t pixels)
{
    Row *r = add(t, ROW_CHANNELS, function, when, kernel);
    r->channels = channels;
    r->pixels = pixels;
}

void launch_table_library(LaunchTable *t, const char *function, LaunchWhen when, const char *call)
{
    add(t, ROW_LIBRARY, function, when, call);
}

/* ROW's threads and the most work one of them does, at BATCH samples. */
static void shape_at(const Row *r, int64_t batch, int64_t *threads, int64_t *work)
{
    *threads = *work = 0;
    switch (r->kind) {
    case ROW_ITEMS: {
        int64_t items = r->per_sample * batch + r->fixed;
        *threads = (int64_t)ddp_grid(items) * DDP_BLOCK;
        *work = ddp_items_per_thread(items) * (r->item_work ? r->item_work : batch);
        break;
    }
    case ROW_CHANNELS:
        *threads = r->channels * ddp_channel_groups(r->channels, r->pixels, (int)batch, DDP_BLOCK) * DDP_BLOCK;
        *work = ddp_channel_thread_terms(r->channels, r->pixels, (int)batch, DDP_BLOCK);
        break;
    case ROW_LIBRARY: break;
    }
}


/* The most work one thread does, where, and a training step's launches. */
typedef struct {
    int64_t work;
    const char *kernel; /* NULL: no kernel */
    int kernels, library_calls;
} Worst;

static Worst worst_at(const LaunchTable *t, int64_t batch)
{
    Worst w = {0};
    for (int i = 0; i < t->n; i++) {
        const Row *r = &t->rows[i];
        int64_t threads, work;
        shape_at(r, batch, &threads, &work);
        if (r->when != LAUNCH_EVALUATION) { /* a training step's: forward with train set, loss, backward, optimizer */
            w.kernels += r->kind != ROW_LIBRARY;
            w.library_calls += r->kind == ROW_LIBRARY;
        }
        if (work > w.work) {
            w.work = work;
            w.kernel = r->name;
        }
    }
    return w;
}

/* An empty line of the table: PREFIX without its trailing spaces. */
static void blank_line(FILE *out, const char *prefix)
{
    int len = (int)strlen(prefix);
    while (len > 0 && prefix[len - 1] == ' ')
        len--;
    fprintf(out, "%.*s\n", len, prefix);
}

void launch_table_print(FILE *out, const LaunchTable *t, int64_t batch, const char *prefix)
{
    int width = 6;
    for (int i = 0; i < t->n; i++) {
        int len = (int)strlen(t->rows[i].name);
        width = len > width ? len : width;
    }
    fprintf(out, "%slaunch table at batch %lld: each launch in program order, on a GPU: its threads\n", prefix,
            (long long)batch);
    fprintf(out, "%s(blocks of %d) and the most work one thread does (loop trips: items x inner loop;\n", prefix,
            DDP_BLOCK);
    fprintf(out, "%sper-channel sums: the (sample, pixel) terms it adds). Library calls choose their own.\n", prefix);
    blank_line(out, prefix);
    fprintf(out, "%s%-15s %-*s %11s %11s\n", prefix, "function", width, "launch", "threads", "work/thread");
    for (int i = 0; i < t->n; i++) {
        const Row *r = &t->rows[i];
        int64_t threads, work;
        shape_at(r, batch, &threads, &work);
        if (r->kind == ROW_LIBRARY)
            fprintf(out, "%s%-15s %-*s %11s %11s\n", prefix, r->function, width, r->name, "library", "-");
        else
            fprintf(out, "%s%-15s %-*s %11s %11s\n", prefix, r->function, width, r->name,
                    summary_grouped(t->arena, threads), summary_grouped(t->arena, work));
    }
    Worst w = worst_at(t, batch);
    blank_line(out, prefix);
    fprintf(out, "%sa training step: %d kernel launches and %d library calls from the generated functions\n",
            prefix, w.kernels, w.library_calls);
    fprintf(out, "%s(the runtime's own, such as the bucket all-reduces, come on top);\n", prefix);
    fprintf(out, "%sthe most work of one thread: %s (%s)\n", prefix, summary_grouped(t->arena, w.work),
            w.kernel ? w.kernel : "no kernel");
}
