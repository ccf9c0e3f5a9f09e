/* conv_choices.c: see conv_choices.h. */
#include "conv_choices.h"
#include "device_rules.h"  // DdpConvMath

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends to BUF as snprintf would at BUF + *USED, counting what it needs. */
__attribute__((format(printf, 4, 5))) static void append(char *buf, size_t len, size_t *used, const char *format,
                                                         ...)
{
    va_list ap;
    va_start(ap, format);
    int wrote = vsnprintf(*used < len ? buf + *used : NULL, *used < len ? len - *used : 0, format, ap);
    va_end(ap);
    if (wrote > 0)
        *used += (size_t)wrote;
}

void ddp_conv_choices_set_device(DdpConvChoices *c, const char *name)
{
    snprintf(c->device, sizeof c->device, "%s", name);
    for (char *p = c->device; *p; p++)
        if (*p == '|')
            *p = '/';
}

size_t ddp_conv_choices_text(const DdpConvChoices *c, char *buf, size_t len)
{
    size_t used = 0;
    append(buf, len, &used, "cudnn=%ld|device=%s|workspace=%lld", c->library, c->device, c->workspace);
    for (int i = 0; i < c->n; i++) {
        const DdpConvChoice *v = &c->convs[i];
        append(buf, len, &used, "|%d:", v->id);
        for (int k = 0; k < 2 * DDP_CONV_DIRECTIONS; k++) {
            const DdpConvAlgo *a = &v->algo[k];
            append(buf, len, &used, "%s%d.%d.%d", k ? "," : "", a->algo, a->math, a->deterministic);
        }
    }
    if (used >= len && len)
        buf[0] = '\0';
    return used;
}

/* A whole number in [LO, HI] at *P, which is moved past it; 0 if none. */
static int number(const char **p, long long lo, long long hi, long long *out)
{
    if (**p < '0' || **p > '9')
        return 0;
    long long x = 0;
    while (**p >= '0' && **p <= '9') {
        const int digit = **p - '0';
        if (x > (hi - digit) / 10) /* 10 x + digit > hi, without overflowing */
            return 0;
        x = 10 * x + digit;
        ++*p;
    }
    *out = x;
    return x >= lo && x <= hi; /* hi < 10: the test above let a digit past it through */
}

static DdpStatus bad(const char *text, const char *what)
{
    return DDP_ERR(DDP_BAD_INPUT, "the convs' recorded cuDNN algorithms are not readable (%s): '%.80s%s'", what,
                   text, strlen(text) > 80 ? "..." : "");
}

/* One conv's "ID:A,A,A,F,F,F" at *P. */
static int conv_choice(const char **p, DdpConvChoice *out)
{
    long long id;
    if (!number(p, 0, INT_MAX, &id) || *(*p)++ != ':')
        return 0;
    out->id = (int)id;
    for (int k = 0; k < 2 * DDP_CONV_DIRECTIONS; k++) {
        long long algo, math, det;
        if ((k && *(*p)++ != ',') || !number(p, 0, DDP_CONV_ALGO_MOST, &algo) || *(*p)++ != '.' ||
            !number(p, 0, DDP_CONV_MATH_LAST, &math) || *(*p)++ != '.' || !number(p, 0, 1, &det))
            return 0;
        out->algo[k] = (DdpConvAlgo){(int)algo, (int)math, (int)det};
    }
    return 1;
}

DdpStatus ddp_conv_choices_parse(const char *text, DdpConvChoices *out)
{
    memset(out, 0, sizeof *out);
    const char *p = text;
    long long library, workspace;
    if (strncmp(p, "cudnn=", 6) != 0)
        return bad(text, "no cudnn=");
    p += 6;
    if (!number(&p, 0, INT_MAX, &library) || strncmp(p, "|device=", 8) != 0)
        return bad(text, "no cuDNN version, or no device=");
    p += 8;
    size_t name = strcspn(p, "|");
    if (name >= sizeof out->device)
        return bad(text, "a device name too long");
    memcpy(out->device, p, name);
    out->device[name] = '\0';
    p += name;
    if (strncmp(p, "|workspace=", 11) != 0)
        return bad(text, "no workspace=");
    p += 11;
    if (!number(&p, 0, LLONG_MAX, &workspace))
        return bad(text, "no workspace size");
    out->library = (long)library;
    out->workspace = workspace;
    size_t convs = 0;
    for (const char *q = p; *q; q++)
        convs += *q == '|';
    out->convs = calloc(convs + 1, sizeof *out->convs);
    if (!out->convs)
        return DDP_ERR(DDP_FAIL, "out of memory");
    for (; *p; out->n++) {
        if (*p++ != '|' || !conv_choice(&p, &out->convs[out->n])) {
            ddp_conv_choices_free(out);
            return bad(text, "a conv's algorithms");
        }
        for (int i = 0; i < out->n; i++)
            if (out->convs[i].id == out->convs[out->n].id) {
                ddp_conv_choices_free(out);
                return bad(text, "a conv named twice");
            }
    }
    return DDP_OK;
}

void ddp_conv_choices_free(DdpConvChoices *c)
{
    free(c->convs);
    c->convs = NULL;
    c->n = 0;
}
