/*
 * What --eval-only and --predict make of scores, on scores made by hand: the
 * confusion matrix (runtime/confusion.c), whose prediction is the first
 * largest score (as the loss kernel counts a correct one), a class's line
 * naming what it is taken for, the log's JSON rows holding the counts; and
 * an input's likeliest classes (runtime/top_classes.c) in the same order,
 * with the softmax's probabilities.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "confusion.h"
#include "testutil.h"
#include "top_classes.h"

static void test_counts_and_ties(void)
{
    DdpConfusion c;
    CU_ASSERT_EQUAL_FATAL(ddp_confusion_init(&c, 3), DDP_OK);
    CU_ASSERT(isnan(ddp_confusion_accuracy(&c)));
    /* four samples: right, right, a tie (the first of 1 and 2 wins: 1), wrong */
    static const float scores[] = {5, 1, 0, 0, 2, 1, -1, 3, 3, 0, 7, -2};
    static const int32_t labels[] = {0, 1, 2, 0};
    ddp_confusion_add(&c, scores, labels, 4);
    CU_ASSERT_EQUAL(ddp_confusion_total(&c), 4);
    CU_ASSERT_DOUBLE_EQUAL(ddp_confusion_accuracy(&c), 0.5, 1e-12);
    CU_ASSERT_EQUAL(c.counts[0 * 3 + 0], 1);
    CU_ASSERT_EQUAL(c.counts[0 * 3 + 1], 1);
    CU_ASSERT_EQUAL(c.counts[1 * 3 + 1], 1);
    CU_ASSERT_EQUAL(c.counts[2 * 3 + 1], 1); /* the tie */

    char *json = ddp_confusion_json(&c);
    CU_ASSERT_STRING_EQUAL(json, "[[1, 1, 0], [0, 1, 0], [0, 1, 0]]");
    free(json);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ddp_confusion_print(&c, NULL, 0, f);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(text, "class  samples  correct  accuracy  most often taken for\n"
                                 "    0        2        1    0.5000  1 (1)\n"
                                 "    1        1        1    1.0000  -\n"
                                 "    2        1        0    0.0000  1 (1)\n");
    free(text);
    /* an image folder's names, left-aligned to the longest, a control
     * byte shown as '?'; a class beyond the names keeps its number */
    char *names[] = {"cat", "dog\nrun", "a_long_class_name"};
    f = open_memstream(&text, &len);
    ddp_confusion_print(&c, names, 2, f);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(text, "class      samples  correct  accuracy  most often taken for\n"
                                 "0 cat            2        1    0.5000  1 dog?run (1)\n"
                                 "1 dog?run        1        1    1.0000  -\n"
                                 "2                1        0    0.0000  1 dog?run (1)\n");
    free(text);
    ddp_confusion_free(&c);
}

static char *top_line(const float *scores, int classes, int top, int json)
{
    char *text = NULL;
    size_t len = 0;
    double work[8];
    FILE *f = open_memstream(&text, &len);
    ddp_top_classes_print(f, 3, scores, classes, top, json, work);
    fclose(f);
    return text;
}

static void test_top_classes(void)
{
    /* log(0.5), log(0.25), log(0.25): a tie, the lower class first */
    const float scores[] = {logf(0.25f), logf(0.5f), logf(0.25f)};
    char *line = top_line(scores, 3, 3, 0);
    CU_ASSERT_STRING_EQUAL(line, "input 3: 1 0.5000, 0 0.2500, 2 0.2500\n");
    free(line);
    line = top_line(scores, 3, 2, 1);
    CU_ASSERT_STRING_EQUAL(line, "{\"input\": 3, \"classes\": [1, 0], \"probabilities\": [0.5, 0.25]}\n");
    free(line);
    /* scores far apart: the softmax from the largest does not overflow */
    const float wide[] = {-1000.0f, 1000.0f};
    line = top_line(wide, 2, 5, 0);
    CU_ASSERT_STRING_EQUAL(line, "input 3: 1 1.0000, 0 0.0000\n");
    free(line);
    /* a score that overflowed float: NaN probabilities, as PyTorch's softmax
     * gives, spelt null in JSON so that every line still parses */
    const float overflowed[] = {INFINITY, 1.0f};
    line = top_line(overflowed, 2, 2, 1);
    CU_ASSERT_STRING_EQUAL(line, "{\"input\": 3, \"classes\": [0, 1], \"probabilities\": [null, null]}\n");
    free(line);
    line = top_line(overflowed, 2, 2, 0);
    CU_ASSERT_STRING_EQUAL(line, "input 3: 0 nan, 1 nan\n");
    free(line);
}

void suite_confusion(void)
{
    static const TestCase cases[] = {
        {"counts, first-largest ties, the per-class lines and the JSON rows", test_counts_and_ties},
        {"--predict's lines: largest first, the lower of equal scores first, softmax probabilities", test_top_classes},
        {NULL, NULL},
    };
    test_add_suite("confusion", cases);
}
