/*
 * confusion.c: the confusion matrix of --eval-only (confusion.h).
 */
#include "confusion.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

DdpStatus ddp_confusion_init(DdpConfusion *c, int classes)
{
    c->classes = classes;
    c->counts = calloc((size_t)classes * (size_t)classes, sizeof *c->counts);
    if (!c->counts)
        return DDP_ERR(DDP_FAIL, "out of memory: a %d x %d confusion matrix", classes, classes);
    return DDP_OK;
}

void ddp_confusion_free(DdpConfusion *c)
{
    free(c->counts);
    c->counts = NULL;
}

void ddp_confusion_add(DdpConfusion *c, const float *scores, const int32_t *labels, int64_t n)
{
    int k = c->classes;
    for (int64_t s = 0; s < n; s++) {
        const float *row = scores + s * k;
        int best = 0;
        for (int j = 1; j < k; j++)
            best = row[j] > row[best] ? j : best; /* the first largest, as the loss kernel */
        if (labels[s] >= 0 && labels[s] < k)
            c->counts[(int64_t)labels[s] * k + best] += 1.0;
    }
}

int64_t ddp_confusion_total(const DdpConfusion *c)
{
    double total = 0.0;
    for (int64_t i = 0; i < (int64_t)c->classes * c->classes; i++)
        total += c->counts[i];
    return (int64_t)total;
}

double ddp_confusion_accuracy(const DdpConfusion *c)
{
    double right = 0.0;
    for (int j = 0; j < c->classes; j++)
        right += c->counts[(int64_t)j * c->classes + j];
    int64_t total = ddp_confusion_total(c);
    return total > 0 ? right / (double)total : NAN;
}

/* Class LABEL as the table shows it: its number, and where the data names
 * it, its name (cut to fit TEXT; bytes a terminal would act on as '?'). */
static void class_text(char *text, size_t len, int label, char *const *names, int64_t n_names)
{
    if (label < n_names)
        snprintf(text, len, "%d %s", label, names[label]);
    else
        snprintf(text, len, "%d", label);
    for (char *p = text; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
}

void ddp_confusion_print(const DdpConfusion *c, char *const *names, int64_t n_names, FILE *out)
{
    int k = c->classes, width = (int)strlen("class");
    char text[96];
    if (!names)
        n_names = 0;
    for (int label = 0; label < k && label < n_names; label++) {
        class_text(text, sizeof text, label, names, n_names);
        width = (int)strlen(text) > width ? (int)strlen(text) : width;
    }
    fprintf(out, "%-*s  samples  correct  accuracy  most often taken for\n", width, "class");
    for (int label = 0; label < k; label++) {
        const double *row = c->counts + (int64_t)label * k;
        double samples = 0.0;
        int other = -1;
        for (int j = 0; j < k; j++) {
            samples += row[j];
            if (j != label && row[j] > 0 && (other < 0 || row[j] > row[other]))
                other = j;
        }
        if (n_names) { /* names: left-aligned, as words are */
            class_text(text, sizeof text, label, names, n_names);
            fprintf(out, "%-*s  %7.0f  %7.0f  ", width, text, samples, row[label]);
        } else {
            fprintf(out, "%5d  %7.0f  %7.0f  ", label, samples, row[label]);
        }
        if (samples > 0)
            fprintf(out, "%8.4f", row[label] / samples);
        else
            fprintf(out, "%8s", "-");
        if (other >= 0) {
            class_text(text, sizeof text, other, names, n_names);
            fprintf(out, "  %s (%.0f)\n", text, row[other]);
        } else
            fprintf(out, "  -\n");
    }
}

char *ddp_confusion_json(const DdpConfusion *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fputc('[', f);
    for (int label = 0; label < c->classes; label++) {
        fputs(label ? ", [" : "[", f);
        for (int j = 0; j < c->classes; j++)
            fprintf(f, j ? ", %.0f" : "%.0f", c->counts[(int64_t)label * c->classes + j]);
        fputc(']', f);
    }
    fputc(']', f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
