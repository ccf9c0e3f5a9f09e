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

void ddp_confusion_print(const DdpConfusion *c, FILE *out)
{
    int k = c->classes;
    fprintf(out, "class  samples  correct  accuracy  most often taken for\n");
    for (int label = 0; label < k; label++) {
        const double *row = c->counts + (int64_t)label * k;
        double samples = 0.0;
        int other = -1;
        for (int j = 0; j < k; j++) {
            samples += row[j];
            if (j != label && row[j] > 0 && (other < 0 || row[j] > row[other]))
                other = j;
        }
        fprintf(out, "%5d  %7.0f  %7.0f  ", label, samples, row[label]);
        if (samples > 0)
            fprintf(out, "%8.4f", row[label] / samples);
        else
            fprintf(out, "%8s", "-");
        if (other >= 0)
            fprintf(out, "  %d (%.0f)\n", other, row[other]);
        else
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
