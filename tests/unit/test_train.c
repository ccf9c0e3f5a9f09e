/*
 * End to end on real data: examples/mnist.net compiled for the CPU trains on
 * Fashion-MNIST (Debian's dataset-fashion-mnist) as a user runs it. The full
 * run (0.86 test accuracy after 2 epochs, 0.91 within 10) takes minutes and
 * is reported in the closing notes; CI runs the first 300 steps, which must
 * already reach 0.70 test accuracy (0.78 measured) from a loss of ln 10.
 * Skipped where the data set is not installed.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_mnist_trains_on_fashion_mnist(void)
{
    if (test_run("test -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", NULL) != 0) {
        fputs("\n  (skipped: no Fashion-MNIST)", stderr);
        return;
    }
    char *cmd, *out = NULL;
    CU_ASSERT_FATAL(asprintf(&cmd,
                             "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; %s examples/mnist.net --target cpu -o $d/m; "
                             "$d/m --max-steps 300 --log $d/log.jsonl > $d/out.txt; cat $d/out.txt; "
                             "grep -o '\"test_acc\": *[0-9.]*' $d/log.jsonl | tail -1",
                             test_ddpc()) > 0);
    CU_ASSERT_EQUAL(test_run(cmd, &out), 0);
    const char *acc = out ? strstr(out, "\"test_acc\":") : NULL;
    double value = acc ? atof(strchr(acc, ':') + 1) : 0;
    fprintf(stderr, "\n    test accuracy after 300 steps: %.4f", value);
    CU_ASSERT(value >= 0.70);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "epoch 1/10  step 300"));
    free(out);
    free(cmd);
}

void suite_train(void)
{
    static const TestCase cases[] = {
        {"mnist.net trains on Fashion-MNIST: 300 steps reach 0.70", test_mnist_trains_on_fashion_mnist},
        {NULL, NULL},
    };
    test_add_suite("train [g++, python]", cases);
}
