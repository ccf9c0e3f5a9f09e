/*
 * Tests of the memory planner's placement (plan.c, plan_place): that it is
 * the placement its comment promises, and that it stays O(n log n) on long
 * nets.
 *
 * The promise: buffers in order of first use (then of creation), each at the
 * lowest place free for its whole lifetime. The reference below computes that
 * by brute force, straight from the definition (every candidate place against
 * every buffer placed before), on random lifetimes and on the storages of a
 * real net; the planner must give the same offsets and arena sizes.
 *
 * Speed is held through the planner's own step count (Plan.place_work), never
 * the clock: a scan of the live buffers per placement, as the planner once
 * did, takes steps quadratic in the net's length and fails the bound.
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddpc.h"
#include "planned_net.h"  // PlannedNet: a source through the front end and planner

/* What a storage of FLOATS takes in the arena: whole units of PLAN_ARENA_ALIGN. */
static int64_t taken(int64_t floats) { return (floats + PLAN_ARENA_ALIGN - 1) / PLAN_ARENA_ALIGN * PLAN_ARENA_ALIGN; }

/* The definition, by brute force: O(n^3), for small n. OFFSET gets each
 * storage's place; *PER_SAMPLE and *FIXED the two regions' sizes. */
static void reference_place(const Storage *s, int n, int64_t *offset, int64_t *per_sample, int64_t *fixed)
{
    int *order = malloc(sizeof *order * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++) /* stable: by start, then creation */
        for (int j = i; j > 0 && s[order[j - 1]].start > s[order[j]].start; j--) {
            int k = order[j];
            order[j] = order[j - 1];
            order[j - 1] = k;
        }
    *per_sample = *fixed = 0;
    for (int oi = 0; oi < n; oi++) {
        int i = order[oi];
        if (s[i].per_sample <= 0) {
            offset[i] = taken(*fixed);
            *fixed = offset[i] + s[i].fixed;
            continue;
        }
        /* the lowest place is 0 or the end of some earlier buffer */
        int64_t best = -1;
        for (int ci = -1; ci < oi; ci++) {
            int c = ci < 0 ? -1 : order[ci];
            if (c >= 0 && s[c].per_sample <= 0)
                continue;
            int64_t at = c < 0 ? 0 : offset[c] + taken(s[c].per_sample);
            if (best >= 0 && at >= best)
                continue;
            bool free_here = true;
            for (int pj = 0; pj < oi && free_here; pj++) {
                int q = order[pj];
                bool same_time = s[q].start <= s[i].end && s[i].start <= s[q].end;
                bool same_place = offset[q] < at + taken(s[i].per_sample) && at < offset[q] + taken(s[q].per_sample);
                if (s[q].per_sample > 0 && same_time && same_place)
                    free_here = false;
            }
            if (free_here)
                best = at;
        }
        offset[i] = best;
        if (best + taken(s[i].per_sample) > *per_sample)
            *per_sample = best + taken(s[i].per_sample);
    }
    free(order);
}

/* Checks P's placement (already made) against the reference. */
static void check_against_reference(const Plan *p)
{
    int n = p->n_storages;
    int64_t *want = malloc(sizeof *want * (size_t)(n + 1)), per_sample, fixed;
    reference_place(p->storages, n, want, &per_sample, &fixed);
    int wrong = 0;
    for (int i = 0; i < n; i++)
        if (p->storages[i].offset != want[i] && wrong++ < 3)
            fprintf(stderr, "\n  storage %d of %d [%d, %d] size %lld: at %lld, the reference says %lld", i, n,
                    p->storages[i].start, p->storages[i].end, (long long)p->storages[i].per_sample,
                    (long long)p->storages[i].offset, (long long)want[i]);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(p->arena_per_sample, per_sample);
    CU_ASSERT_EQUAL(p->arena_fixed, fixed);
    /* every buffer on 128 bytes at any batch: its place, and the batch
     * region's size per sample, which the fixed region follows */
    int unaligned = 0;
    for (int i = 0; i < n; i++)
        unaligned += p->storages[i].offset % PLAN_ARENA_ALIGN != 0;
    CU_ASSERT_EQUAL(unaligned, 0);
    CU_ASSERT_EQUAL(p->arena_per_sample % PLAN_ARENA_ALIGN, 0);
    free(want);
}

static uint32_t rand_next(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

/* Random lifetimes, many sharing a start (as a node's output and scratch do),
 * sizes from 1 to 40 (one or two units of PLAN_ARENA_ALIGN) and to 160 (up to
 * five, so runs freed side by side must join to fit), some fixed. */
static void test_random_lifetimes(void)
{
    for (uint32_t seed = 1; seed <= 300; seed++) {
        uint32_t x = seed * 2654435761u;
        int n = 1 + (int)(rand_next(&x) % 200), horizon = 1 + (int)(rand_next(&x) % (unsigned)(2 * n));
        Plan p = {0};
        p.storages = calloc((size_t)n, sizeof *p.storages);
        p.n_storages = p.storages_cap = n;
        for (int i = 0; i < n; i++) {
            Storage *s = &p.storages[i];
            s->start = (int)(rand_next(&x) % (unsigned)horizon);
            s->end = s->start + (int)(rand_next(&x) % (rand_next(&x) % 4 ? 8u : (unsigned)horizon + 1));
            if (rand_next(&x) % 8 == 0)
                s->fixed = 1 + rand_next(&x) % 9;
            else
                s->per_sample = 1 + rand_next(&x) % (rand_next(&x) % 2 ? 40u : 5u * PLAN_ARENA_ALIGN);
            s->offset = -1;
        }
        plan_place(&p);
        check_against_reference(&p);
        free(p.storages);
    }
}

/* A net of GROUPS blocks mixing every kind of buffer the planner places:
 * activations, gradients (some aliased), maxpool argmaxes, batchnorm's fixed
 * scratch, residual sums. */
static char *mixed_net(int groups)
{
    char *src;
    size_t len;
    FILE *f = open_memstream(&src, &len);
    fputs("input 4x8x8\n", f);
    for (int g = 0; g < groups; g++) {
        fputs("conv 4->4 k3 p1; batchnorm; relu\n", f);
        fputs(g % 3 ? "residual { conv 4 k3 p1; tanh }\n" : "residual { conv 4 k3 p1; relu; conv 4 k1 }\n", f);
        fputs(g % 4 == 1 ? "gelu\n" : "sigmoid\n", f);
    }
    fputs("maxpool 2; flatten; linear 16; relu; dropout 0.5; linear 10\nloss cross_entropy\n", f);
    fclose(f);
    return src;
}

/* plan_net's storages of a real net, placed again by the reference. */
static void test_real_net_matches_reference(void)
{
    char *src = mixed_net(40);
    PlannedNet c;
    if (planned_net(&c, src)) {
        CU_ASSERT(c.plan.n_storages > 200);
        check_against_reference(&c.plan);
    } else
        CU_FAIL("the mixed net does not compile");
    planned_net_release(&c);
    free(src);
}

/* Steps of the placer on a long net, against c n log2 n. A plain relu chain
 * keeps every activation live until backward, the worst case for a scan of
 * the live buffers (about n^2 / 8 steps here); the mixed net adds joins and
 * fixed buffers. The bound leaves room for the treap's depth. */
static void check_work_bound(const char *what, const char *src)
{
    PlannedNet c;
    if (!planned_net(&c, src)) {
        CU_FAIL("the long net does not compile");
        planned_net_release(&c);
        return;
    }
    double n = c.plan.n_storages, bound = 8 * n * log2(n);
    if ((double)c.plan.place_work > bound)
        fprintf(stderr, "\n  %s: %d storages placed in %lld steps, over the bound %.0f", what, c.plan.n_storages,
                (long long)c.plan.place_work, bound);
    CU_ASSERT(c.plan.n_storages >= 40000);
    CU_ASSERT((double)c.plan.place_work <= bound);
    planned_net_release(&c);
}

static void test_long_nets_plan_in_n_log_n(void)
{
    enum { RELUS = 100000 }; /* the 100k layers of the issue that found the quadratic planner */
    char *src;
    size_t len;
    FILE *f = open_memstream(&src, &len);
    fputs("input 64\n", f);
    for (int i = 0; i < RELUS; i++)
        fputs("relu\n", f);
    fputs("linear 10\nloss cross_entropy\n", f);
    fclose(f);
    check_work_bound("relu chain", src);
    free(src);

    src = mixed_net(6000);
    check_work_bound("mixed net", src);
    free(src);
}

void suite_plan_scale(void)
{
    static const TestCase cases[] = {
        {"placement equals the brute-force lowest free place on random lifetimes", test_random_lifetimes},
        {"placement of a real net equals the brute-force reference", test_real_net_matches_reference},
        {"long nets (100,000 relus; a mixed net) are placed in O(n log n) steps", test_long_nets_plan_in_n_log_n},
        {NULL, NULL},
    };
    test_add_suite("plan_scale", cases);
}
