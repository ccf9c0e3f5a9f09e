/*
 * Tests of runtime/buckets.c: PyTorch DDP's bucket assignment, pinned by
 * tables. Every table was computed by hand and checked against torch 1.13's
 * own torch.distributed._compute_bucket_assignment_by_size over the same
 * sizes (reverse parameter order) and caps: which parameters go together.
 * Where they lie is ddpc's own: each parameter starts on 4 floats (16
 * bytes), so a bucket's slice holds the few floats between its parameters.
 */
#include <stdio.h>
#include <string.h>

#include "buckets.h"  // ddp_buckets_plan, DdpBucket
#include "testutil.h"

enum { MB = 1 << 20 };

/* mnist.net's trainable parameters in reverse order: linear2.bias,
 * linear2.weight, linear1.bias, linear1.weight, conv2.bias, conv2.weight,
 * conv1.bias, conv1.weight (in parameter order 800, 32, 51200, 64, 131072,
 * 128, 1280, 10). */
static const int64_t mnist[] = {10, 1280, 128, 131072, 64, 51200, 32, 800};
/* laid out on 4 floats: linear2.weight at 12 (after 10), then 1292, 1420,
 * 132492, 132556, 183756, 183788, ending at 184588 */
enum { MNIST_N = 8, MNIST_LAID_OUT = 184588 };

/* The first multiple of 4 at or after END: worked out here, not with the
 * planner's own ddp_param_start. */
static int64_t on_four(int64_t end) { return (end + 3) / 4 * 4; }

/* The expected buckets as the number of parameters in each, in launch order. */
typedef struct {
    const char *name;
    int64_t cap, first;
    int n_buckets;
    int params[8];
} Case;

static const Case mnist_cases[] = {
    {"25 MB, first 1 MB (the default): one bucket", 25 * MB, 1 * MB, 1, {8}},
    {"0.1 MB everywhere", 104857, 104857, 3, {4, 2, 2}},
    {"0.1 MB, first 1 MB: the first bucket takes all", 104857, 1 * MB, 1, {8}},
    {"1 MB, first 0.1 MB", 1 * MB, 104857, 2, {4, 4}},
    {"4 KB", 4096, 4096, 4, {2, 2, 2, 2}},
    {"4 bytes: one parameter per bucket", 4, 4, 8, {1, 1, 1, 1, 1, 1, 1, 1}},
    {"0: one parameter per bucket", 0, 0, 8, {1, 1, 1, 1, 1, 1, 1, 1}},
    {"1 TB: one bucket", (int64_t)1 << 40, (int64_t)1 << 40, 1, {8}},
    {"first 4 bytes, then 25 MB", 25 * MB, 4, 2, {1, 7}},
    {"caps met exactly (40 bytes, then 5120)", 5120, 40, 5, {1, 1, 2, 2, 2}},
};

/* Checks BUCKETS against C over SIZES: which parameters, and the slices
 * they lie in, one after the other on 4 floats. */
static void check_case(const int64_t *sizes, int n, const Case *c)
{
    DdpBucket b[16];
    memset(b, 0xff, sizeof b);
    int got = ddp_buckets_plan(sizes, n, c->cap, c->first, b);
    char what[256];
    snprintf(what, sizeof what, "%s: %d buckets, expected %d", c->name, got, c->n_buckets);
    CU_assertImplementation(got == c->n_buckets, __LINE__, what, __FILE__, "", CU_FALSE);
    if (got != c->n_buckets)
        return;
    int param = 0;
    int64_t end = 0;
    for (int k = 0; k < got; k++) {
        const int64_t offset = on_four(end);
        for (int i = 0; i < c->params[k]; i++)
            end = on_four(end) + sizes[param + i];
        const int64_t count = end - offset;
        int ok = b[k].first == param && b[k].n_params == c->params[k] && b[k].offset == offset && b[k].count == count;
        snprintf(what, sizeof what,
                 "%s: bucket %d is [%lld, +%lld) params %d..+%d, expected [%lld, +%lld) params %d..+%d", c->name, k,
                 (long long)b[k].offset, (long long)b[k].count, b[k].first, b[k].n_params, (long long)offset,
                 (long long)count, param, c->params[k]);
        CU_assertImplementation(ok, __LINE__, what, __FILE__, "", CU_FALSE);
        param += c->params[k];
    }
    CU_ASSERT_EQUAL(param, n);
}

static void test_mnist_tables(void)
{
    for (size_t i = 0; i < sizeof mnist_cases / sizeof mnist_cases[0]; i++)
        check_case(mnist, MNIST_N, &mnist_cases[i]);
}

static void test_mnist_default_slices(void)
{
    /* the one bucket of the default caps is the whole flat gradient buffer */
    DdpBucket b[8];
    CU_ASSERT_EQUAL_FATAL(ddp_buckets_plan(mnist, MNIST_N, 25 * MB, 1 * MB, b), 1);
    CU_ASSERT_EQUAL(b[0].offset, 0);
    CU_ASSERT_EQUAL(b[0].count, MNIST_LAID_OUT);
    /* 0.1 MB: linear2 + linear1 (132490 elements, 132492 floats with 2
     * between linear2's bias and weight), conv2 (51264: 64 and 51200 need
     * none), conv1 (832) */
    CU_ASSERT_EQUAL_FATAL(ddp_buckets_plan(mnist, MNIST_N, 104857, 104857, b), 3);
    CU_ASSERT_EQUAL(b[0].count, 132492);
    CU_ASSERT_EQUAL(b[1].offset, 132492);
    CU_ASSERT_EQUAL(b[1].count, 51264);
    CU_ASSERT_EQUAL(b[2].offset, 183756);
    CU_ASSERT_EQUAL(b[2].count, 832);
}

static void test_large_net(void)
{
    /* a ResNet-like tail: fc 1000, a 2 MB layer, four 9 MB convolutions, bn, stem */
    static const int64_t sizes[] = {1000, 512000, 2359296, 2359296, 2359296, 2359296, 64, 9408};
    static const Case cases[] = {
        {"25 MB, first 1 MB", 25 * MB, 1 * MB, 3, {2, 3, 3}},
        {"10 MB everywhere", 10 * MB, 10 * MB, 3, {3, 2, 3}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(sizes, 8, &cases[i]);
}

static void test_edges(void)
{
    DdpBucket b[2];
    CU_ASSERT_EQUAL(ddp_buckets_plan(NULL, 0, 25 * MB, MB, b), 0);
    static const int64_t one[] = {7};
    CU_ASSERT_EQUAL_FATAL(ddp_buckets_plan(one, 1, 25 * MB, MB, b), 1);
    CU_ASSERT_EQUAL(b[0].offset, 0);
    CU_ASSERT_EQUAL(b[0].count, 7);
    CU_ASSERT_EQUAL(b[0].first, 0);
    CU_ASSERT_EQUAL(b[0].n_params, 1);
    /* a parameter larger than the cap closes the bucket it joins; it is never split */
    static const int64_t big[] = {10, 1000000, 10};
    DdpBucket c[3];
    CU_ASSERT_EQUAL_FATAL(ddp_buckets_plan(big, 3, 1000, 1000, c), 2);
    CU_ASSERT_EQUAL(c[0].n_params, 2);
    CU_ASSERT_EQUAL(c[0].count, 1000012); /* 10, then from 12 */
    CU_ASSERT_EQUAL(c[1].n_params, 1);
}

void suite_buckets(void)
{
    static const TestCase cases[] = {
        {"mnist's 8 parameters under ten caps, as torch assigns them", test_mnist_tables},
        {"buckets are contiguous slices of the flat gradients", test_mnist_default_slices},
        {"a large net under the 25 MB and a 10 MB cap", test_large_net},
        {"no parameter, one parameter, one larger than the cap", test_edges},
        {NULL, NULL},
    };
    test_add_suite("buckets", cases);
}
