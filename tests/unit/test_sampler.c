/*
 * Tests of runtime/sampler.c against tables that torch 1.13 itself produced
 * (tests/unit/sampler_tables.h, from tools/gen_sampler_tables.py): every
 * index of every case must match, bit for bit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"         // ddp_sampler_init, ddp_sampler_epoch, ddp_randperm
#include "sampler_tables.h"  // sampler_cases, randperm_cases, sampler_pool
#include "testutil.h"

static uint64_t fnv1a(const int64_t *v, int64_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (int64_t i = 0; i < n; i++)
        h = (h ^ (uint64_t)v[i]) * 0x100000001b3u;
    return h;
}

/* 1 when V[0..n) matches the kept head and tail of a table entry. */
static int matches_kept(const int64_t *v, int64_t n, int kept, int at)
{
    const int64_t *want = sampler_pool + at;
    if (kept == n) {
        for (int64_t i = 0; i < n; i++)
            if (v[i] != want[i])
                return 0;
        return 1;
    }
    if (kept != 2 * SAMPLER_HEAD_TAIL || n < kept)
        return 0;
    for (int i = 0; i < SAMPLER_HEAD_TAIL; i++)
        if (v[i] != want[i] || v[n - SAMPLER_HEAD_TAIL + i] != want[SAMPLER_HEAD_TAIL + i])
            return 0;
    return 1;
}

static void test_mt19937_reference(void)
{
    /* The 10000th draw of mt19937 seeded 5489 is 4123659995 (C++11 [rand.predef]). */
    DdpMt19937 mt;
    ddp_mt19937_seed(&mt, 5489);
    uint32_t v = 0;
    for (int i = 0; i < 10000; i++)
        v = ddp_mt19937_next(&mt);
    CU_ASSERT_EQUAL(v, 4123659995u);
}

static void test_randperm_matches_torch(void)
{
    int n_cases = (int)(sizeof randperm_cases / sizeof randperm_cases[0]);
    int bad = 0;
    for (int c = 0; c < n_cases; c++) {
        const RandpermCase *rc = &randperm_cases[c];
        int64_t *perm = malloc((size_t)(rc->n ? rc->n : 1) * sizeof *perm);
        CU_ASSERT_FATAL(perm != NULL);
        CU_ASSERT_EQUAL(ddp_randperm(rc->n, (uint64_t)rc->seed, perm), DDP_OK);
        if (fnv1a(perm, rc->n) != rc->hash || !matches_kept(perm, rc->n, rc->kept, rc->at)) {
            if (bad++ < 5)
                fprintf(stderr, "\nrandperm(%lld) seed %lld differs from torch",
                        (long long)rc->n, (long long)rc->seed);
        }
        free(perm);
    }
    CU_ASSERT_EQUAL(bad, 0);
}

static void test_sampler_matches_torch(void)
{
    int n_cases = (int)(sizeof sampler_cases / sizeof sampler_cases[0]);
    int bad = 0;
    for (int c = 0; c < n_cases; c++) {
        const SamplerCase *sc = &sampler_cases[c];
        DdpSampler s;
        CU_ASSERT_EQUAL_FATAL(ddp_sampler_init(&s, sc->n, sc->replicas, sc->rank, sc->shuffle,
                                               sc->seed, sc->drop_last), DDP_OK);
        int ok = s.num_samples == sc->len && s.total == sc->len * sc->replicas;
        if (ok) {
            int64_t *idx = malloc((size_t)(sc->len ? sc->len : 1) * sizeof *idx);
            CU_ASSERT_FATAL(idx != NULL);
            CU_ASSERT_EQUAL(ddp_sampler_epoch(&s, sc->epoch, idx), DDP_OK);
            ok = fnv1a(idx, sc->len) == sc->hash && matches_kept(idx, sc->len, sc->kept, sc->at);
            free(idx);
        }
        if (!ok && bad++ < 5)
            fprintf(stderr, "\nsampler n=%lld R=%d rank=%d shuffle=%d seed=%lld epoch=%lld drop_last=%d "
                    "differs from torch", (long long)sc->n, sc->replicas, sc->rank, sc->shuffle,
                    (long long)sc->seed, (long long)sc->epoch, sc->drop_last);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(n_cases > 1000);
}

/* Every sample is visited once per epoch when R divides N, and the ranks'
 * lists together cover everything otherwise: what DDP training relies on. */
static void test_sampler_partitions(void)
{
    enum { N = 1003, R = 4 };
    static int64_t seen[N];
    for (int i = 0; i < N; i++)
        seen[i] = 0;
    for (int r = 0; r < R; r++) {
        DdpSampler s;
        CU_ASSERT_EQUAL_FATAL(ddp_sampler_init(&s, N, R, r, 1, 5, 0), DDP_OK);
        CU_ASSERT_EQUAL(s.num_samples, 251);
        int64_t idx[251];
        CU_ASSERT_EQUAL(ddp_sampler_epoch(&s, 3, idx), DDP_OK);
        for (int k = 0; k < 251; k++) {
            CU_ASSERT_FATAL(idx[k] >= 0 && idx[k] < N);
            seen[idx[k]]++;
        }
    }
    int64_t missing = 0, repeated = 0;
    for (int i = 0; i < N; i++) {
        missing += seen[i] == 0;
        repeated += seen[i] > 1 ? seen[i] - 1 : 0;
    }
    CU_ASSERT_EQUAL(missing, 0);
    CU_ASSERT_EQUAL(repeated, 1);  /* 1004 slots for 1003 samples */
}

static void test_sampler_bad_args(void)
{
    DdpSampler s;
    CU_ASSERT_EQUAL(ddp_sampler_init(&s, 0, 1, 0, 1, 0, 0), DDP_BAD_INPUT);
    CU_ASSERT_EQUAL(ddp_sampler_init(&s, 10, 0, 0, 1, 0, 0), DDP_BAD_INPUT);
    CU_ASSERT_EQUAL(ddp_sampler_init(&s, 10, 4, 4, 1, 0, 0), DDP_BAD_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(ddp_error_message(), "rank 4 is out of range for world size 4"));
    CU_ASSERT_EQUAL(ddp_sampler_init(&s, 10, 4, -1, 1, 0, 0), DDP_BAD_INPUT);
    CU_ASSERT_EQUAL(ddp_randperm(-1, 0, NULL), DDP_BAD_INPUT);
    /* Fewer samples than ranks with drop_last leaves every rank empty, as in torch. */
    CU_ASSERT_EQUAL(ddp_sampler_init(&s, 3, 8, 7, 1, 0, 1), DDP_OK);
    CU_ASSERT_EQUAL(s.num_samples, 0);
    CU_ASSERT_EQUAL(ddp_sampler_epoch(&s, 0, NULL), DDP_OK);
}

void suite_sampler(void)
{
    static const TestCase cases[] = {
        {"mt19937 matches the C++ standard's check value", test_mt19937_reference},
        {"randperm matches torch 1.13, n up to 100000", test_randperm_matches_torch},
        {"DistributedSampler matches torch for every case", test_sampler_matches_torch},
        {"ranks together cover the data set", test_sampler_partitions},
        {"bad arguments are rejected with a message", test_sampler_bad_args},
        {NULL, NULL},
    };
    test_add_suite("sampler", cases);
}
