/*
 * The confusion matrix of --eval-only (runtime/confusion.c), on scores made
 * by hand: the first largest score is the prediction (as the loss kernel
 * counts a correct one), a class's line names what it is taken for, and the
 * log's JSON rows hold the counts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "confusion.h"
#include "testutil.h"

static void test_counts_and_ties(void)
{
    DdpConfusion c;
    CU_ASSERT_EQUAL_FATAL(ddp_confusion_init(&c, 3), DDP_OK);
    CU_ASSERT(isnan(ddp_confusion_accuracy(&c)));
    /* four samples: right, right, a tie (the first of 1 and 2 wins: 1), wrong */
    static const float scores[] = {5, 1, 0, 0, 2, 1, -1, 3, 3, 0, 7, -2};
    static const uint8_t labels[] = {0, 1, 2, 0};
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
    ddp_confusion_print(&c, f);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(text, "class  samples  correct  accuracy  most often taken for\n"
                                 "    0        2        1    0.5000  1 (1)\n"
                                 "    1        1        1    1.0000  -\n"
                                 "    2        1        0    0.0000  1 (1)\n");
    free(text);
    ddp_confusion_free(&c);
}

void suite_confusion(void)
{
    static const TestCase cases[] = {
        {"counts, first-largest ties, the per-class lines and the JSON rows", test_counts_and_ties},
        {NULL, NULL},
    };
    test_add_suite("confusion", cases);
}
