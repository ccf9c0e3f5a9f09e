/*
 * diag.c: messages in the form compilers use.
 *
 *   mnist.net:9:8: error: linear expects 1000 input features, but flatten gives 1024 (64x4x4)
 *       linear 1000->128
 *              ^~~~~~~~~
 *
 * Messages are gathered during a run and printed at the end sorted by
 * position, so that syntax errors (found while parsing) and meaning errors
 * (found afterwards) read top to bottom like the file. The first
 * DIAG_MAX_PRINTED_ERRORS errors are printed, then a count: a binary file fed
 * by mistake must not flood the terminal. Quoted lines are cut to a window
 * around the caret and non-printable bytes shown as '?', whatever the input.
 */
#include "ddpc.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct Diagnostic {
    Severity sev;
    bool has_loc;
    Loc loc;
    int seq;
    char *msg;
};

enum {
    DIAG_MAX_KEPT = 10000,  /* more than this are counted, not kept */
    QUOTE_WINDOW = 120,     /* bytes of a long line shown around the caret */
};

void diag_init(Diag *d, const char *file, const char *src, size_t len, FILE *out)
{
    memset(d, 0, sizeof *d);
    d->file = file;
    /* a UTF-8 byte-order mark first is not shown: the scanner counts line
     * 1's columns from after it (net.l) */
    const bool bom = src && len >= 3 && memcmp(src, "\xEF\xBB\xBF", 3) == 0;
    d->src = bom ? src + 3 : src;
    d->len = bom ? len - 3 : len;
    d->out = out;
}

static void diag_add(Diag *d, Severity sev, bool has_loc, Loc loc, const char *fmt, va_list ap)
{
    if (sev == SEV_ERROR)
        d->errors++;
    else if (sev == SEV_WARNING)
        d->warnings++;
    if (d->count >= DIAG_MAX_KEPT || !d->out)
        return;
    if (d->count == d->cap) {
        int cap = d->cap ? d->cap * 2 : 16;
        Diagnostic *bigger = realloc(d->list, (size_t)cap * sizeof *bigger);
        if (!bigger)
            return;
        d->list = bigger;
        d->cap = cap;
    }
    Diagnostic *g = &d->list[d->count];
    if (vasprintf(&g->msg, fmt, ap) < 0)
        return;
    g->sev = sev;
    g->has_loc = has_loc;
    g->loc = loc;
    g->seq = d->count++;
}

void diag_at(Diag *d, Severity sev, Loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_add(d, sev, true, loc, fmt, ap);
    va_end(ap);
}

void diag_file(Diag *d, Severity sev, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_add(d, sev, false, (Loc){0, 0, 0, 0}, fmt, ap);
    va_end(ap);
}

/* Position order; whole-file messages last, as conclusions; ties keep the
 * order they were raised in, so a note stays after its error. */
static int diag_cmp(const void *pa, const void *pb)
{
    const Diagnostic *a = pa, *b = pb;
    int la = a->has_loc ? a->loc.first_line : INT_MAX, lb = b->has_loc ? b->loc.first_line : INT_MAX;
    if (la != lb)
        return la < lb ? -1 : 1;
    int ca = a->has_loc ? a->loc.first_column : 0, cb = b->has_loc ? b->loc.first_column : 0;
    if (ca != cb)
        return ca < cb ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

/* Start of line LINE (1-based) in the source, and its length without the
 * line end. The index of line starts is built on first use; out of memory
 * for it ends ddpc, as elsewhere (arena.c), where going on without it would
 * scan the whole file for each line shown, for hours on a large one. */
bool diag_line(Diag *d, int line, const char **start, size_t *len)
{
    if (!d->src)
        return false;
    if (!d->line_starts) {
        int cap = 64, n = 0;
        size_t *starts = malloc(sizeof *starts * (size_t)cap);
        for (size_t i = 0; starts && i <= d->len; i++) {
            if (i > 0 && d->src[i - 1] != '\n')
                continue;
            if (n == cap) {
                size_t *bigger = realloc(starts, sizeof *starts * (size_t)(cap *= 2));
                if (!bigger)
                    free(starts);
                starts = bigger;
            }
            if (starts)
                starts[n++] = i;
        }
        if (!starts) {
            fputs("ddpc: internal error: out of memory\n", stderr);
            abort();
        }
        d->line_starts = starts;
        d->n_lines = n;
    }
    if (line < 1 || line > d->n_lines)
        return false;
    const char *p = d->src + d->line_starts[line - 1], *end = d->src + d->len;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = (size_t)((nl ? nl : end) - p);
    if (n > 0 && p[n - 1] == '\r')
        n--;
    *start = p;
    *len = n;
    return true;
}

static void quote_line(Diag *d, const Loc *loc)
{
    const char *line;
    size_t len;
    if (!diag_line(d, loc->first_line, &line, &len))
        return;
    size_t col = loc->first_column > 0 ? (size_t)loc->first_column - 1 : 0;
    if (col > len)
        col = len;
    size_t span = 1;
    if (loc->last_line == loc->first_line && loc->last_column > loc->first_column)
        span = (size_t)(loc->last_column - loc->first_column);
    if (col + span > len)
        span = len > col ? len - col : 1;

    size_t from = 0, to = len;
    if (len > QUOTE_WINDOW) {
        from = col > QUOTE_WINDOW / 3 ? col - QUOTE_WINDOW / 3 : 0;
        to = from + QUOTE_WINDOW < len ? from + QUOTE_WINDOW : len;
        if (span > to - col)
            span = to > col ? to - col : 1;
    }
    const char *lead = from > 0 ? "..." : "";
    fprintf(d->out, "    %s", lead);
    for (size_t i = from; i < to; i++) {
        unsigned char c = (unsigned char)line[i];
        fputc(c == '\t' || (c >= 32 && c < 127) ? c : '?', d->out);
    }
    fprintf(d->out, "%s\n    %s", to < len ? "..." : "", lead);
    for (size_t i = from; i < col; i++)
        fputc(line[i] == '\t' ? '\t' : ' ', d->out);
    fputc('^', d->out);
    for (size_t i = 1; i < span; i++)
        fputc('~', d->out);
    fputc('\n', d->out);
}

static const char *const severity_words[] = {"error", "warning", "note"};

void diag_flush(Diag *d)
{
    if (!d->out) {
        d->count = 0;
        return;
    }
    if (d->count > 1)
        qsort(d->list, (size_t)d->count, sizeof *d->list, diag_cmp);
    int printed_errors = 0;
    for (int i = 0; i < d->count; i++) {
        Diagnostic *g = &d->list[i];
        if (g->sev == SEV_ERROR && ++printed_errors > DIAG_MAX_PRINTED_ERRORS)
            break;
        if (g->has_loc)
            fprintf(d->out, "%s:%d:%d: %s: %s\n", d->file, g->loc.first_line, g->loc.first_column,
                    severity_words[g->sev], g->msg);
        else
            fprintf(d->out, "%s: %s: %s\n", d->file, severity_words[g->sev], g->msg);
        if (g->has_loc)
            quote_line(d, &g->loc);
    }
    if (d->errors > DIAG_MAX_PRINTED_ERRORS)
        fprintf(d->out, "%s: error: too many errors (%d in all); the first %d are shown\n", d->file,
                d->errors, DIAG_MAX_PRINTED_ERRORS);
    for (int i = 0; i < d->count; i++)
        free(d->list[i].msg);
    d->count = 0;
}

void diag_free(Diag *d)
{
    free(d->line_starts);
    d->line_starts = NULL;
    for (int i = 0; i < d->count; i++)
        free(d->list[i].msg);
    free(d->list);
    d->list = NULL;
    d->count = d->cap = 0;
}

const char *diag_quote(Arena *a, const char *s)
{
    enum { MAX_QUOTED = 40 };
    size_t n = strlen(s);
    size_t shown = n > MAX_QUOTED ? MAX_QUOTED : n;
    char *q = arena_alloc(a, shown + 4);
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        q[i] = c >= 32 && c < 127 ? (char)c : '?';
    }
    if (n > MAX_QUOTED)
        memcpy(q + shown, "...", 4);
    return q;
}
