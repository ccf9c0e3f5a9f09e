/*
 * top_classes.c: an input's likeliest classes, for --predict (top_classes.h).
 */
#include "top_classes.h"

#include <math.h>

enum { MAX_TOP = 256 }; /* --top's limit */

/* Whether class J is among ORDER[0..n). */
static int chosen(const int *order, int n, int j)
{
    for (int r = 0; r < n; r++)
        if (order[r] == j)
            return 1;
    return 0;
}

void ddp_top_classes_print(FILE *out, int64_t input, const float *scores, int classes, int top, int json,
                           double *work)
{
    /* the softmax in double, from the largest score: no overflow */
    double *p = work, sum = 0.0;
    float max = scores[0];
    for (int j = 1; j < classes; j++)
        max = scores[j] > max ? scores[j] : max;
    for (int j = 0; j < classes; j++)
        sum += p[j] = exp((double)scores[j] - (double)max);

    int order[MAX_TOP], n = 0;
    for (; n < top && n < classes && n < MAX_TOP; n++) {
        int best = -1;
        for (int j = 0; j < classes; j++) /* strictly larger: the first of equal scores */
            if (!chosen(order, n, j) && (best < 0 || scores[j] > scores[best]))
                best = j;
        order[n] = best;
    }
    if (json) {
        fprintf(out, "{\"input\": %lld, \"classes\": [", (long long)input);
        for (int r = 0; r < n; r++)
            fprintf(out, r ? ", %d" : "%d", order[r]);
        fputs("], \"probabilities\": [", out);
        for (int r = 0; r < n; r++) {
            /* a score that overflowed float (inf - inf in the softmax) gives
             * NaN, as PyTorch's softmax does; JSON spells it null, as --log */
            const double prob = p[order[r]] / sum;
            if (isfinite(prob))
                fprintf(out, r ? ", %.6g" : "%.6g", prob);
            else
                fputs(r ? ", null" : "null", out);
        }
        fputs("]}\n", out);
    } else {
        fprintf(out, "input %lld:", (long long)input);
        for (int r = 0; r < n; r++) {
            const double prob = p[order[r]] / sum;
            if (isfinite(prob))
                fprintf(out, "%s %d %.4f", r ? "," : "", order[r], prob);
            else
                fprintf(out, "%s %d nan", r ? "," : "", order[r]);
        }
        fputc('\n', out);
    }
}
